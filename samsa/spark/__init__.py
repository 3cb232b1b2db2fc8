"""PySpark integration: the `samsa` data source (Spark's Kafka source and sink options and schema,
through the Python Data Source API), a quiet local session helper, and schema-registry decoding.

    from samsa.spark import register
    register(spark)
    spark.read.format("samsa").option("kafka.bootstrap.servers", bs).option("subscribe", "t").load()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register format("samsa") with this session."""
    from .source import SamsaDataSource
    spark.dataSource.register(SamsaDataSource)


def local_session(app: str = "samsa", cores: int = 2, **conf: str) -> SparkSession:
    from .session import local_session as _local
    return _local(app, cores, **conf)


__all__ = ["register", "local_session"]
