"""The Spark jobs, by the name `streamsim pipeline run JOB` takes."""

from collections.abc import Callable

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from pipeline.config import PipelineConfig
from pipeline.jobs import window_counts
from streamsim.config import StackConfig

Job = Callable[[SparkSession, StackConfig, PipelineConfig], list[StreamingQuery]]

JOBS: dict[str, Job] = {"window-counts": window_counts.start}
