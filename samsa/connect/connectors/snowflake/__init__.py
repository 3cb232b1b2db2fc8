"""Pieces of the Snowflake-shaped warehouse sink (snowflake_sink.py): configuration, table naming,
record -> RECORD_METADATA/RECORD_CONTENT conversion, and the warehouse writer."""
