"""`samsa serve`: run a broker until SIGINT/SIGTERM (clean shutdown writes the clean marker)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from samsa.config import BrokerConfig, ConfigError, env_overrides, read_properties


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("serve", help="run a Samsa node (broker and/or controller)",
                       description="Run a Samsa node: with no quorum settings, the embedded single-node "
                                   "default that formats its own storage; otherwise a broker and/or "
                                   "controller of a KRaft cluster (see samsa storage format). "
                                   "Settings come from Kafka-named "
                                   "configs: a properties file, SAMSA_* environment variables "
                                   "(SAMSA_LOG_DIRS -> log.dirs) and --override key=value flags, "
                                   "later ones winning.")
    p.add_argument("config_file", nargs="?", help="server.properties-style file")
    p.add_argument("--listeners", help="e.g. PLAINTEXT://127.0.0.1:9092")
    p.add_argument("--log-dirs", help="data directory (default ./samsa-data)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="any broker config, repeatable")
    p.add_argument("--schema-registry", nargs="?", const="http://127.0.0.1:8081", metavar="URL",
                   help="also run the schema registry in this process (default listener "
                        "http://127.0.0.1:8081; same as schema.registry.enable=true)")
    p.add_argument("--connect", nargs="?", const="http://127.0.0.1:8083", metavar="URL",
                   help="also run a distributed Kafka Connect worker in this process (REST API "
                        "default http://127.0.0.1:8083; same as connect.enable=true)")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    values: dict[str, str] = {}
    if args.config_file:
        values.update(read_properties(args.config_file))
    values.update(env_overrides())
    if args.listeners:
        values["listeners"] = args.listeners
    if args.log_dirs:
        values["log.dirs"] = args.log_dirs
    if getattr(args, "schema_registry", None):
        values["schema.registry.enable"] = "true"
        values["schema.registry.listeners"] = args.schema_registry
    if getattr(args, "connect", None):
        values["connect.enable"] = "true"
        values["connect.listeners"] = args.connect
    for item in args.override:
        k, sep, v = item.partition("=")
        if not sep:
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        values[k.strip()] = v.strip()
    return BrokerConfig(values)


async def _serve(config: BrokerConfig) -> None:
    from samsa.broker.broker import Broker

    _check_registry(config)
    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"samsa: broker listening on {broker.host}:{broker.port}, data in "
          f"{','.join(str(d) for d in config.log_dirs)}", flush=True)
    try:
        registry = await _start_registry(config, broker.host, broker.port)
    except BaseException:  # e.g. a registry setting that cannot work: stop the broker cleanly
        await broker.stop()
        raise
    registry_url = registry.url if registry else None
    connect = await _start_connect(config, broker.host, broker.port, registry_url)
    # ops-metrics: the admin HTTP listener (samsa/admin) and its view of the other services
    from samsa.admin.components import attach

    attach(broker.admin, registry, registry_url, connect)
    if broker.admin.url:
        print(f"samsa: admin HTTP listener on {broker.admin.url} (/metrics, /health/live, "
              f"/health/ready)", flush=True)
    await stop.wait()
    if connect is not None:
        await connect.stop()
    if registry is not None:
        await registry.stop()
    await broker.stop()


def _check_registry(config: BrokerConfig) -> None:
    """The embedded registry's settings (users, key stores...) before the broker starts: a
    setting that cannot work is a ConfigError naming it, not a broker started for nothing."""
    if config.get_bool("schema.registry.enable"):
        from samsa.registry.server import RegistryServer

        RegistryServer(_registry_config(config, "127.0.0.1", 9092))


def _registry_config(config: BrokerConfig, host: str, port: int) -> Any:
    from samsa.registry.server import RegistryConfig

    return RegistryConfig(
        bootstrap=f"{host}:{port}",
        listener=config.get("schema.registry.listeners") or "http://127.0.0.1:8081",
        topic=config.get("schema.registry.topic") or "_schemas",
        leader_url=config.get("schema.registry.leader.url") or None,
        compatibility=(config.get("schema.registry.compatibility") or "BACKWARD").upper(),
        props=registry_props(config))


async def _start_registry(config: BrokerConfig, host: str, port: int) -> Any:
    """The schema registry in the broker's process and event loop, when enabled."""
    if not config.get_bool("schema.registry.enable"):
        return None
    from samsa.registry.server import RegistryServer

    registry = RegistryServer(_registry_config(config, host, port))
    await registry.start()
    print(f"samsa: schema registry listening on {', '.join(registry.urls)}", flush=True)
    return registry


REGISTRY_PREFIX = "schema.registry."
_REGISTRY_OWN = ("enable", "listeners", "leader.url", "compatibility", "topic")


def registry_props(config: BrokerConfig) -> dict[str, str]:
    """The embedded registry's Confluent settings: schema.registry.<setting> (e.g.
    schema.registry.authentication.method, schema.registry.ssl.keystore.location,
    schema.registry.kafkastore.security.protocol), as connect.worker.<setting> for Connect."""
    return {k[len(REGISTRY_PREFIX):]: v for k, v in config.values.items()
            if k.startswith(REGISTRY_PREFIX) and k[len(REGISTRY_PREFIX):] not in _REGISTRY_OWN}


CONNECT_PREFIX = "connect.worker."


async def _start_connect(config: BrokerConfig, host: str, port: int,
                         registry_url: str | None = None) -> Any:
    """A distributed Connect worker in the broker's process (threads for the herder and tasks,
    the REST API on this event loop), when connect.enable is set. Worker settings:
    `connect.worker.<name>` overrides (e.g. connect.worker.group.id). With the embedded schema
    registry on too, the worker's key/value.converter.schema.registry.url default to it, so a
    connector naming a registry converter without a URL (the seeds' Snowflake JSON) uses it."""
    if not config.get_bool("connect.enable"):
        return None
    from samsa.connect.runtime.process import WorkerProcess

    props = {"bootstrap.servers": f"{host}:{port}", "group.id": "connect-cluster",
             "config.storage.topic": "connect-configs", "offset.storage.topic": "connect-offsets",
             "status.storage.topic": "connect-status",
             "config.storage.replication.factor": "-1", "offset.storage.replication.factor": "-1",
             "status.storage.replication.factor": "-1",
             "listeners": config.get("connect.listeners") or "http://127.0.0.1:8083"}
    if registry_url:
        props["key.converter.schema.registry.url"] = registry_url
        props["value.converter.schema.registry.url"] = registry_url
    props.update({k[len(CONNECT_PREFIX):]: v for k, v in config.values.items()
                  if k.startswith(CONNECT_PREFIX)})
    worker = WorkerProcess(props, distributed=True)
    await worker.start()
    print(f"samsa: Kafka Connect worker listening on {worker.url}", flush=True)
    return worker


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = build_config(args)
    except (ConfigError, OSError) as e:
        print(f"samsa serve: {e}", file=sys.stderr)
        return 2
    from samsa.broker.allocator import tune_allocator
    from samsa.cluster.meta_properties import MetaPropertiesError

    tune_allocator()  # before the first large buffers: see the module's docstring
    try:
        import uvloop
        uvloop.run(_serve(config))
    except (ConfigError, MetaPropertiesError) as e:
        # a misconfigured node (not a voter, unformatted or foreign storage...): the message
        # says what to fix; a traceback would bury it
        print(f"samsa serve: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"samsa serve: cannot start: {e}", file=sys.stderr)
        return 1
    return 0
