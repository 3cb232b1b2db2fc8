"""The seeds' pipeline (`samsa pipeline`, `make run`): Protobuf order events through Samsa's
schema registry (events), a Spark driver process (driver; the job is samsa.spark.pipeline_job)
writing windowed revenue exactly once into the warehouse (warehouse), and a Kafka Connect worker
with the Snowflake-shaped sink landing the raw events (connect)."""
