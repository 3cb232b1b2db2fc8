"""Samsa's built-in connectors, under the class names Kafka Connect (and Confluent's datagen)
give them, so connector configs written for Kafka work unchanged."""

from __future__ import annotations

PLUGINS: dict[str, str] = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector":
        "samsa.connect.connectors.file_source:FileStreamSourceConnector",
    "org.apache.kafka.connect.file.FileStreamSinkConnector":
        "samsa.connect.connectors.file_sink:FileStreamSinkConnector",
    "org.apache.kafka.connect.tools.VerifiableSourceConnector":
        "samsa.connect.connectors.verifiable:VerifiableSourceConnector",
    "org.apache.kafka.connect.tools.VerifiableSinkConnector":
        "samsa.connect.connectors.verifiable:VerifiableSinkConnector",
    "io.confluent.kafka.connect.datagen.DatagenConnector":
        "samsa.connect.connectors.datagen:DatagenConnector",
    "io.debezium.connector.postgresql.PostgresConnector":
        "samsa.connect.connectors.postgres_cdc:PostgresConnector",
    "org.apache.iceberg.connect.IcebergSinkConnector":
        "samsa.connect.connectors.iceberg_sink:IcebergSinkConnector",
    "io.tabular.iceberg.connect.IcebergSinkConnector":
        "samsa.connect.connectors.iceberg_sink:IcebergSinkConnector",
    "io.confluent.connect.jdbc.JdbcSinkConnector":
        "samsa.connect.connectors.jdbc_sink:JdbcSinkConnector",
    "com.snowflake.kafka.connector.SnowflakeSinkConnector":
        "samsa.connect.connectors.snowflake_sink:SnowflakeSinkConnector",
}
