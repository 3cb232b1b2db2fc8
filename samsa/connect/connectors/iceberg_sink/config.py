"""The Iceberg sink's settings, under the names of Apache Iceberg's Kafka Connect sink
(`iceberg.tables`, `iceberg.tables.*`, `iceberg.table.<name>.*`, `iceberg.catalog.*`,
`iceberg.control.commit.interval-ms`), parsed once per task."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ...config_def import AbstractConfig, ConfigDef, ConfigType, Importance, at_least
from ...errors import ConfigException

TABLES = "iceberg.tables"
DYNAMIC = "iceberg.tables.dynamic-enabled"
ROUTE_FIELD = "iceberg.tables.route-field"
DEFAULT_PARTITION_BY = "iceberg.tables.default-partition-by"
AUTO_CREATE = "iceberg.tables.auto-create-enabled"
EVOLVE = "iceberg.tables.evolve-schema-enabled"
FORCE_OPTIONAL = "iceberg.tables.schema-force-optional"
UPSERT = "iceberg.tables.upsert-mode-enabled"
COMMIT_INTERVAL = "iceberg.control.commit.interval-ms"
COMMIT_TIMEOUT = "iceberg.control.commit.timeout-ms"
CATALOG_NAME = "iceberg.catalog"
CATALOG_PREFIX = "iceberg.catalog."
AUTO_CREATE_PROPS = "iceberg.tables.auto-create-props."
TABLE_PREFIX = "iceberg.table."
FILE_ROWS = "iceberg.samsa.file-rows"

DEFAULT_WAREHOUSE = "iceberg-warehouse"

CONFIG_DEF = (
    ConfigDef()
    .define(TABLES, ConfigType.LIST, "", None, Importance.HIGH,
            "Comma-separated list of destination tables (namespace.table)")
    .define(DYNAMIC, ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Route each record to the table named by its route field instead of iceberg.tables")
    .define(ROUTE_FIELD, ConfigType.STRING, None, None, Importance.MEDIUM,
            "The record field (dotted for nested) that routes records to tables")
    .define(DEFAULT_PARTITION_BY, ConfigType.STRING, "", None, Importance.MEDIUM,
            "Partition fields for auto-created tables: col, hour(col), day(col), month(col), "
            "year(col), bucket(col, N), truncate(col, N)")
    .define(AUTO_CREATE, ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Create missing destination tables from the first record's schema")
    .define(EVOLVE, ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
            "Add missing record fields to the table schema (and widen types Iceberg allows)")
    .define(FORCE_OPTIONAL, ConfigType.BOOLEAN, False, None, Importance.LOW,
            "Make every column optional when creating or evolving tables")
    .define(UPSERT, ConfigType.BOOLEAN, False, None, Importance.LOW,
            "Upsert by id columns: not supported by Samsa's sink (must stay false)")
    .define(COMMIT_INTERVAL, ConfigType.INT, 300_000, at_least(0), Importance.MEDIUM,
            "Milliseconds between Iceberg commits")
    .define(COMMIT_TIMEOUT, ConfigType.INT, 30_000, at_least(0), Importance.LOW,
            "Milliseconds a commit may keep retrying conflicts before the task retries later")
    .define(CATALOG_NAME, ConfigType.STRING, "iceberg", None, Importance.MEDIUM,
            "Name of the catalog")
    .define(FILE_ROWS, ConfigType.INT, 100_000, at_least(1), Importance.LOW,
            "Samsa: buffered rows per table written to a Parquet data file before the commit")
)


@dataclass
class TableConfig:
    partition_by: list[str]
    route_regex: str | None


@dataclass
class IcebergSinkConfig:
    tables: list[str]
    dynamic: bool
    route_field: str | None
    auto_create: bool
    evolve: bool
    force_optional: bool
    commit_interval_ms: int
    commit_timeout_ms: int
    catalog_name: str
    catalog_props: dict[str, str]
    auto_create_props: dict[str, str]
    file_rows: int
    table_configs: dict[str, TableConfig] = field(default_factory=dict)
    default_partition_by: list[str] = field(default_factory=list)

    def table(self, name: str) -> TableConfig:
        tc = self.table_configs.get(name)
        if tc is None:
            tc = TableConfig(list(self.default_partition_by), None)
        return tc


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    return [str(v).strip() for v in value if str(v).strip()]


def _partition_fields(value: Any) -> list[str]:
    """Comma-separated partition fields; commas inside a transform's parentheses
    (`bucket(id, 16)`) do not split, as in Iceberg's sink."""
    return [p.strip() for p in re.split(r",(?![^()]*\))", str(value or "")) if p.strip()]


