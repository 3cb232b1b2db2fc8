"""Broker metrics with the names the Prometheus JMX exporter gives Kafka's MBeans (docs/operations.md).

`counters.py` is what the broker's hot paths touch (plain integer adds, once per request or per
partition batch, never per record); `collector.py` turns a snapshot of those and of the broker's
state into Prometheus families when /metrics is scraped.
"""
