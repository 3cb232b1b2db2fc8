"""The Broker: wires storage, metadata, controller and handlers to the listeners."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import Any

from samsa.cluster.controller import ControllerError
from samsa.cluster.internal_topic import InternalTopic
from samsa.cluster.node import ClusterNode
from samsa.cluster.replication.manager import ReplicaManager, ReplicationConfig
from samsa.config import BrokerConfig
from samsa.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from samsa.coordinator.txn.coordinator import TransactionCoordinator, TxnConfig
from samsa.coordinator.txn.markers import MarkerSender
from samsa.net.tls_transport import TlsServerProtocol
from samsa.protocol import apis
from samsa.protocol.codec import warm_up
from samsa.protocol.errors import Err
from samsa.security.authorizer import Authorizer
from samsa.security.quotas import QuotaManager
from samsa.storage.cleaner import CleanerConfig
from samsa.storage.log import PartitionLog
from samsa.storage.manager import LogManager

from .controller_client import ControllerClient
from .fetch_sessions import FetchSessionCache
from .handlers import BROKER_SPEC, CONTROLLER_SPEC, HANDLERS, ListenerSpec
from .lifecycle import BrokerLifecycle
from .server import KafkaConnection, NetworkLimits

log = logging.getLogger("samsa.broker")


class Broker:
    """One Samsa node: the broker role (client listeners, partition logs, coordinators) and,
    through its ClusterNode, the metadata quorum and the controller role."""

    def __init__(self, config: BrokerConfig) -> None:
        from samsa.broker.listeners import validate_node
        from samsa.cluster.channel import ChannelPool

        self.config = config
        self.node_id = config.node_id
        self.bind_listeners, self.advertised_listeners = validate_node(config)
        from samsa.security.sasl.listeners import build_sasl_listeners

        self.sasl_listeners = build_sasl_listeners(config, self.bind_listeners, self._scram_lookup)
        ctrl_names = {n.strip() for n in
                      (config.get("controller.listener.names") or "CONTROLLER").split(",")}
        self.controller_listeners = [ln for ln in self.bind_listeners if ln.name in ctrl_names]
        self.broker_listeners = [ln for ln in self.bind_listeners if ln.name not in ctrl_names]
        self.advertised_broker_listeners = [ln for ln in self.advertised_listeners
                                            if ln.name not in ctrl_names]
        from samsa.broker.listeners import inter_broker_listener_name

        self.inter_broker_listener = inter_broker_listener_name(config) or (
            self.broker_listeners[0].name if self.broker_listeners else "PLAINTEXT")
        ctrl = self.controller_listeners[0] if self.controller_listeners else None
        self.node = ClusterNode(config, (ctrl.host, ctrl.port) if ctrl else None)
        self.is_broker = "broker" in self.node.roles
        first = self.broker_listeners[0] if self.broker_listeners else ctrl
        self.bind_host, self.bind_port = (first.host, first.port) if first else ("127.0.0.1", 0)
        self.logs = LogManager(config.log_dirs, CleanerConfig.from_broker(config.get))
        self.logs.hw_checkpoint_ms = config.get_int("replica.high.watermark.checkpoint.interval.ms")
        # tiered storage (issue 19): samsa.storage.remote.manager, started with the broker
        from samsa.storage.remote.config import validate_broker

        validate_broker(config.get)
        self.logs.remote_system_enabled = config.get_bool("remote.log.storage.system.enable")
        self.remote_log_manager: Any = None
        self.controller = ControllerClient(self)
        # ACLs (issue 17): None unless authorizer.class.name names the StandardAuthorizer
        self.authorizer = Authorizer.from_config(config.get, lambda: self.node.image.acls)
        # node-to-node TLS / SASL (sec-cluster): the controllers' listener, the inter-broker one
        from samsa.cluster.node_security import inter_broker_security

        self.inter_broker_security = inter_broker_security(config) \
            if self.is_broker_role() and not self.node.embedded else None
        self.channels = ChannelPool(client_id=f"samsa-node-{self.node_id}",
                                    security=self.node.security)
        # their TLS contexts follow this node's dynamic ssl.* settings (Kafka's listener SSL
        # factory, shared by the node's own connections): reloaded with the listeners'
        from samsa.cluster.node_security import reloadable_tls

        self.client_tls = reloadable_tls(self.node.security, self.inter_broker_security)
        for client_tls in self.client_tls:
            client_tls.lookup = self._broker_setting
        self.lifecycle = BrokerLifecycle(self)
        self.replicas = ReplicaManager(
            self.node_id, ReplicationConfig.from_broker(config.get_int), lambda: self.node.image,
            self.inter_broker_listener, lambda: self.lifecycle.broker_epoch,
            self._alter_partition, self._min_isr)
        self.replicas.security = self.inter_broker_security
        self.replicas.rack_aware = (config.get("replica.selector.class") or "").endswith(
            "RackAwareReplicaSelector")
        self.replicas.broker_setting = self._broker_setting
        self.replicas.topic_setting = lambda topic, name: self.controller.topic_configs(
            topic).get(name)
        self.groups: GroupCoordinator
        self.txn: TransactionCoordinator
        self.handlers: dict[int, Any] = HANDLERS
        self.connections: set[KafkaConnection] = set()
        self.network_limits = NetworkLimits(
            max_request=config.get_int("socket.request.max.bytes"),
            queued_max=config.get_int("queued.max.requests"),
            per_connection=config.get_int("queued.max.requests.per.connection"),
            max_connections=config.get_int("max.connections"),
            max_per_ip=config.get_int("max.connections.per.ip"))
        # TLS contexts of the SSL / SASL_SSL listeners, built now so a bad key store stops the start
        from samsa.broker.listeners import TLS_PROTOCOLS
        from samsa.security.ssl_context import ListenerTls

        self.tls = {ln.name: ListenerTls(ln.name, ln.security_protocol, self._broker_setting)
                    for ln in self.bind_listeners if ln.security_protocol in TLS_PROTOCOLS}
        if any(ln.security_protocol.startswith("SASL_") for ln in self.bind_listeners):
            import importlib.util

            from samsa.config import ConfigError

            if importlib.util.find_spec("samsa.security.sasl") is None:
                # never serve a SASL listener without authenticating its clients
                raise ConfigError("SASL_PLAINTEXT / SASL_SSL listeners need samsa.security.sasl, "
                                  "which this build does not have")
        self.servers: list[asyncio.AbstractServer] = []
        self.host = self.bind_host
        self.port = self.bind_port
        self._stopped = asyncio.Event()
        self._hosting = False  # partition logs follow the image from now on
        self._reconcile_task: asyncio.Future[None] | None = None
        self._reconcile_wanted = False
        self._topic_ids: dict[str, Any] = {}  # topic id of the local logs of each topic
        self._names_by_id: dict[Any, str] = {}  # topic names by id, to name removed topics
        self._forget: set[str] = set()  # deleted topics whose group offsets are to go
        # client quotas (helper "quotas"): resolved from the image, measured per request
        self.quotas = QuotaManager(config.get_int("quota.window.num"),
                                   float(config.get_int("quota.window.size.seconds")))
        self.fetch_sessions = FetchSessionCache(
            int(config.get("max.incremental.fetch.session.cache.slots") or 1000))
        # metrics and the admin HTTP listener (ops-metrics: samsa/metrics, samsa/admin)
        from samsa.admin.service import AdminService
        from samsa.metrics.counters import BrokerMetrics

        self.metrics = BrokerMetrics()
        self.admin = AdminService(self)

    def is_broker_role(self) -> bool:
        from samsa.broker.listeners import roles

        return "broker" in roles(self.config)

    def _scram_lookup(self, user: str, mechanism: str) -> Any:
        """The SCRAM credential of a user in the metadata image (None if it has none)."""
        from samsa.security.sasl.scram import MECHANISMS, ScramCredential

        rec = self.node.image.scram_credentials.get((user, MECHANISMS[mechanism]))
        return None if rec is None else ScramCredential(rec.salt, rec.stored_key, rec.server_key,
                                                         rec.iterations)

    def controller_channel(self) -> Any:
        """The NodeChannel to the active controller's CONTROLLER listener; None if unknown."""
        leader = self.node.leader_id
        ep = self.node.controller_endpoint()
        if leader is None or ep is None or leader == self.node_id:
            return None  # unknown, or this node (becoming active: callers retry)
        return self.channels.set_address(leader, ep[0], ep[1])

    async def _listen(self, listener: Any, spec: ListenerSpec) -> int:
        loop = asyncio.get_running_loop()
        tls = self.tls.get(listener.name)
        if tls is not None:
            tls.reload()  # dynamic ssl.* settings from the metadata log, if any

        def connection() -> KafkaConnection:
            conn = KafkaConnection(self, spec, listener.name)
            conn.security_protocol = listener.security_protocol
            conn.tls = tls
            return conn

        def tls_connection() -> TlsServerProtocol:
            assert tls is not None
            return TlsServerProtocol(tls.current, connection())

        server = await loop.create_server(connection if tls is None else tls_connection,
                                          listener.host, listener.port,
                                          reuse_address=True, backlog=1024)
        self.servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        warm_up(apis.SUPPORTED)
        await self.admin.start()  # ops-metrics: /health/live answers during recovery
        clean = self.logs.detect_clean()
        cluster_id = self.node.prepare_storage()
        for ln in self.controller_listeners:
            await self._listen(ln, CONTROLLER_SPEC)
        self.node.subscribe(self._on_metadata)
        self.node.subscribe(self._on_tls_metadata)
        await self.node.start()
        if not self.is_broker:
            log.info("Samsa controller %d started (cluster %s)", self.node_id, cluster_id)
            self.admin.started()
            return
        await self.node.wait_caught_up()
        image = self.node.image
        configs = {name: self.controller.log_config(name) for name in image.topics}
        from samsa.storage.remote.config import check_stored_topics  # tiered storage (Kafka's check)
        check_stored_topics(self.logs.remote_system_enabled,
                            [n for n, c in configs.items() if c.remote_storage_enable])
        self.logs.startup(configs)
        self._hosting = True
        self.quotas.update(self.node.image.client_quotas)
        await self._reconcile()
        self.replicas.start()
        self.lifecycle.start()
        await self._wait_unfenced()
        self.replicas.subscribe_leadership(self._coordinator_leadership)
        self.groups = self._group_coordinator()
        self.groups.load()
        self.groups.start()
        self.txn = self._txn_coordinator()
        self.txn.load()
        self.txn.start()
        self._producer_expiry = asyncio.create_task(self._expire_producers_loop())
        if self.logs.remote_system_enabled:  # tiered storage (issue 19)
            from samsa.storage.remote.manager import for_broker

            self.remote_log_manager = for_broker(self)
            self.remote_log_manager.start()
        for ln in self.broker_listeners:
            port = await self._listen(ln, BROKER_SPEC)
            if ln is self.broker_listeners[0]:
                self.port = port
        adv = [a for a in self.advertised_broker_listeners
               if a.name == self.broker_listeners[0].name] if self.broker_listeners else []
        if adv and self.config.get("advertised.listeners"):
            self.host, self.port = adv[0].host, adv[0].port
        self.logs.start_background(self.config.get_int("log.retention.check.interval.ms"),
                                   self.config.get_int("log.flush.scheduler.interval.ms"))
        log.info("Samsa broker %d listening on %s:%d (cluster %s, %s start)", self.node_id,
                 self.bind_host, self.port, cluster_id, "clean" if clean else "recovered")
        self.admin.started()

    async def _wait_unfenced(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.lifecycle.unfenced.wait(), 5.0)
                return
            except TimeoutError:
                log.warning("broker %d is not unfenced yet (registered: %s); waiting for the "
                            "active controller", self.node_id, self.lifecycle.broker_epoch >= 0)

    # ---- the image -> local partitions -----------------------------------------------------
    def hosts(self, st: Any) -> bool:
        """This broker holds a replica of the partition (as its leader or a follower)."""
        return self.node_id in st.replicas

    async def _alter_partition(self, topic_id: Any, partition: int, leader_epoch: int,
                               partition_epoch: int, isr: list[tuple[int, int]]) -> Any:
        return await self.controller.alter_partition(  # type: ignore[attr-defined]
            topic_id, partition, leader_epoch, isr, 0, partition_epoch,
            timeout_s=self.config.get_int("replica.socket.timeout.ms") / 1000)

    def _broker_setting(self, name: str) -> str | None:
        """A broker setting as it applies to this node: its dynamic value, else the cluster-wide
        dynamic default, else server.properties (Kafka's order)."""
        image = self.node.image
        value = image.node_configs.get(self.node_id, {}).get(name)
        if value is None:
            value = image.cluster_configs.get(name)
        return value if value is not None else self.config.get(name)

    def _min_isr(self, topic: str) -> int:
        try:
            return int(self.controller.topic_configs(topic).get("min.insync.replicas") or 1)
        except (ValueError, KeyError):
            return 1

    def leads(self, topic: str, partition: int) -> bool:
        t = self.node.image.topics.get(topic)
        st = t.partitions.get(partition) if t is not None else None
        return st is not None and st.leader == self.node_id

    def _on_metadata(self, records: list[Any], full: bool) -> None:
        from samsa.cluster.metadata import records as rec

        if full or any(isinstance(r, rec.ClientQuotaRecord) for r in records):
            self.quotas.update(self.node.image.client_quotas)
        if not self._hosting:
            return

        for r in records:
            if isinstance(r, rec.TopicRecord):
                self._names_by_id[r.topic_id] = r.name
            elif isinstance(r, rec.RemoveTopicRecord):
                name = self._names_by_id.pop(r.topic_id, None)
                if name is not None:
                    self._forget.add(name)
        if full or any(isinstance(r, rec.PartitionRecord | rec.RemoveTopicRecord
                                  | rec.TopicRecord | rec.PartitionChangeRecord
                                  | rec.RegisterBrokerRecord) for r in records):
            self._reconcile_soon()
        topics: set[str] = set()
        all_topics = full
        for r in records:
            if isinstance(r, rec.ConfigRecord):
                if r.resource_type == rec.TOPIC_RESOURCE:
                    topics.add(r.resource_name)
                else:
                    all_topics = True
        for name in (self.node.image.topics if all_topics else topics):
            if name in self.node.image.topics:
                self.logs.update_config(name, self.controller.log_config(name))
                self.replicas.config_changed(name)

    def check_tls_changes(self, changes: dict[str, str | None], resource: str) -> None:
        """Kafka's checks of a dynamic change to TLS settings: only per broker, only with the
        listener prefix, only key and trust stores; and every TLS listener must still build a
        context (Kafka validates a new key store before accepting it)."""
        from samsa.config import ConfigError, is_read_only
        from samsa.security.ssl_context import TlsSettings, build_server_context

        def refuse(why: str, names: list[str]) -> None:
            raise ControllerError(Err.INVALID_REQUEST, f"{why}: Set({', '.join(sorted(names))})")

        plain = [k for k in changes if k.startswith("ssl.")]
        prefixed = [k for k in changes if k.startswith("listener.name.") and ".ssl." in k]
        if plain:
            refuse("These security configs can be dynamically updated only per-listener using "
                   "the listener prefix", plain)
        fixed = [k for k in prefixed if is_read_only(k)]
        if fixed:
            refuse("Cannot update these configs dynamically", fixed)
        if prefixed and resource == "":
            refuse("Cannot update these configs at default cluster level, broker id must be "
                   "specified", prefixed)
        if not (self.tls or self.client_tls) or not prefixed:
            return

        def lookup(name: str) -> str | None:
            if name in changes:
                v = changes[name]
                return v if v is not None else self.config.get(name)
            return self._broker_setting(name)

        from samsa.cluster.node_security import build_client_context

        try:
            for name, tls in self.tls.items():
                build_server_context(TlsSettings.read(lookup, name, tls.protocol), name)
            for client in self.client_tls:  # the node's own connections use them too
                build_client_context(lookup, client.listener)
        except ConfigError as e:
            raise ControllerError(Err.INVALID_REQUEST, "Validation of dynamic config update "
                                  f"of SSLFactory failed: {e}") from None

    def _on_tls_metadata(self, records: list[Any], full: bool) -> None:
        """Dynamic listener config: a per-broker or cluster-wide ssl.* change (even to the same
        path, after the file was renewed) reloads the TLS listeners it applies to."""
        if not self.tls and not self.client_tls:
            return
        from samsa.cluster.metadata import records as rec

        touched = [r.name for r in records if isinstance(r, rec.ConfigRecord)
                   and r.resource_type != rec.TOPIC_RESOURCE
                   and r.resource_name in ("", str(self.node_id)) and "ssl." in r.name]
        if not touched and not full:
            return
        for name, tls in self.tls.items():
            prefix = f"listener.name.{name.lower()}."
            force = any(n.startswith("ssl.") or n.startswith(prefix) for n in touched)
            try:
                tls.reload(force=force)
            except Exception as e:
                log.error("listener %s keeps its TLS certificate: reload failed: %s", name, e)
        for client in self.client_tls:  # what this node presents and trusts when it dials
            prefix = f"listener.name.{client.listener.lower()}."
            force = any(n.startswith("ssl.") or n.startswith(prefix) for n in touched)
            try:
                client.reload(force=force)
            except Exception as e:
                log.error("listener %s: node-to-node connections keep their TLS key and trust "
                          "stores: reload failed: %s", client.listener, e)

    def _reconcile_soon(self) -> None:
        self._reconcile_wanted = True
        if self._reconcile_task is None or self._reconcile_task.done():
            self._reconcile_task = asyncio.ensure_future(self._reconcile_loop())

    async def _reconcile_loop(self) -> None:
        while self._reconcile_wanted:
            self._reconcile_wanted = False
            try:
                await self._reconcile()
            except Exception:
                log.exception("reconciling partition logs with the metadata image failed")

    async def reconciled(self) -> None:
        """Wait until the local partition logs match the image as applied so far."""
        while self._reconcile_task is not None and not self._reconcile_task.done():
            await asyncio.shield(self._reconcile_task)

    async def _reconcile(self) -> None:
        """Make the local partition logs match the image: delete topics the image no longer has
        (or has under another topic id), then create the partitions this broker hosts, yielding
        between two (a partition costs files and fsyncs; thousands would hold the event loop) and
        stopping for a topic deleted or replaced meanwhile."""
        image = self.node.image
        if not self._names_by_id:
            self._names_by_id = {t.topic_id: t.name for t in image.topics.values()}
        while self._forget and hasattr(self, "groups"):
            # a deleted topic's committed offsets go with it, on every broker's own groups
            await self.groups.forget_topic(self._forget.pop())
        doomed: set[tuple[str, int]] = set()  # local replicas the image no longer gives us
        for (name, p) in list(self.logs.logs):
            t = image.topics.get(name)
            st = t.partitions.get(p) if t is not None else None
            if (t is None or self._topic_ids.get(name, t.topic_id) != t.topic_id or st is None
                    or not self.hosts(st)):
                doomed.add((name, p))
        if doomed:
            # roles first (no fetcher may write into files being deleted), then the files:
            # a deleted topic, or a replica reassigned away (Kafka's StopReplica with delete)
            self.replicas.apply(image, lambda n, q: None if (n, q) in doomed
                                else self.logs.get(n, q))
            for name in {n for n, _ in doomed}:
                t = image.topics.get(name)
                if t is None or self._topic_ids.get(name, t.topic_id) != t.topic_id:
                    self.logs.delete_topic(name)
                    self._topic_ids.pop(name, None)
            for name, p in doomed:
                if self.logs.get(name, p) is not None:
                    self.logs.delete_partition(name, p)
        for name, t in list(image.topics.items()):
            cfg = None
            for p, st in list(t.partitions.items()):
                if image.topics.get(name) is not t:
                    break
                if self.hosts(st) and self.logs.get(name, p) is None:
                    cfg = cfg or self.controller.log_config(name)
                    self.logs.create(name, p, cfg)
                    self._topic_ids[name] = t.topic_id
                    await asyncio.sleep(0)
                elif name not in self._topic_ids and self.logs.get(name, p) is not None:
                    self._topic_ids[name] = t.topic_id
        self.replicas.apply(self.node.image, self.logs.get)

    def _coordinator_leadership(self, topic: str, partition: int, epoch: int,
                                leader: bool) -> None:
        """Coordinators move with the leadership of their internal topic's partitions: a new
        leader replays the partition (and completes decided transactions), a former one forgets
        it."""
        coord: Any = {"__consumer_offsets": getattr(self, "groups", None),
                      "__transaction_state": getattr(self, "txn", None)}.get(topic)
        if coord is None:
            return
        if leader:
            coord.unload({partition})  # whatever an earlier term left
            coord.load({partition})
        else:
            coord.unload({partition})

    def _internal_hooks(self, topic: InternalTopic) -> None:
        """An internal topic writes only to partitions this broker leads, and a write is done
        when it is replicated to the ISR (Kafka writes coordinator records with acks=all)."""
        topic.wait_local = self.reconciled
        topic.leader_log = self.partition_log
        timeout_s = self.config.get_int("offsets.commit.timeout.ms") / 1000

        async def replicated(lg: PartitionLog, end_offset: int) -> int:
            return await self.replicas.wait_replicated(lg, end_offset, timeout_s)
        topic.replicated = replicated

    def _group_coordinator(self) -> GroupCoordinator:
        c = self.config
        topic = InternalTopic(self.controller, self.logs, "__consumer_offsets",
                              c.get_int("offsets.topic.num.partitions"),
                              {"cleanup.policy": "compact",
                               "segment.bytes": c.get("offsets.topic.segment.bytes") or "104857600"},
                              c.get_int("offsets.topic.replication.factor"))
        self._internal_hooks(topic)
        cfg = GroupConfig(
            min_session_ms=c.get_int("group.min.session.timeout.ms"),
            max_session_ms=c.get_int("group.max.session.timeout.ms"),
            initial_delay_ms=c.get_int("group.initial.rebalance.delay.ms"),
            metadata_max_bytes=c.get_int("offset.metadata.max.bytes"),
            retention_ms=c.get_int("offsets.retention.minutes") * 60000,
            retention_check_ms=c.get_int("offsets.retention.check.interval.ms"),
            consumer_heartbeat_ms=c.get_int("group.consumer.heartbeat.interval.ms"),
            consumer_session_ms=c.get_int("group.consumer.session.timeout.ms"))
        return GroupCoordinator(topic, cfg, self.partition_exists)

    def _txn_coordinator(self) -> TransactionCoordinator:
        c = self.config
        topic = InternalTopic(self.controller, self.logs, "__transaction_state",
                              c.get_int("transaction.state.log.num.partitions"),
                              {"cleanup.policy": "compact", "segment.bytes": "104857600"},
                              c.get_int("transaction.state.log.replication.factor"))
        self._internal_hooks(topic)
        cfg = TxnConfig(
            max_timeout_ms=c.get_int("transaction.max.timeout.ms"),
            check_interval_ms=c.get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            id_expiration_ms=c.get_int("transactional.id.expiration.ms"))
        from .handlers.markers import write_local

        async def local(pid: int, epoch: int, commit: bool, tps: Iterable[tuple[str, int]],
                        coordinator_epoch: int) -> dict[tuple[str, int], int]:
            return await write_local(self, pid, epoch, commit, tps, coordinator_epoch)

        self.txn_markers = MarkerSender(self.node_id, lambda: self.node.image,
                                        self.inter_broker_listener, local,
                                        security=self.inter_broker_security)
        return TransactionCoordinator(
            topic, cfg, self.controller.allocate_producer_id, self._write_markers,
            lambda g: ("__consumer_offsets", self.groups.topic.partition_of(g)),
            self.partition_exists)

    async def _expire_producers_loop(self) -> None:
        """Idle producers' idempotence state goes after producer.id.expiration.ms (Kafka checks
        every producer.id.expiration.check.interval.ms, 10 minutes by default)."""
        expiration = self.config.get_int("producer.id.expiration.ms")
        interval = self.config.get_int("producer.id.expiration.check.interval.ms")
        while True:
            await asyncio.sleep(interval / 1000)
            now = int(time.time() * 1000)
            for lg in list(self.logs.logs.values()):
                lg.producers.expire(now, expiration)

    async def _write_markers(self, producer_id: int, epoch: int, commit: bool,
                             partitions: set[tuple[str, int]], coordinator_epoch: int) -> None:
        """COMMIT/ABORT markers into every partition of a transaction: written here for the
        partitions this broker leads, sent as WriteTxnMarkers to the leaders of the others;
        retried until written (MarkerSender). `coordinator_epoch`: the leader epoch of the
        transaction's __transaction_state partition, so a replaced coordinator is fenced."""
        await self.txn_markers.write(producer_id, epoch, commit, partitions, coordinator_epoch)

    async def stop(self) -> None:
        self.admin.stopping()
        if self.is_broker and self._hosting:
            await self.lifecycle.controlled_shutdown(
                min(5.0, self.config.get_int("broker.session.timeout.ms") / 1000))
        # from here the image no longer changes local logs or roles (no fetcher may start
        # after the replica manager stopped, nor write into logs being closed)
        self._hosting = False
        if self._reconcile_task is not None and not self._reconcile_task.done():
            self._reconcile_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reconcile_task
        await self.lifecycle.stop()
        await self.replicas.stop()
        if hasattr(self, "_producer_expiry"):
            self._producer_expiry.cancel()
        if hasattr(self, "txn"):
            self.txn.stop()
            await self.txn_markers.close()
        if hasattr(self, "groups"):
            self.groups.stop()
        if self.remote_log_manager is not None:  # tiered storage (issue 19)
            await self.remote_log_manager.close()
        for server in self.servers:
            server.close()
        for c in list(self.connections):
            c.close()
        await self.node.stop()
        await self.channels.close()
        self.logs.shutdown()
        await self.admin.stop()
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # ---- helpers for handlers ------------------------------------------------------------
    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of a partition this broker leads (as the replica manager has applied the
        image); None otherwise (see partition_error)."""
        lead = self.replicas.leaders.get((topic, partition))
        return None if lead is None else lead.log

    def partition_exists(self, topic: str, partition: int) -> bool:
        t = self.node.image.topics.get(topic)
        return t is not None and partition in t.partitions

    def partition_error(self, topic: str, partition: int) -> int:
        """Why partition_log gave None: the partition is elsewhere (or offline) or unknown."""
        if self.partition_exists(topic, partition):
            return Err.NOT_LEADER_OR_FOLLOWER
        return Err.UNKNOWN_TOPIC_OR_PARTITION

    async def auto_create(self, topic: str) -> bool:
        if not self.config.get_bool("auto.create.topics.enable"):
            return False
        try:
            await self.controller.create_topic(topic, -1, -1, {})
        except ControllerError as e:
            return e.code == 36  # created concurrently
        return True
