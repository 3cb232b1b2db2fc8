"""Checks shared by the single-node and the quorum controller: topic names and configs, with
Kafka's error codes and messages."""

from __future__ import annotations

import re

from samsa.config import (
    TOPIC_CONFIGS,
    ConfigError,
    is_read_only,
    validate_broker_configs,
    validate_topic_configs,
)
from samsa.protocol.errors import Err

from ..limits import ControllerError

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LEN = 249


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise ControllerError(Err.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_LEN:
        raise ControllerError(Err.INVALID_TOPIC_EXCEPTION,
                              f"Topic name is longer than {MAX_TOPIC_LEN} characters")
    if not _LEGAL.match(name):
        raise ControllerError(Err.INVALID_TOPIC_EXCEPTION,
                              f"Topic name {name!r} is illegal, it contains a character other than "
                              "ASCII alphanumerics, '.', '_' and '-'")


def collision_key(name: str) -> str:
    """Kafka refuses topics whose names differ only by '.' versus '_' (they share metric names)."""
    return name.replace(".", "_")


def check_topic_configs(configs: dict[str, str | None],
                        tiered: tuple[dict[str, str], dict[str, str], bool] | None = None) -> None:
    """INVALID_CONFIG for an unknown topic config or a bad value. `tiered` = (the broker's topic
    defaults, the topic's current configs, remote.log.storage.system.enable): the remote storage
    checks (samsa.storage.remote.config) run on the configs the change would leave."""
    try:
        validate_topic_configs(configs)
        if tiered is not None:
            from samsa.storage.remote.config import validate_topic

            defaults, existing, system_enabled = tiered
            effective: dict[str, str | None] = {**defaults, **existing}
            for k, v in configs.items():
                if v is None:
                    effective.pop(k, None)
                    if k in defaults:
                        effective[k] = defaults[k]
                else:
                    effective[k] = v
            validate_topic(effective, existing, system_enabled)
    except ConfigError as e:
        raise ControllerError(Err.INVALID_CONFIG, str(e)) from None


def check_dynamic_broker_configs(changes: dict[str, str | None]) -> None:
    """The log.* synonyms of topic configs and the broker settings samsa.config marks as not
    read-only (the replication throttles) are the dynamic broker settings in Samsa."""
    by_syn = {d.broker_synonym for d in TOPIC_CONFIGS.values() if d.broker_synonym}
    for k, v in changes.items():
        if k not in by_syn and is_read_only(k):
            raise ControllerError(Err.INVALID_CONFIG,
                                  f"Cannot update broker config {k} dynamically")
        if v is not None:
            try:
                validate_broker_configs({k: v})
            except ConfigError as e:
                raise ControllerError(Err.INVALID_CONFIG, str(e)) from None
