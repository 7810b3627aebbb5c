"""The hand-made inputs of the jobs' integration tests and the pure-Python oracles computed from
them (the detectors' batch forms), shared by the tests that run a job on them: on `local[2]`
(`tests/integration/test_pipeline_*.py`) and on a Spark standalone cluster
(`tests/integration/test_spark_standalone.py`)."""
