# streamsim: `make demo` and `make test` are the two set-up commands; both run `make setup` first.
SHELL := /bin/bash
PY_VERSION ?= 3.11
UV_VERSION := 0.13.8
CACHE := .cache
VENV := .venv
UV := $(CACHE)/uv/bin/uv
MVN := mvn -q -B -s jvm/settings.xml -Dmaven.repo.local=$(CACHE)/m2
KAFKA_JARS := $(CACHE)/jars/kafka/.resolved
SPARK_JARS := $(CACHE)/jars/spark-kafka/.resolved
# Only the connector and what PySpark does not already ship (no second scala-library or Hadoop client).
SPARK_KAFKA_ARTIFACTS := spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2

.PHONY: setup demo test test-unit lint format typecheck clean

setup: $(VENV)/.synced $(KAFKA_JARS) $(SPARK_JARS)

$(UV):
	python3 -m venv $(CACHE)/uv
	$(CACHE)/uv/bin/pip install -q "uv==$(UV_VERSION)"

$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --locked --python $(PY_VERSION) -q
	touch $@

$(KAFKA_JARS): jvm/kafka-broker/pom.xml jvm/settings.xml
	rm -rf $(CACHE)/jars/kafka
	$(MVN) -f $< dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(CACHE)/jars/kafka
	touch $@

$(SPARK_JARS): jvm/spark-kafka/pom.xml jvm/settings.xml
	rm -rf $(CACHE)/jars/spark-kafka
	$(MVN) -f $< dependency:copy-dependencies -DincludeArtifactIds=$(SPARK_KAFKA_ARTIFACTS) -DoutputDirectory=$(CURDIR)/$(CACHE)/jars/spark-kafka
	touch $@

demo: setup
	$(VENV)/bin/streamsim demo

test: setup
	$(VENV)/bin/python -m pytest

test-unit: setup
	$(VENV)/bin/python -m pytest -m "not integration"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	-$(VENV)/bin/streamsim kafka down 2>/dev/null
	rm -rf $(VENV) .data spark-warehouse .pytest_cache .mypy_cache .ruff_cache
	@echo "kept $(CACHE)/ (downloaded jars and wheels); remove it by hand for a cold start"
