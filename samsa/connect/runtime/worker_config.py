"""Worker settings with Kafka Connect's names and defaults (WorkerConfig, StandaloneConfig,
DistributedConfig), read from a connect-*.properties file."""

from __future__ import annotations

import socket
from typing import Any

from ..config_def import (
    NO_DEFAULT,
    AbstractConfig,
    ConfigDef,
    ConfigType,
    Importance,
    at_least,
    between,
    one_of,
)

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
SIMPLE_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
S, INT, B, LST, LONG = ConfigType.STRING, ConfigType.INT, ConfigType.BOOLEAN, ConfigType.LIST, ConfigType.LONG


def _common() -> ConfigDef:
    return (ConfigDef()
            .define("bootstrap.servers", LST, "localhost:9092", None, H,
                    "Samsa/Kafka brokers the worker, its connectors and tasks connect to.")
            .define("client.dns.lookup", S, "use_all_dns_ips", None, M, "Accepted for compatibility.")
            .define("key.converter", ConfigType.CLASS, JSON_CONVERTER, None, H,
                    "Converter between Connect data and the bytes of record keys.")
            .define("value.converter", ConfigType.CLASS, JSON_CONVERTER, None, H,
                    "Converter between Connect data and the bytes of record values.")
            .define("header.converter", ConfigType.CLASS, SIMPLE_HEADER_CONVERTER, None, L,
                    "Converter between Connect header values and header bytes.")
            .define("task.shutdown.graceful.timeout.ms", LONG, 5000, at_least(0), L,
                    "How long to wait for tasks to stop before giving up on them.")
            .define("offset.flush.interval.ms", LONG, 60000, at_least(0), L,
                    "How often source task offsets are committed (and sink offsets, via the "
                    "consumer).")
            .define("offset.flush.timeout.ms", LONG, 5000, at_least(0), L,
                    "How long an offset flush may wait for records to be acknowledged.")
            .define("listeners", LST, "http://:8083", None, L,
                    "REST listeners, e.g. http://127.0.0.1:8083 (an empty host binds all).")
            .define("rest.advertised.host.name", S, None, None, L,
                    "Host name other workers use to reach this one.")
            .define("rest.advertised.port", INT, None, None, L, "Port other workers use.")
            .define("rest.advertised.listener", S, None, None, L, "http or https.")
            .define("access.control.allow.origin", S, "", None, L,
                    "CORS: origins allowed to call the REST API (empty: no CORS headers).")
            .define("access.control.allow.methods", S, "", None, L,
                    "CORS: methods allowed (default GET, POST, HEAD).")
            .define("topic.tracking.enable", B, True, None, L,
                    "Record the topics each connector uses (KIP-558, GET .../topics).")
            .define("topic.tracking.allow.reset", B, True, None, L,
                    "Allow PUT .../topics/reset.")
            .define("plugin.path", LST, None, None, L,
                    "Directories whose Python modules are scanned for connectors, converters, "
                    "transforms and predicates (in addition to entry points).")
            .define("plugin.discovery", S, "hybrid_warn", None, L, "Accepted for compatibility.")
            .define("connector.client.config.override.policy", S, "All",
                    one_of("All", "None", "Principal"), M,
                    "Which producer.override.*/consumer.override.*/admin.override.* connector "
                    "settings are allowed.")
            .define("exactly.once.source.support", S, "disabled",
                    one_of("disabled", "preparing", "enabled", case_insensitive=True), H,
                    "KIP-618: run source tasks with transactional producers that write records "
                    "and source offsets atomically.")
            .define("metrics.sample.window.ms", LONG, 30000, None, L, "Accepted for compatibility.")
            .define("errors.restart.enable", B, False, None, L,
                    "Samsa extension: restart a FAILED task automatically with bounded back-off.")
            .define("errors.restart.max.backoff.ms", LONG, 60000, at_least(100), L,
                    "Samsa extension: the longest wait between automatic task restarts.")
            .define("worker.id", S, None, None, L,
                    "The id statuses name this worker by; default host:port of the REST "
                    "listener."))


def standalone_def() -> ConfigDef:
    return _common().define("offset.storage.file.filename", S, NO_DEFAULT, None, H,
                            "File where standalone mode keeps source offsets.")


