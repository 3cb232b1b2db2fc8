"""io.debezium.connector.postgresql.PostgresConnector: one task (a slot has one reader)."""

from __future__ import annotations

import logging

from ...api import ExactlyOnceSupport, SourceConnector, Task
from ...config_def import ConfigDef, ConfigValue
from ...errors import ConnectException
from .config import CONFIG_DEF, parse_config
from .task import PostgresConnectorTask

log = logging.getLogger("samsa.connect.connectors.postgres_cdc")


class PostgresConnector(SourceConnector):
    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        try:
            parse_config(props)
        except ConnectException as e:
            raise ConnectException(f"Invalid PostgresConnector configuration: {e}") from e
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return PostgresConnectorTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        return CONFIG_DEF.validate(props)

    def exactly_once_support(self, props: dict[str, str]) -> ExactlyOnceSupport | None:
        # replayable source: the slot resends everything after the confirmed LSN, and the task
        # drops what its stored offset says was already written
        return ExactlyOnceSupport.SUPPORTED
