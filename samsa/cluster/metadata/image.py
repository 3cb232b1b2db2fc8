"""The metadata image: what every node knows about the cluster, built by applying committed
metadata records in offset order. A restart rebuilds it from the latest snapshot plus the log.

The image is only ever changed by `apply`, on every node alike (controllers and brokers), so all
nodes that applied the same offsets hold equal images. `apply` never raises on a record that
names an unknown broker or topic, or a stale broker epoch: it logs and ignores it (the controller
validated the record before committing it; a node must not stop replaying over one).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from samsa.config import TOPIC_CONFIGS
from samsa.security.authorizer import AclBinding

from .records import (
    BROKER_RESOURCE,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

log = logging.getLogger("samsa.metadata")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
UNASSIGNED_DIR = uuid.UUID(int=0)  # Kafka's DirectoryId.UNASSIGNED
METADATA_VERSION = "metadata.version"  # the feature written first in a snapshot, as Kafka does


@dataclass(slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    security_protocols: dict[str, int] = field(default_factory=dict)  # listener name -> protocol
    features: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (min, max)
    log_dirs: tuple[uuid.UUID, ...] = ()


@dataclass(slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int  # -1: offline
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    directories: tuple[uuid.UUID, ...] = ()


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def count(self) -> int:
        """Number of partitions."""
        return len(self.partitions)


class AclMap(dict[uuid.UUID, AclBinding]):
    """The ACL bindings by id; `version` counts changes (the authorizer re-indexes on it)."""

    version = 0

    def apply(self, r: AccessControlEntryRecord | RemoveAccessControlEntryRecord) -> None:
        if isinstance(r, AccessControlEntryRecord):
            self[r.id] = AclBinding(r.resource_type, r.resource_name, r.pattern_type,
                                    r.principal, r.host, r.operation, r.permission_type)
        elif self.pop(r.id, None) is None:
            log.warning("removing unknown ACL %s: ignored", r.id)
        self.version += 1

    def to_records(self) -> list[Record]:
        return [AccessControlEntryRecord(i, b.resource_type, b.resource_name, b.pattern_type,
                                         b.principal, b.host, b.operation, b.permission)
                for i, b in self.items()]


@dataclass(slots=True)
class MetadataImage:
    cluster_id: str = ""  # from meta.properties: no record carries it
    offset: int = -1  # offset of the last record applied
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicImage] = field(default_factory=dict)
    by_id: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    cluster_configs: dict[str, str] = field(default_factory=dict)  # ConfigRecord broker ""
    node_configs: dict[int, dict[str, str]] = field(default_factory=dict)  # broker "<id>"
    features: dict[str, int] = field(default_factory=dict)
    next_producer_id: int = 0
    acls: AclMap = field(default_factory=lambda: AclMap())  # ACL id -> binding
    # client quotas (helper "quotas"): entity ((type, name or None), ...) sorted -> {key: value}
    client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(
        default_factory=dict)
    # SASL/SCRAM credentials: (user, mechanism number) -> UserScramCredentialRecord (KIP-554)
    scram_credentials: dict[tuple[str, int], UserScramCredentialRecord] = field(
        default_factory=dict)

    # ------------------------------------------------------------------------------ applying
    def apply(self, record: Record, offset: int = -1) -> None:
        """Apply one committed record (every record type of `records`); `offset` (when >= 0)
        becomes the image's offset."""
        if offset >= 0:
            self.offset = offset
        if isinstance(record, RegisterBrokerRecord):
            self._register(record)
        elif isinstance(record, UnregisterBrokerRecord):
            if self.brokers.pop(record.broker_id, None) is None:
                log.warning("unregistering unknown broker %d: ignored", record.broker_id)
        elif isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
            b = self._broker(record.id, record.epoch, type(record).__name__)
            if b is not None:
                b.fenced = isinstance(record, FenceBrokerRecord)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            self._registration_change(record)
        elif isinstance(record, TopicRecord):
            self._topic(record)
        elif isinstance(record, PartitionRecord):
            self._partition(record)
        elif isinstance(record, PartitionChangeRecord):
            self._partition_change(record)
        elif isinstance(record, RemoveTopicRecord):
            gone = self.by_id.pop(record.topic_id, None)
            if gone is None:
                log.warning("removing unknown topic id %s: ignored", record.topic_id)
            else:
                self.topics.pop(gone.name, None)
        elif isinstance(record, ConfigRecord):
            self._config(record)
        elif isinstance(record, FeatureLevelRecord):
            if record.feature_level == 0:
                self.features.pop(record.name, None)  # level 0: the feature is off (Kafka)
            else:
                self.features[record.name] = record.feature_level
        elif isinstance(record, ProducerIdsRecord):
            self.next_producer_id = record.next_producer_id
        elif isinstance(record, AccessControlEntryRecord | RemoveAccessControlEntryRecord):
            self.acls.apply(record)
        elif isinstance(record, ClientQuotaRecord):
            self._client_quota(record)
        elif isinstance(record, UserScramCredentialRecord):
            self.scram_credentials[(record.name, record.mechanism)] = record
        elif isinstance(record, RemoveUserScramCredentialRecord):
            self.scram_credentials.pop((record.name, record.mechanism), None)
        elif not isinstance(record, NoOpRecord):
            log.warning("not a metadata record: %r", record)

    def _register(self, r: RegisterBrokerRecord) -> None:
        self.brokers[r.broker_id] = BrokerRegistration(
            r.broker_id, r.incarnation_id, r.broker_epoch,
            {e.name: (e.host, e.port) for e in r.endpoints}, r.rack, r.fenced,
            r.in_controlled_shutdown, {e.name: e.security_protocol for e in r.endpoints},
            {f.name: (f.min_supported_version, f.max_supported_version) for f in r.features},
            r.log_dirs)

    def _broker(self, broker_id: int, epoch: int, what: str) -> BrokerRegistration | None:
        b = self.brokers.get(broker_id)
        if b is None:
            log.warning("%s for unknown broker %d: ignored", what, broker_id)
        elif b.broker_epoch != epoch:
            log.warning("%s for broker %d at epoch %d, registered at %d: ignored", what,
                        broker_id, epoch, b.broker_epoch)
            return None
        return b

    def _registration_change(self, r: BrokerRegistrationChangeRecord) -> None:
        b = self._broker(r.broker_id, r.broker_epoch, "BrokerRegistrationChangeRecord")
        if b is None:
            return
        if r.fenced == 1:
            b.fenced = True
        elif r.fenced == -1:
            b.fenced = False
        if r.in_controlled_shutdown == 1:
            b.in_controlled_shutdown = True
        if r.log_dirs:
            b.log_dirs = r.log_dirs

    def _topic(self, r: TopicRecord) -> None:
        old = self.by_id.get(r.topic_id)
        if old is not None and old.name == r.name:
            return  # replayed twice: keep its partitions
        for stale in (old, self.topics.get(r.name)):
            if stale is not None:
                log.warning("TopicRecord %s (%s) replaces %s (%s)", r.name, r.topic_id,
                            stale.name, stale.topic_id)
                self.topics.pop(stale.name, None)
                self.by_id.pop(stale.topic_id, None)
        t = TopicImage(r.name, r.topic_id)
        self.topics[t.name] = t
        self.by_id[t.topic_id] = t

    def _partition(self, r: PartitionRecord) -> None:
        t = self.by_id.get(r.topic_id)
        if t is None:
            log.warning("PartitionRecord for unknown topic id %s: ignored", r.topic_id)
            return
        t.partitions[r.partition_id] = PartitionState(
            r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch, r.removing_replicas,
            r.adding_replicas, r.leader_recovery_state, r.directories)

    def _partition_change(self, r: PartitionChangeRecord) -> None:
        t = self.by_id.get(r.topic_id)
        p = t.partitions.get(r.partition_id) if t is not None else None
        if p is None:
            log.warning("PartitionChangeRecord for unknown partition %s-%d: ignored", r.topic_id,
                        r.partition_id)
            return
        apply_partition_change(p, r)

    def _config(self, r: ConfigRecord) -> None:
        layer: dict[str, str]
        if r.resource_type == TOPIC_RESOURCE:
            t = self.topics.get(r.resource_name)
            if t is None:
                log.warning("config %s of unknown topic %r: ignored", r.name, r.resource_name)
                return
            layer = t.configs
        elif r.resource_type == BROKER_RESOURCE:
            if r.resource_name == "":
                layer = self.cluster_configs
            else:
                name = r.resource_name
                if not (name.isascii() and name.isdigit() and str(int(name)) == name):
                    log.warning("config %s of broker %r: not a broker id, ignored", r.name, name)
                    return
                node = int(name)
                layer = self.node_configs.setdefault(node, {})
                if r.value is None:
                    layer.pop(r.name, None)
                    if not layer:
                        del self.node_configs[node]
                    return
        else:
            log.warning("config %s of resource type %d: not kept, ignored", r.name,
                        r.resource_type)
            return
        if r.value is None:
            layer.pop(r.name, None)
        else:
            layer[r.name] = r.value

    def _client_quota(self, r: ClientQuotaRecord) -> None:
        entity = tuple(sorted(r.entity, key=lambda e: e[0]))
        if r.remove:
            held = self.client_quotas.get(entity)
            if held is not None:
                held.pop(r.key, None)
                if not held:
                    del self.client_quotas[entity]
        else:
            self.client_quotas.setdefault(entity, {})[r.key] = r.value

    # ------------------------------------------------------------------------------ reading
    def to_records(self) -> list[Record]:
        """Records that rebuild this image from empty (a snapshot's content), in Kafka's snapshot
        order: metadata.version first, then the other features, brokers, topics (each with its
        configs, then its partitions), broker configs, producer ids."""
        out: list[Record] = []
        feats = sorted(self.features.items(), key=lambda kv: (kv[0] != METADATA_VERSION, kv[0]))
        out += [FeatureLevelRecord(name, level) for name, level in feats]
        for _, b in sorted(self.brokers.items()):
            out.append(RegisterBrokerRecord(
                b.broker_id, b.incarnation_id, b.broker_epoch,
                tuple(BrokerEndpoint(n, h, p, b.security_protocols.get(n, 0))
                      for n, (h, p) in b.endpoints.items()),
                tuple(BrokerFeature(n, lo, hi) for n, (lo, hi) in b.features.items()),
                b.rack, b.fenced, b.in_controlled_shutdown, log_dirs=b.log_dirs))
        for t in self.topics.values():
            out.append(TopicRecord(t.name, t.topic_id))
            out += [ConfigRecord(TOPIC_RESOURCE, t.name, k, v) for k, v in t.configs.items()]
            for pid, p in sorted(t.partitions.items()):
                out.append(PartitionRecord(
                    pid, t.topic_id, p.replicas, p.isr, p.leader, p.leader_epoch,
                    p.partition_epoch, p.removing_replicas, p.adding_replicas,
                    p.leader_recovery_state, p.directories))
        out += [ConfigRecord(BROKER_RESOURCE, "", k, v) for k, v in self.cluster_configs.items()]
        for node, layer in sorted(self.node_configs.items()):
            out += [ConfigRecord(BROKER_RESOURCE, str(node), k, v) for k, v in layer.items()]
        if self.next_producer_id:
            out.append(ProducerIdsRecord(-1, -1, self.next_producer_id))  # as Kafka's image
        out += self.acls.to_records()
        for entity, quotas in self.client_quotas.items():
            out += [ClientQuotaRecord(entity, k, v) for k, v in quotas.items()]
        out += [c for _, c in sorted(self.scram_credentials.items())]
        return out

    def live_brokers(self) -> list[BrokerRegistration]:
        """Unfenced brokers, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def broker_configs_for_topics(self, node_id: int) -> dict[str, str]:
        """Dynamic broker settings as topic config names: the node's own over the cluster-wide
        (Kafka: DYNAMIC_BROKER_CONFIG above DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        node = self.node_configs.get(node_id, {})
        out = {}
        for d in TOPIC_CONFIGS.values():
            if not d.broker_synonym:
                continue
            for layer in (node, self.cluster_configs):
                if d.broker_synonym in layer:
                    out[d.name] = layer[d.broker_synonym]
                    break
        return out


def apply_partition_change(p: PartitionState, r: PartitionChangeRecord) -> None:
    """Kafka's PartitionRegistration.merge: given fields replace, a new leader (even the same
    one) bumps the leader epoch, every change bumps the partition epoch."""
    if r.replicas is not None:
        if r.directories is None and p.directories:
            # each replica keeps its log dir; a new one has none yet (Kafka's UNASSIGNED)
            dirs = dict(zip(p.replicas, p.directories, strict=False))
            p.directories = tuple(dirs.get(b, UNASSIGNED_DIR) for b in r.replicas)
        p.replicas = r.replicas
    if r.isr is not None:
        p.isr = r.isr
    if r.removing_replicas is not None:
        p.removing_replicas = r.removing_replicas
    if r.adding_replicas is not None:
        p.adding_replicas = r.adding_replicas
    if r.leader != NO_LEADER_CHANGE:
        p.leader = r.leader
        p.leader_epoch += 1
    if r.leader_recovery_state != -1:
        p.leader_recovery_state = r.leader_recovery_state
    if r.directories is not None:
        p.directories = r.directories
    p.partition_epoch += 1
