"""The built-in connectors are found by Kafka's class names and aliases, with the right kind."""

from __future__ import annotations

import pytest

from samsa.connect.api import SinkConnector, SourceConnector
from samsa.connect.connectors import PLUGINS
from samsa.connect.plugins import Plugins, PluginType

EXPECTED = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector": PluginType.SOURCE,
    "org.apache.kafka.connect.file.FileStreamSinkConnector": PluginType.SINK,
    "org.apache.kafka.connect.tools.VerifiableSourceConnector": PluginType.SOURCE,
    "org.apache.kafka.connect.tools.VerifiableSinkConnector": PluginType.SINK,
    "io.confluent.kafka.connect.datagen.DatagenConnector": PluginType.SOURCE,
    "io.confluent.connect.jdbc.JdbcSinkConnector": PluginType.SINK,
    "com.snowflake.kafka.connector.SnowflakeSinkConnector": PluginType.SINK,
    "io.debezium.connector.postgresql.PostgresConnector": PluginType.SOURCE,
}


# Apache Iceberg's sink under its own and Tabular's older class name: one plugin, two names, so
# the simple-name aliases are ambiguous (as in Kafka) and the full name is needed
ICEBERG = ("org.apache.iceberg.connect.IcebergSinkConnector",
           "io.tabular.iceberg.connect.IcebergSinkConnector")


def test_table_names_every_builtin() -> None:
    assert set(PLUGINS) == set(EXPECTED) | set(ICEBERG)


def test_iceberg_sink_by_both_class_names() -> None:
    plugins = Plugins()
    classes = {plugins.find(name).load() for name in ICEBERG}
    assert len(classes) == 1 and issubclass(classes.pop(), SinkConnector)
    with pytest.raises(Exception, match="ambiguous"):
        plugins.find("IcebergSinkConnector")


@pytest.mark.parametrize(("name", "kind"), sorted(EXPECTED.items()))
def test_found_by_class_name_and_aliases(name: str, kind: PluginType) -> None:
    plugins = Plugins()
    desc = plugins.find(name)
    assert desc.kind is kind
    simple = name.rsplit(".", 1)[-1]
    assert plugins.find(simple).name == name
    assert plugins.find(simple.removesuffix("Connector")).name == name
    cls = desc.load()
    base = SourceConnector if kind is PluginType.SOURCE else SinkConnector
    assert issubclass(cls, base)
    connector = cls()
    assert connector.version() and connector.config().names()
    assert issubclass(connector.task_class(), object)
