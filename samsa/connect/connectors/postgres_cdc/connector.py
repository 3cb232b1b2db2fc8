"""io.debezium.connector.postgresql.PostgresConnector: one task (a slot has one reader)."""

from __future__ import annotations

import logging

from ...api import ExactlyOnceSupport, SourceConnector, Task
from ...config_def import ConfigValue
from ...errors import ConnectException
from .._util import ConfiguredConnector
from .config import CONFIG_DEF, parse_config
from .task import PostgresConnectorTask

log = logging.getLogger("samsa.connect.connectors.postgres_cdc")


class PostgresConnector(ConfiguredConnector, SourceConnector):
    CONFIG_DEF = CONFIG_DEF
    MAX_TASKS = 1  # a slot has one reader

    def check(self, props: dict[str, str]) -> None:
        try:
            parse_config(props)
        except ConnectException as e:
            raise ConnectException(f"Invalid PostgresConnector configuration: {e}") from e

    def task_class(self) -> type[Task]:
        return PostgresConnectorTask

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        return CONFIG_DEF.validate(props)

    def exactly_once_support(self, props: dict[str, str]) -> ExactlyOnceSupport | None:
        # replayable source: the slot resends everything after the confirmed LSN, and the task
        # drops what its stored offset says was already written
        return ExactlyOnceSupport.SUPPORTED
