"""Schema registry: a Confluent-compatible REST service whose state is the `_schemas` topic.

Importing this package is cheap (the broker imports `records` and `validation` from it); the HTTP
server and the schema libraries load only when a registry runs."""
