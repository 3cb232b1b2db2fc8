"""A quiet, fast local SparkSession (settings measured in shared notes: local[N], UI off, UTC,
small shuffle, log4j2 at WARN), with format("samsa") registered."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

LOG4J2 = Path(__file__).with_name("log4j2.properties")


def local_session(app: str = "samsa", cores: int = 2, **conf: str) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    b = (SparkSession.builder.appName(app).master(f"local[{cores}]")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(cores))
         .config("spark.default.parallelism", str(cores))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{LOG4J2}")
         .config("spark.sql.streaming.stateStore.stateSchemaCheck", "false"))
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    from . import register
    register(spark)
    return spark