def catalog_properties(props: dict[str, str]) -> dict[str, str]:
    """`iceberg.catalog.*` as pyiceberg's load_catalog takes them; with none of type / uri /
    warehouse given, a SQLite SqlCatalog in a local warehouse directory."""
    out = {k[len(CATALOG_PREFIX):]: v for k, v in props.items()
           if k.startswith(CATALOG_PREFIX) and len(k) > len(CATALOG_PREFIX)}
    if "catalog-impl" in out and "py-catalog-impl" not in out and "type" not in out:
        raise ConfigException(CATALOG_PREFIX + "catalog-impl", out["catalog-impl"],
                              "Java catalog classes are not available; set iceberg.catalog.type "
                              "(sql, rest, ...) or iceberg.catalog.py-catalog-impl")
    if out.get("type", "sql") == "sql" and "uri" not in out:
        out.setdefault("type", "sql")
        warehouse = out.get("warehouse") or DEFAULT_WAREHOUSE
        path = warehouse[len("file://"):] if warehouse.startswith("file://") else warehouse
        if "://" not in path:
            path = os.path.abspath(path)
            os.makedirs(path, exist_ok=True)
            out["warehouse"] = "file://" + path
            out["uri"] = f"sqlite:///{path}/catalog.db"
    elif out.get("type") == "sql" and "warehouse" in out and "://" not in out["warehouse"]:
        out["warehouse"] = "file://" + os.path.abspath(out["warehouse"])
    return out


def parse(props: dict[str, str]) -> IcebergSinkConfig:
    cfg = AbstractConfig(CONFIG_DEF, props)
    if cfg.get(UPSERT):
        raise ConfigException(UPSERT, "true", "upsert mode is not supported by Samsa's Iceberg "
                                              "sink (append only)")
    tables = _list(cfg.get(TABLES))
    dynamic = bool(cfg.get(DYNAMIC))
    route_field = cfg.get(ROUTE_FIELD) or None
    if dynamic and not route_field:
        raise ConfigException(ROUTE_FIELD, None, f"{ROUTE_FIELD} is required when {DYNAMIC} "
                                                 "is true")
    if not dynamic and not tables:
        raise ConfigException(TABLES, None, f"{TABLES} is required when {DYNAMIC} is false")
    out = IcebergSinkConfig(
        tables=tables, dynamic=dynamic, route_field=route_field,
        auto_create=bool(cfg.get(AUTO_CREATE)), evolve=bool(cfg.get(EVOLVE)),
        force_optional=bool(cfg.get(FORCE_OPTIONAL)),
        commit_interval_ms=int(cfg.get(COMMIT_INTERVAL)),
        commit_timeout_ms=int(cfg.get(COMMIT_TIMEOUT)),
        catalog_name=str(cfg.get(CATALOG_NAME)), catalog_props=catalog_properties(props),
        auto_create_props=cfg.originals_with_prefix(AUTO_CREATE_PROPS),
        file_rows=int(cfg.get(FILE_ROWS)),
        default_partition_by=_partition_fields(cfg.get(DEFAULT_PARTITION_BY)))
    # iceberg.table.<name>.<setting>: table names contain dots, settings do not
    per: dict[str, dict[str, str]] = {}
    for key, value in props.items():
        if key.startswith(TABLE_PREFIX):
            name, _, setting = key[len(TABLE_PREFIX):].rpartition(".")
            if name:
                per.setdefault(name, {})[setting] = value
    for name, settings in per.items():
        out.table_configs[name] = TableConfig(
            partition_by=_partition_fields(settings["partition-by"]) if "partition-by" in settings
            else list(out.default_partition_by),
            route_regex=settings.get("route-regex"))
    return out
