"""The one SparkSession factory: local[*] by default, any cluster by config alone.

Example:
    >>> spark = spark_session(load_stack(None), app="card-velocity")  # doctest: +SKIP

The Kafka connector jars (resolved by `make setup` into .cache/jars/spark-kafka) are passed as
`spark.jars`, so nothing is downloaded at session start and the stack works offline.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from core.config import StackConfig
from core.errors import StreamsimError
from core.jvm import RESOLVE_HINT, spark_kafka_jars

LOG4J2 = Path(__file__).with_name("log4j2.properties")
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_conf(stack: StackConfig, app: str) -> dict[str, str]:
    """The Spark settings for `app`; stack.spark.conf entries win over the defaults."""
    jars = spark_kafka_jars(stack)
    if not any(j.name.startswith("spark-sql-kafka") for j in jars):
        raise StreamsimError(f"Spark's Kafka connector is not cached: {RESOLVE_HINT}")
    spark = stack.spark
    conf = {
        "spark.master": spark.master,
        "spark.app.name": f"{spark.app_name}-{app}",
        "spark.jars": ",".join(str(j.resolve()) for j in jars),
        "spark.driver.memory": spark.driver_memory,
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.checkpointLocation": str((stack.dirs.checkpoints / app).resolve()),
        "spark.sql.warehouse.dir": str((stack.dirs.data / "spark-warehouse").resolve()),
        "spark.sql.adaptive.enabled": "false",  # streaming ignores AQE; keep batch plans comparable
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2.resolve()} "
        f"-Dderby.system.home={stack.dirs.data.resolve()}",
    }
    conf.update(spark.conf)
    return conf


def spark_is_local(stack: StackConfig) -> bool:
    return stack.spark.master.startswith("local")


def spark_session(stack: StackConfig, app: str) -> SparkSession:
    """Get or create the session; Spark's console noise is quieted to stack.spark.log_level."""
    # Python workers must run the interpreter that runs the driver (the project's .venv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if spark_is_local(stack):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    for key, value in spark_conf(stack, app).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(stack.spark.log_level)
    return session


def use_rocksdb_state(spark: SparkSession) -> None:
    """RocksDB state with changelog checkpointing, for queries started after this call.

    transformWithState needs RocksDB state (recorded per checkpoint at its first batch);
    changelog checkpointing commits a small changelog per batch instead of a snapshot.
    """
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
