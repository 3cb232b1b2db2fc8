"""Built-in converters and header converters, under Kafka's (and Confluent's) Java class names."""

from __future__ import annotations

_M = "samsa.connect.converters"

PLUGINS: dict[str, str] = {
    "org.apache.kafka.connect.storage.StringConverter": f"{_M}.simple:StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter": f"{_M}.simple:ByteArrayConverter",
    "org.apache.kafka.connect.converters.ShortConverter": f"{_M}.simple:ShortConverter",
    "org.apache.kafka.connect.converters.IntegerConverter": f"{_M}.simple:IntegerConverter",
    "org.apache.kafka.connect.converters.LongConverter": f"{_M}.simple:LongConverter",
    "org.apache.kafka.connect.converters.FloatConverter": f"{_M}.simple:FloatConverter",
    "org.apache.kafka.connect.converters.DoubleConverter": f"{_M}.simple:DoubleConverter",
    "org.apache.kafka.connect.json.JsonConverter": f"{_M}.json_converter:JsonConverter",
    "org.apache.kafka.connect.storage.SimpleHeaderConverter": f"{_M}.header:SimpleHeaderConverter",
    "io.confluent.connect.avro.AvroConverter": f"{_M}.avro:AvroConverter",
    "io.confluent.connect.protobuf.ProtobufConverter": f"{_M}.protobuf:ProtobufConverter",
    "io.confluent.connect.json.JsonSchemaConverter": f"{_M}.json_schema:JsonSchemaConverter",
    # Snowflake's own converter names (the Snowflake-shaped warehouse sink's configs)
    "com.snowflake.kafka.connector.records.SnowflakeJsonConverter":
        "samsa.connect.connectors.snowflake.converters:SnowflakeJsonConverter",
    "com.snowflake.kafka.connector.records.SnowflakeAvroConverter":
        "samsa.connect.connectors.snowflake.converters:SnowflakeAvroConverter",
}
