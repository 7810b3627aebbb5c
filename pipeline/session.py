"""The one SparkSession factory: local[*] by default, any cluster by config alone.

Example:
    >>> spark = spark_session(load_stack(None), app="cards")  # doctest: +SKIP

The Kafka connector jars (resolved by `make setup` into .cache/jars/spark-kafka) are passed as
`spark.jars`, so nothing is downloaded at session start and the stack works offline. On a
cluster master the session also ships the project's packages to the executors
(`pipeline.packaging`).

Logs: the JVM the session starts writes its stdout and stderr (log4j's console appender,
`log4j2.properties`, and what its Python workers print, such as transformWithStateInPandas'
"Python worker" lines) to `spark_log_file(stack)`, `.data/logs/spark.log`, not to the
terminal; so does py4j's Python logger. Spark's errors still reach the caller as exceptions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from core.config import StackConfig
from core.errors import StreamsimError
from core.jvm import RESOLVE_HINT, spark_kafka_jars
from core.kafka.clients import CLIENT_LOGGER
from pipeline.packaging import ship_packages
from pipeline.settings import StateStore

LOG4J2 = Path(__file__).with_name("log4j2.properties")
FAIR_POOLS = Path(__file__).with_name("fairscheduler.xml")
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
MEMORY = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
#: Checkpoint files renamed by Hadoop's FileSystem API, not FileContext (see `spark_conf`).
FILE_SYSTEM_CHECKPOINTS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


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
        "spark.sql.shuffle.partitions": str(spark.partitions()),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.checkpointLocation": str((stack.dirs.checkpoints / app).resolve()),
        "spark.sql.warehouse.dir": str((stack.dirs.data / "spark-warehouse").resolve()),
        "spark.sql.adaptive.enabled": "false",  # streaming ignores AQE; keep batch plans comparable
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Queries in pools (`scheduler_pool`): a job's alerts do not queue behind its stats.
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(FAIR_POOLS.resolve()),
        # Checkpoints live on the local file system (`stack.dirs.checkpoints`). Spark's default
        # manager renames each file through Hadoop's FileContext, which, without libhadoop
        # (a pip install has none), runs `readlink` in a child process per rename: 2,100 of
        # them in a vehicle job run over 200,000 readings, 4-29% of its CPU. FileSystem's
        # rename is rename(2), atomic on a local file system.
        "spark.sql.streaming.checkpointFileManagerClass": FILE_SYSTEM_CHECKPOINTS,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2.resolve()} "
        f"-Dderby.system.home={stack.dirs.data.resolve()}",
    }
    conf.update(spark.conf)
    return conf


def spark_is_local(stack: StackConfig) -> bool:
    return stack.spark.master.startswith("local")


def needs_packages(stack: StackConfig) -> bool:
    """Executors elsewhere cannot import the checkout: ship the zip unless one is configured.

    >>> from core.config import StackConfig
    >>> needs_packages(StackConfig.model_validate({"spark": {"master": "spark://m:7077"}}))
    True
    >>> needs_packages(StackConfig.model_validate({"spark": {"master": "local[2]"}}))
    False
    """
    return not spark_is_local(stack) and "spark.submit.pyFiles" not in stack.spark.conf


def spark_log_file(stack: StackConfig) -> Path:
    """Where the Spark JVM's output and py4j's log go (see the module docstring)."""
    return (stack.dirs.data / "logs" / "spark.log").resolve()


@contextlib.contextmanager
def _jvm_output_to(log: Path) -> Iterator[None]:
    """While a JVM is launched, file descriptors 1 and 2 point at `log`: the JVM inherits them
    (and keeps them), this process gets its own back. Nothing to do once a JVM runs."""
    if SparkContext._gateway is not None:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with log.open("ab") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _log_to(log: Path, name: str) -> None:
    logger = logging.getLogger(name)
    if not any(getattr(h, "baseFilename", None) == str(log) for h in logger.handlers):
        handler = logging.FileHandler(log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.propagate = False


def spark_session(stack: StackConfig, app: str) -> SparkSession:
    """Get or create the session; Spark's own output goes to `spark_log_file(stack)`."""
    # Python workers must run the interpreter that runs the driver (the project's .venv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if spark_is_local(stack):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    for key, value in spark_conf(stack, app).items():
        builder = builder.config(key, value)
    log = spark_log_file(stack)
    fresh = SparkContext._active_spark_context is None
    with _jvm_output_to(log):
        session = builder.getOrCreate()
    if fresh and needs_packages(stack):
        ship_packages(session, stack)
    for name in ("py4j", CLIENT_LOGGER):  # the driver's Kafka clients (alert sinks, metrics)
        _log_to(log, name)
    session.sparkContext.setLogLevel(stack.spark.log_level)
    return session


@contextlib.contextmanager
def scheduler_pool(spark: SparkSession, pool: str) -> Iterator[None]:
    """Queries started inside run their batches in FAIR pool `pool` (`fairscheduler.xml`)."""
    context = spark.sparkContext
    before = context.getLocalProperty("spark.scheduler.pool")
    context.setLocalProperty("spark.scheduler.pool", pool)
    try:
        yield
    finally:
        context.setLocalProperty("spark.scheduler.pool", before)  # type: ignore[arg-type]


def use_rocksdb_state(spark: SparkSession) -> None:
    """RocksDB state with changelog checkpointing, for queries started after this call.

    transformWithState needs RocksDB state (recorded per checkpoint at its first batch);
    changelog checkpointing commits a small changelog per batch instead of a snapshot.
    """
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")


def use_state_store(spark: SparkSession, store: StateStore) -> None:
    """`store` state for queries started after this call: "rocksdb" (`use_rocksdb_state`) or
    "memory", Spark's default HDFS-backed store, which keeps each operator's state in the JVM's
    heap and snapshots it to the checkpoint. A checkpoint keeps the store it was created with.
    """
    if store == "rocksdb":
        use_rocksdb_state(spark)
    else:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", MEMORY)