def distributed_def() -> ConfigDef:
    return (_common()
            .define("group.id", S, NO_DEFAULT, None, H,
                    "The Connect cluster this worker belongs to.")
            .define("config.storage.topic", S, NO_DEFAULT, None, H,
                    "Compacted topic of connector and task configurations.")
            .define("config.storage.replication.factor", ConfigType.SHORT, 3, None, L,
                    "-1 for the broker default; capped by the brokers the cluster has.")
            .define("offset.storage.topic", S, NO_DEFAULT, None, H, "Compacted topic of source offsets.")
            .define("offset.storage.partitions", INT, 25, None, L, "Partitions of the offsets topic.")
            .define("offset.storage.replication.factor", ConfigType.SHORT, 3, None, L,
                    "-1 for the broker default; capped by the brokers the cluster has.")
            .define("status.storage.topic", S, NO_DEFAULT, None, H, "Compacted topic of statuses.")
            .define("status.storage.partitions", INT, 5, None, L, "Partitions of the status topic.")
            .define("status.storage.replication.factor", ConfigType.SHORT, 3, None, L,
                    "-1 for the broker default; capped by the brokers the cluster has.")
            .define("session.timeout.ms", INT, 10000, None, H, "Group session timeout.")
            .define("heartbeat.interval.ms", INT, 3000, None, H, "Group heartbeat interval.")
            .define("rebalance.timeout.ms", INT, 60000, None, H,
                    "How long members have to rejoin during a rebalance.")
            .define("worker.sync.timeout.ms", INT, 3000, None, M,
                    "How long a worker waits to catch up with the config topic.")
            .define("worker.unsync.backoff.ms", INT, 300000, None, M,
                    "How long a worker that could not catch up waits before rejoining.")
            .define("scheduled.rebalance.max.delay.ms", INT, 300000, between(0, 2**31 - 1), L,
                    "How long the work of a departed worker waits for it to return before it is "
                    "reassigned.")
            .define("connect.protocol", S, "sessioned",
                    one_of("eager", "compatible", "sessioned"), L, "The group sub-protocol.")
            .define("inter.worker.key.generation.algorithm", S, "HmacSHA256", None, L,
                    "Accepted for compatibility.")
            .define("inter.worker.key.ttl.ms", INT, 3600000, None, L, "Accepted for compatibility."))


class WorkerConfig(AbstractConfig):
    def __init__(self, props: dict[str, Any], distributed: bool) -> None:
        super().__init__(distributed_def() if distributed else standalone_def(), props)
        self.distributed = distributed

    def client_props(self, prefix: str) -> dict[str, str]:
        """What the worker passes to its clients: `producer.*` / `consumer.*` / `admin.*`."""
        return {k[len(prefix):]: str(v) for k, v in self.originals.items() if k.startswith(prefix)}

    # ---- client security (Kafka Connect's rules) ---------------------------------------------
    # The worker's own clients (internal topics, group membership, admin work) use the top-level
    # security.protocol / sasl.* / ssl.*; connectors' producers and consumers only what
    # producer.* / consumer.* (and allowed *.override.*) give them; admin clients the top-level
    # settings with admin.* over them. Java names are translated for librdkafka.
    def security_settings(self) -> dict[str, Any]:
        """The top-level security settings as librdkafka settings."""
        from samsa.client_security import is_security_key, librdkafka_config

        return librdkafka_config({k: str(v) for k, v in self.originals.items()
                                  if is_security_key(k)})

    def internal_client(self) -> dict[str, Any]:
        """librdkafka settings of the worker's own clients (no admin.* prefix)."""
        return {"bootstrap.servers": self.bootstrap, "log_level": 3, **self.security_settings()}

    def admin_client(self, overrides: dict[str, str] | None = None) -> dict[str, Any]:
        """An admin client's settings: the worker's, admin.* over them, then `overrides`
        (a connector's admin.override.*)."""
        from samsa.client_security import librdkafka_config

        return librdkafka_config({**self.internal_client(), **self.client_props("admin."),
                                  **(overrides or {})})

    def node_security(self) -> Any:
        """The group member's TLS/SASL (samsa.cluster.node_security.NodeSecurity), from the
        top-level settings; None for PLAINTEXT."""
        from samsa.client_security import ClientSecurity
        from samsa.cluster.node_security import NodeSecurity

        sec = ClientSecurity.from_config(self.security_settings())
        if sec.protocol == "PLAINTEXT":
            return None
        claims = (("sub", sec.oauth_principal),) if sec.oauth_principal else ()
        return NodeSecurity(listener="connect", protocol=sec.protocol,
                            ssl_context=sec.ssl_context() if sec.uses_tls else None,
                            check_hostname=sec.check_hostname,
                            mechanism=sec.mechanism if sec.uses_sasl else None,
                            username=sec.username or "", password=sec.password or "",
                            token_claims=claims)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.get("bootstrap.servers"))

    @property
    def exactly_once_source(self) -> bool:
        return str(self.get("exactly.once.source.support")).lower() == "enabled"

    def rest_listener(self) -> tuple[str, int]:
        """(host, port) of the first REST listener; an empty host binds all interfaces."""
        first = (self.get("listeners") or ["http://:8083"])[0]
        rest = first.split("://", 1)[-1]
        host, _, port = rest.rpartition(":")
        return host or "0.0.0.0", int(port or 8083)

    def rest_scheme(self) -> str:
        """http or https: the scheme of the first REST listener."""
        first = str((self.get("listeners") or ["http://:8083"])[0])
        return "https" if first.lower().startswith("https://") else "http"

    def advertised_url(self, bound_port: int) -> str:
        host, _ = self.rest_listener()
        adv_host = self.get("rest.advertised.host.name") or \
            (host if host not in ("0.0.0.0", "") else socket.gethostname())
        adv_port = self.get("rest.advertised.port") or bound_port
        scheme = self.get("rest.advertised.listener") or self.rest_scheme()
        return f"{scheme}://{adv_host}:{adv_port}/"
