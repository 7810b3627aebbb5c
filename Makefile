# streamsim: `make demo` and `make test` are the two set-up commands; both run `make setup` first.
SHELL := /bin/bash
PY_VERSION ?= 3.11
UV_VERSION := 0.13.8
CACHE := .cache
VENV := .venv
# The worked examples' own environment: engines whose pins clash with the project's (Quix
# Streams wants an older confluent-kafka and pydantic) stay out of pyproject.toml and uv.lock.
EXAMPLES_VENV := .venv-examples
EXAMPLES_REQS := examples/quix_flatline/requirements.txt
UV := $(CACHE)/uv/bin/uv
KAFKA_JARS := $(CACHE)/jars/kafka/.resolved
MIRROR_JARS := $(CACHE)/jars/kafka-mirror/.resolved
SPARK_JARS := $(CACHE)/jars/spark-kafka/.resolved
# The jars come from Maven Central through the Ivy inside PySpark, checked against jvm/jars.lock.
RESOLVE := $(VENV)/bin/python jvm/resolve.py
RESOLVE_INPUTS := jvm/resolve.py jvm/ivysettings.xml jvm/jars.lock

.PHONY: setup examples java demo test test-unit lint format typecheck clean

setup: java $(VENV)/.synced $(KAFKA_JARS) $(MIRROR_JARS) $(SPARK_JARS) examples

# Java 17+ (JAVA_HOME, else PATH); installed with apt as root on Debian/Ubuntu, else named.
java:
	@jvm/java.sh

$(UV):
	python3 -m venv $(CACHE)/uv
	$(CACHE)/uv/bin/pip install -q "uv==$(UV_VERSION)"

# Bytecode is compiled once here: Spark starts fresh Python workers, which would otherwise
# recompile pandas and pyspark each time (nothing writes .pyc under PYTHONDONTWRITEBYTECODE).
$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --locked --compile-bytecode --python $(PY_VERSION) -q
	touch $@

# Pinned by `uv pip compile examples/quix_flatline/requirements.in`; about 11 s from PyPI cold.
examples: $(EXAMPLES_VENV)/.synced

$(EXAMPLES_VENV)/.synced: $(EXAMPLES_REQS) | $(UV)
	$(UV) venv --allow-existing -q --python $(PY_VERSION) $(EXAMPLES_VENV)
	$(UV) pip sync -q --python $(EXAMPLES_VENV)/bin/python $(EXAMPLES_REQS)
	touch $@

$(KAFKA_JARS): jvm/kafka.ivy.xml $(RESOLVE_INPUTS) | java $(VENV)/.synced
	$(RESOLVE) kafka

# MirrorMaker 2 (`streamsim kafka mirror`): two jars, run on the kafka set's classpath.
$(MIRROR_JARS): jvm/kafka-mirror.ivy.xml $(RESOLVE_INPUTS) | java $(VENV)/.synced
	$(RESOLVE) kafka-mirror

$(SPARK_JARS): jvm/spark-kafka.ivy.xml $(RESOLVE_INPUTS) | java $(VENV)/.synced
	$(RESOLVE) spark-kafka

demo: setup
	$(VENV)/bin/streamsim demo

# Two workers, one broker each: the tests that share the in-process SparkSession run on one,
# module by module, the rest on the other (tests/xdist_groups.py). The run ends with its
# total and its slowest tests; every test's time and a JUnit report stay in $(REPORTS).
REPORTS := .data/test-reports
PYTEST_PARALLEL := -n 2 --dist loadscope --no-loadscope-reorder

test: setup
	$(VENV)/bin/python -m pytest $(PYTEST_PARALLEL) --junitxml=$(REPORTS)/junit.xml

test-unit: setup
	$(VENV)/bin/python -m pytest $(PYTEST_PARALLEL) -m "not integration" \
		--junitxml=$(REPORTS)/junit-unit.xml

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/python .ci/commit_subjects.py

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	-$(VENV)/bin/streamsim kafka mirror down 2>/dev/null
	-$(VENV)/bin/streamsim kafka down --cluster port 2>/dev/null
	-$(VENV)/bin/streamsim kafka down 2>/dev/null
	rm -rf $(VENV) $(EXAMPLES_VENV) .data spark-warehouse .pytest_cache .mypy_cache .ruff_cache
	@echo "kept $(CACHE)/ (downloaded jars and wheels); remove it by hand for a cold start"
