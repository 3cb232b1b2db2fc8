"""Tiered storage settings: Kafka's checks of a topic's remote storage configs (LogConfig's
validateTopicLogConfigValues, KIP-405 and KIP-950) and the broker-level settings the remote log
manager reads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from samsa.config import TOPIC_CONFIGS, ConfigError, parse_value

DISABLED_MSG = ("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                "configured with remote log storage.")
POLICY_MSG = ("Remote log storage only supports topics with cleanup.policy=delete or "
              "cleanup.policy being an empty list.")
TURN_OFF_MSG = ("It is invalid to disable remote storage without deleting remote data. If you "
                "want to keep the remote data and turn to read only, please set "
                "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to "
                "disable remote storage and delete all remote data, please set "
                "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")


def _get(cfg: Mapping[str, str | None], name: str) -> object:
    v = cfg.get(name)
    d = TOPIC_CONFIGS[name]
    return parse_value(d, v if v is not None else (d.default or ""))


def validate_topic(effective: Mapping[str, str | None], existing: Mapping[str, str],
                   system_enabled: bool) -> None:
    """Kafka's checks, on the topic's effective configs after the change (broker defaults,
    its current configs, the change): raises ConfigError with Kafka's messages."""
    enabled = bool(_get(effective, "remote.storage.enable"))
    if not enabled:
        was = str(existing.get("remote.storage.enable", "false")).lower() == "true"
        if was and not _get(effective, "remote.log.delete.on.disable"):
            raise ConfigError(TURN_OFF_MSG)
        return
    if not system_enabled:
        raise ConfigError(DISABLED_MSG)
    policy = _get(effective, "cleanup.policy")
    assert isinstance(policy, list)
    if policy and policy != ["delete"]:
        raise ConfigError(POLICY_MSG)
    for kind, total_name, local_name in (("bytes", "retention.bytes", "local.retention.bytes"),
                                         ("ms", "retention.ms", "local.retention.ms")):
        total = int(_get(effective, total_name))  # type: ignore[call-overload]
        local = int(_get(effective, local_name))  # type: ignore[call-overload]
        limited = total > -1 if kind == "bytes" else total != -1
        if limited and local != -2:
            if local == -1:
                raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value "
                                  f"must not be -1 as {total_name} value is set as {total}.")
            if local > total:
                raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value "
                                  f"must not be more than {total_name} property value: {total}")
    if _get(effective, "remote.log.copy.disable"):
        for what in ("bytes", "ms"):
            total = int(_get(effective, f"retention.{what}"))  # type: ignore[call-overload]
            local = int(_get(effective, f"local.retention.{what}"))  # type: ignore[call-overload]
            if local != -2 and local != total:
                raise ConfigError(
                    f"When `remote.log.copy.disable` is set to true, the `local.retention.{what}` "
                    f"and `retention.{what}` must be set to the identical value because there "
                    "will be no more logs copied to the remote storage.")


STORED_MSG = ("You have to delete all topics with the property remote.storage.enable=true before "
              "disabling tiered storage cluster-wide")


def check_stored_topics(system_enabled: bool, tiered: list[str]) -> None:
    """Kafka refuses to start a broker with remote.log.storage.system.enable=false while a topic
    has remote.storage.enable=true (its stored configs fail validation): such a broker would
    apply the total retention to the local log alone and hide the remote tier from clients."""
    if tiered and not system_enabled:
        raise ConfigError(f"{STORED_MSG} (topics: {', '.join(sorted(tiered)[:10])})")


def validate_broker(get: Callable[[str], str | None]) -> None:
    """Broker-level local retention within the total (Kafka checks it when tiered storage is on)."""
    if (get("remote.log.storage.system.enable") or "false").lower() != "true":
        return
    for total_name, local_name in (("log.retention.bytes", "log.local.retention.bytes"),
                                   ("log.retention.ms", "log.local.retention.ms")):
        t, loc = get(total_name), get(local_name)
        if t is None or loc is None:
            continue
        total, local = int(t), int(loc)
        if total != -1 and local != -2:
            if local == -1:
                raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value "
                                  f"must not be -1 as {total_name} value is set as {total}.")
            if local > total:
                raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value "
                                  f"must not be more than {total_name} property value: {total}")


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    """The broker settings the remote log manager uses (names as Kafka's)."""

    system_enable: bool = False
    rsm_class: str = "local"
    rsm_prefix: str = "rsm.config."
    rlmm_prefix: str = "rlmm.config."
    metadata_partitions: int = 50
    metadata_replication: int = 1
    metadata_retention_ms: int = -1
    task_interval_ms: int = 30000
    retry_backoff_ms: int = 500
    retry_backoff_max_ms: int = 30000
    retry_jitter: float = 0.2
    thread_pool_size: int = 2
    copier_threads: int = 10
    expiration_threads: int = 10
    reader_threads: int = 10
    custom_metadata_max_bytes: int = 128
    copy_max_bytes_per_second: int = 2**63 - 1

    @classmethod
    def from_broker(cls, get: Callable[[str], str | None]) -> RemoteLogManagerConfig:
        def num(name: str, default: int) -> int:
            v = get(name)
            return int(v) if v not in (None, "") else default  # type: ignore[arg-type]

        rlmm = get("remote.log.metadata.manager.impl.prefix") or "rlmm.config."
        return cls(
            system_enable=(get("remote.log.storage.system.enable") or "false").lower() == "true",
            rsm_class=get("remote.log.storage.manager.class.name") or "local",
            rsm_prefix=get("remote.log.storage.manager.impl.prefix") or "rsm.config.",
            rlmm_prefix=rlmm,
            metadata_partitions=num(rlmm + "remote.log.metadata.topic.num.partitions", 50),
            metadata_replication=num(rlmm + "remote.log.metadata.topic.replication.factor", 1),
            metadata_retention_ms=num(rlmm + "remote.log.metadata.topic.retention.ms", -1),
            task_interval_ms=num("remote.log.manager.task.interval.ms", 30000),
            retry_backoff_ms=num("remote.log.manager.task.retry.backoff.ms", 500),
            retry_backoff_max_ms=num("remote.log.manager.task.retry.backoff.max.ms", 30000),
            retry_jitter=float(get("remote.log.manager.task.retry.jitter") or 0.2),
            thread_pool_size=num("remote.log.manager.thread.pool.size", 2),
            copier_threads=num("remote.log.manager.copier.thread.pool.size", 10),
            expiration_threads=num("remote.log.manager.expiration.thread.pool.size", 10),
            reader_threads=num("remote.log.reader.threads", 10),
            custom_metadata_max_bytes=num("remote.log.metadata.custom.metadata.max.bytes", 128),
            copy_max_bytes_per_second=num("remote.log.manager.copy.max.bytes.per.second",
                                          2**63 - 1),
        )
