"""Kafka wire protocol: framing helpers, API table, RecordBatch view, codecs. Imports nothing of ours."""
