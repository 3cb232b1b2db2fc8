"""The KRaft controller logic: what the active controller of the quorum decides.

Every request is checked against the committed `MetadataImage` and answered by proposing metadata
records; nothing here touches a log or the disk. `propose(records)` returns once the records are
committed and applied to the image, and every mutating call holds one lock, so each decision sees
the image as the previous one left it.

Part 1 of clustering: partitions get replica lists placed across the unfenced brokers, but only
the leader holds data, so a partition's ISR is just its leader. A fenced leader leaves its
partitions offline (leader -1, ISR unchanged: no unclean election) until it is unfenced again.

Broker epochs: Kafka uses the offset of the RegisterBrokerRecord. This controller cannot know
that offset before the record is committed, so it uses a strictly increasing number that is never
above it: the offset after the last committed record (and above every epoch it handed out)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from samsa.config import BrokerConfig, ConfigError
from samsa.protocol.errors import Err

from ..limits import (
    EXCESSIVE,
    MAX_PARTITIONS_PER_REQUEST,
    ControllerError,
    check_broker_budget,
    check_replica_list,
    check_topic_assignments,
)
from ..metadata.image import INTERNAL_TOPICS, BrokerRegistration, MetadataImage, PartitionState
from ..metadata.records import (
    BROKER_RESOURCE,
    NO_LEADER,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from .partition_change import (
    RECOVERED,
    RECOVERING,
    Election,
    build_change,
    merged,
)
from .partitions import (
    Reassigning,
    alter_reassignments,
    elect_leaders,
    list_reassignments,
    rebalance_elections,
    unclean_elections,
    warn_unclean,
)
from .placement import place_replicas
from .sessions import BrokerSessions
from .validation import (
    check_dynamic_broker_configs,
    check_topic_configs,
    collision_key,
    validate_topic_name,
)

__all__ = ["BOOTSTRAP_METADATA_VERSION", "PRODUCER_ID_BLOCK", "HeartbeatReply", "IsrChange",
           "QuorumController"]

_R = TypeVar("_R")
log = logging.getLogger("samsa.controller")

# Kafka's ProducerIdControlManager hands out blocks of this size.
PRODUCER_ID_BLOCK = 1000
_MAX_PRODUCER_ID = 2**63 - 1
# metadata.version written when the log is empty: 3.7-IV4 (Kafka's level 19). The records module
# writes RegisterBrokerRecord v3 (log dirs, from 3.7-IV2) and no KIP-966 (3.8) fields, and the
# brokers give KIP-951 leader hints (3.7-IV4).
BOOTSTRAP_METADATA_VERSION = 19
_FENCE, _UNFENCE, _SHUTTING_DOWN = 1, -1, 1
_DEFAULT_SESSION_MS = 9000
# how often offline partitions are looked at for unclean elections (besides when a leader is
# fenced), and at most how many such elections one look makes
UNCLEAN_CHECK_MS = 1000
MAX_ELECTIONS_PER_CHECK = 1000

Propose = Callable[[list[Record]], Awaitable[int]]
Assignments = Sequence[tuple[int, Sequence[int]]]


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    """The controller's answer to a BrokerHeartbeat (the fields of Kafka's response)."""

    error: int
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition of an AlterPartition request: the leader's view (epochs) and its new ISR
    as (broker id, broker epoch or -1) pairs."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[tuple[int, int], ...]
    leader_recovery_state: int
    partition_epoch: int


class QuorumController:
    def __init__(self, config: BrokerConfig, image: MetadataImage, propose: Propose,
                 clock: Callable[[], int], *, rng: random.Random | None = None) -> None:
        """`image` is the node's committed image (the node may reassign `self.image` when a
        snapshot replaces it); `clock` returns monotonic milliseconds; `rng` seeds placement."""
        self.config = config
        self.image = image
        self._propose = propose
        self._clock = clock
        self._rng = rng or random.Random()
        self._lock = asyncio.Lock()
        self._last_epoch = -1
        self.sessions = BrokerSessions(_config_int(config, "broker.session.timeout.ms",
                                                   _DEFAULT_SESSION_MS))
        self._next_unclean_check = 0
        self._next_rebalance = 0

    # ---- activation ------------------------------------------------------------------------

    async def activate(self) -> None:
        """This node became the active controller: write the bootstrap records if the log has
        none, and give every registered broker a full session (as Kafka after a failover)."""
        async with self._lock:
            if "metadata.version" not in self.image.features:
                await self._propose([FeatureLevelRecord("metadata.version",
                                                        BOOTSTRAP_METADATA_VERSION)])
            now = self._clock()
            self.sessions.reset(list(self.image.brokers), now, self.image.offset)
            self._next_rebalance = now + self._rebalance_interval_ms()

    # ---- topics ----------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, replication: int,
                           configs: dict[str, str | None], validate_only: bool = False,
                           assignments: Assignments | None = None) -> uuid.UUID:
        """Checks in the order of Kafka's controller (name, existence, configs, replication factor
        and partitions or the manual assignment, the brokers' partition budget); writes nothing
        unless all pass, nor with `validate_only`. -1 takes the broker defaults. `assignments`
        are CreateTopics' (partition index, broker ids) pairs."""
        async with self._lock:
            validate_topic_name(name)
            image = self.image
            if name in image.topics:
                raise ControllerError(Err.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            collide = collision_key(name)
            for other in image.topics:
                if collision_key(other) == collide:
                    raise ControllerError(Err.INVALID_TOPIC_EXCEPTION,
                                          f"Topic '{name}' collides with existing topic: {other}")
            check_topic_configs(configs, self._tiered_context(None))
            if assignments is not None:
                placement = self._manual_placement(assignments, partitions, replication)
            else:
                placement = self._auto_placement(partitions, replication)
            if name not in INTERNAL_TOPICS:
                self._check_budget(placement)
            topic_id = self._new_topic_id()
            if validate_only:
                return topic_id
            records: list[Record] = [TopicRecord(name, topic_id)]
            records += [PartitionRecord(p, topic_id, replicas, self._initial_isr(replicas), leader)
                        for p, (replicas, leader) in enumerate(placement)]
            records += [ConfigRecord(TOPIC_RESOURCE, name, k, v)
                        for k, v in configs.items() if v is not None]
            await self._propose(records)
            return topic_id

    def _tiered_context(self, name: str | None) -> tuple[dict[str, str], dict[str, str], bool]:
        """What the remote storage checks need (issue 19): the topic defaults of this node, the
        topic's current configs, remote.log.storage.system.enable."""
        defaults = self.config.topic_defaults()
        defaults.update(self.image.broker_configs_for_topics(self.config.node_id))
        t = self.image.topics.get(name) if name is not None else None
        return (defaults, dict(t.configs) if t is not None else {},
                self.config.get_bool("remote.log.storage.system.enable"))

    async def delete_topic(self, name: str) -> uuid.UUID:
        async with self._lock:
            t = self.image.topics.get(name)
            if t is None:
                raise ControllerError(Err.UNKNOWN_TOPIC_OR_PARTITION,
                                      "This server does not host this topic-partition.")
            if not self.config.get_bool("delete.topic.enable"):
                raise ControllerError(Err.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            await self._propose([RemoveTopicRecord(t.topic_id)])
            return t.topic_id

    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                assignments: Sequence[Sequence[int]] | None = None) -> None:
        """Grow a topic to `count` partitions, new replicas placed like a new topic's (or as
        `assignments`, one broker list per new partition); all checked before anything is
        written."""
        async with self._lock:
            t = self.image.topics.get(name)
            if t is None:
                raise ControllerError(Err.UNKNOWN_TOPIC_OR_PARTITION,
                                      "This server does not host this topic-partition.")
            have = t.count
            if count == have:
                raise ControllerError(Err.INVALID_PARTITIONS,
                                      f"Topic already has {have} partition(s).")
            if count < have:
                raise ControllerError(Err.INVALID_PARTITIONS,
                                      f"The topic {name} currently has {have} partition(s); "
                                      f"{count} would not be an increase.")
            additional = count - have
            if additional > MAX_PARTITIONS_PER_REQUEST:
                raise ControllerError(Err.POLICY_VIOLATION, EXCESSIVE)
            first = t.partitions.get(0)
            replication = len(first.replicas) if first is not None and first.replicas else 1
            if assignments is not None:
                if len(assignments) != additional:
                    raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                                          f"Attempted to add {additional} additional partition(s), "
                                          f"but only {len(assignments)} assignment(s) were "
                                          "specified.")
                known = frozenset(self.image.brokers)
                placement = []
                for i, broker_ids in enumerate(assignments):
                    check_replica_list(broker_ids, known, replication)
                    placement.append((tuple(broker_ids),
                                      self._manual_leader(broker_ids, have + i)))
            else:
                placement = self._auto_placement(additional, replication)
            if name not in INTERNAL_TOPICS:
                self._check_budget(placement)
            if validate_only:
                return
            await self._propose([PartitionRecord(have + i, t.topic_id, replicas,
                                                 self._initial_isr(replicas), leader)
                                 for i, (replicas, leader) in enumerate(placement)])

    # ---- configs ---------------------------------------------------------------------------

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None],
                                  validate_only: bool) -> None:
        """A None value deletes the topic's own setting (back to the broker default)."""
        async with self._lock:
            if name not in self.image.topics:
                raise ControllerError(Err.UNKNOWN_TOPIC_OR_PARTITION,
                                      f"The topic '{name}' does not exist.")
            check_topic_configs(changes, self._tiered_context(name))
            if validate_only or not changes:
                return
            await self._propose([ConfigRecord(TOPIC_RESOURCE, name, k, v)
                                 for k, v in changes.items()])

    async def alter_broker_configs(self, changes: dict[str, str | None], validate_only: bool,
                                   node: str = "") -> None:
        """Dynamic broker settings (the log.* synonyms of topic configs): the cluster-wide default
        (node "") or one broker's own (node = its id, which must be registered)."""
        async with self._lock:
            if node != "":
                try:
                    node_id = int(node)
                except ValueError:
                    raise ControllerError(Err.INVALID_REQUEST,
                                          f"Invalid broker name {node}") from None
                if node_id not in self.image.brokers:
                    raise ControllerError(Err.BROKER_ID_NOT_REGISTERED,
                                          f"No broker with id {node_id} found.")
                node = str(node_id)
            check_dynamic_broker_configs(changes)
            if validate_only or not changes:
                return
            await self._propose([ConfigRecord(BROKER_RESOURCE, node, k, v)
                                 for k, v in changes.items()])

    # ---- ACLs (issue 17): samsa.security.acl_control builds the records from the image --------
    async def propose_built(self, build: Callable[[MetadataImage], tuple[list[Record], _R]]) -> _R:
        """Records `build` derives from the committed image, proposed under the controller lock
        (so two ACL changes never decide on the same image); returns build's answer."""
        async with self._lock:
            records, answer = build(self.image)
            if records:
                await self._propose(records)
            return answer
    # ---- client quotas (helper "quotas") ---------------------------------------------------

    async def alter_client_quotas(self, entries: Sequence[tuple[Any, Any]], validate_only: bool
                                  ) -> list[tuple[int, str | None]]:
        """AlterClientQuotas: each entry (entity pairs, (key, value, remove) ops) checked on its
        own; the valid ones' records committed together. (error code, message) per entry."""
        from samsa.security.quotas import QuotaError, alter_records, check_entity

        results: list[tuple[int, str | None]] = []
        records: list[Any] = []
        async with self._lock:
            for entity, ops in entries:
                try:
                    recs = alter_records(check_entity(entity), ops)
                except QuotaError as e:
                    results.append((e.code, str(e)))
                    continue
                results.append((0, None))
                records += recs
            if records and not validate_only:
                await self._propose(records)
        return results
    # ---- SASL/SCRAM credentials (KIP-554; helper sasl) ----------------------------------
    async def alter_user_scram_credentials(
            self, plan: Callable[[MetadataImage], tuple[Any, list[Any]]]) -> Any:
        """`plan` checks the changes against the current image and returns (its answer, the
        records to commit); run under the controller lock so two requests cannot interleave."""
        async with self._lock:
            answer, records = plan(self.image)
            if records:
                await self._propose(records)
            return answer

    # ---- producer ids ----------------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """The next block of producer ids for a broker: (first id, block length)."""
        async with self._lock:
            self._check_broker_epoch(broker_id, broker_epoch)
            first = self.image.next_producer_id
            if first > _MAX_PRODUCER_ID - PRODUCER_ID_BLOCK:
                raise ControllerError(Err.UNKNOWN_SERVER_ERROR,
                                      "Exhausted all producer ids: the next block would pass "
                                      "the largest 64-bit producer id.")
            await self._propose([ProducerIdsRecord(broker_id, broker_epoch,
                                                   first + PRODUCER_ID_BLOCK)])
            return first, PRODUCER_ID_BLOCK

    # ---- partitions: ISR changes (AlterPartition) --------------------------------------------

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: uuid.UUID,
                              partition: int, leader_epoch: int,
                              new_isr: Sequence[tuple[int, int]], leader_recovery_state: int,
                              partition_epoch: int) -> tuple[int, PartitionState | None]:
        """A partition leader's new ISR (Kafka's AlterPartition for one partition): the error
        code, and the partition as it now is when the change was accepted."""
        change = IsrChange(topic_id, partition, leader_epoch, tuple(new_isr),
                           leader_recovery_state, partition_epoch)
        code, results = await self.alter_partitions(broker_id, broker_epoch, [change])
        return (code, None) if code else results[0]

    async def alter_partitions(self, broker_id: int, broker_epoch: int,
                               changes: Sequence[IsrChange]
                               ) -> tuple[int, list[tuple[int, PartitionState | None]]]:
        """AlterPartition: (top-level error, one (error, new state) per change). Each change is
        checked as Kafka's controller checks it; the accepted ones are written in one batch. A
        change that completes a reassignment and moves the leader away from the sender answers
        NEW_LEADER_ELECTED (the record is written all the same)."""
        async with self._lock:
            try:
                self._check_broker_epoch(broker_id, broker_epoch)
            except ControllerError as e:
                return e.code, []
            records: list[Record] = []
            results: list[tuple[int, PartitionState | None]] = []
            pending: dict[tuple[uuid.UUID, int], PartitionState] = {}
            for ch in changes:
                t = self.image.by_id.get(ch.topic_id)
                if t is None:
                    results.append((Err.UNKNOWN_TOPIC_ID, None))
                    continue
                key = (ch.topic_id, ch.partition)
                ps = pending.get(key) or t.partitions.get(ch.partition)
                if ps is None:
                    results.append((Err.UNKNOWN_TOPIC_OR_PARTITION, None))
                    continue
                code = self._check_isr_change(broker_id, ps, ch)
                if code:
                    log.info("AlterPartition from broker %d for %s-%d refused: %s", broker_id,
                             t.name, ch.partition, Err.name_of(code))
                    results.append((code, None))
                    continue
                rec, _ = build_change(
                    ps, t.topic_id, ch.partition, self._acceptable_leader(),
                    isr=[b for b, _ in ch.new_isr], recovery=ch.leader_recovery_state,
                    election=Election.UNCLEAN if self._unclean_enabled(t.name)
                    else Election.ONLINE)
                if rec is not None:
                    records.append(rec)
                    ps = pending[key] = merged(ps, rec)
                    if rec.leader not in (NO_LEADER_CHANGE, broker_id):
                        log.info("AlterPartition from broker %d completed the reassignment of "
                                 "%s-%d and moved its leader to %d", broker_id, t.name,
                                 ch.partition, rec.leader)
                        results.append((Err.NEW_LEADER_ELECTED, None))
                        continue
                results.append((Err.NONE, dataclasses.replace(ps)))
            if records:
                await self._propose(records)
            return Err.NONE, results

    def _check_isr_change(self, broker_id: int, ps: PartitionState, ch: IsrChange) -> int:
        """Kafka's validateAlterPartitionData, in its order."""
        if ch.leader_epoch > ps.leader_epoch or ch.partition_epoch > ps.partition_epoch:
            return Err.NOT_CONTROLLER  # the sender has seen more: this controller is stale
        if ch.leader_epoch < ps.leader_epoch:
            return Err.FENCED_LEADER_EPOCH
        if broker_id != ps.leader:
            return Err.INVALID_REQUEST
        if ch.partition_epoch < ps.partition_epoch:
            return Err.INVALID_UPDATE_VERSION
        ids = [b for b, _ in ch.new_isr]
        if len(set(ids)) != len(ids) or not set(ids) <= set(ps.replicas):
            return Err.INVALID_REQUEST
        if ps.leader not in ids:
            return Err.INVALID_REQUEST  # the ISR always holds its leader
        if ch.leader_recovery_state not in (RECOVERED, RECOVERING):
            return Err.INVALID_REQUEST
        if ch.leader_recovery_state == RECOVERING and len(ids) > 1:
            return Err.INVALID_REQUEST
        if ps.leader_recovery_state == RECOVERED and ch.leader_recovery_state == RECOVERING:
            return Err.INVALID_REQUEST
        for b, epoch in ch.new_isr:
            reg = self.image.brokers.get(b)
            if (reg is None or reg.fenced or reg.in_controlled_shutdown
                    or (epoch != -1 and epoch != reg.broker_epoch)):
                return Err.INELIGIBLE_REPLICA
        return Err.NONE

    # ---- partitions: elections and reassignments --------------------------------------------

    async def elect_leaders(self, election_type: int,
                            partitions: Sequence[tuple[str, Sequence[int]]] | None
                            ) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
        """ElectLeaders (0 preferred, 1 unclean): per topic, (partition, error, message); None
        means every partition. INVALID_REQUEST (raised) for another election type."""
        async with self._lock:
            records, results = elect_leaders(self.image, election_type, partitions,
                                             self._acceptable_leader())
            if records:
                await self._propose(list(records))
            return results

    async def alter_reassignments(self, requests: Sequence[tuple[str, int, Sequence[int] | None]]
                                  ) -> list[tuple[int, str | None]]:
        """AlterPartitionReassignments: (topic, partition, target replicas, or None to cancel)
        each; one (error, message) per entry, all accepted changes written in one batch."""
        async with self._lock:
            records, results = alter_reassignments(self.image, requests,
                                                   self._acceptable_leader(),
                                                   self._unclean_enabled)
            if records:
                await self._propose(list(records))
            return results

    def list_reassignments(self, topics: Sequence[tuple[str, Sequence[int]]] | None
                           ) -> list[tuple[str, list[Reassigning]]]:
        """ListPartitionReassignments, from the committed image."""
        return list_reassignments(self.image, topics)

    # ---- brokers ---------------------------------------------------------------------------

    async def register_broker(self, broker_id: int, incarnation_id: uuid.UUID, cluster_id: str,
                              endpoints: Sequence[BrokerEndpoint], rack: str | None,
                              features: Sequence[BrokerFeature]) -> int:
        """Register (or re-register) a broker, fenced until it has caught up with the metadata
        log; returns its new broker epoch. A new incarnation of a broker that led partitions
        leaves them offline until it is unfenced again."""
        async with self._lock:
            expected = self.image.cluster_id or self.config.get("cluster.id") or ""
            if expected and cluster_id != expected:
                raise ControllerError(Err.INCONSISTENT_CLUSTER_ID,
                                      f"Expected cluster ID {expected}, but got cluster ID "
                                      f"{cluster_id}")
            now = self._clock()
            existing = self.image.brokers.get(broker_id)
            if (existing is not None and existing.incarnation_id != incarnation_id
                    and self.sessions.alive(broker_id, now)):
                raise ControllerError(Err.DUPLICATE_BROKER_REGISTRATION,
                                      "Another broker is registered with that broker id.")
            for f in features:
                level = self.image.features.get(f.name)
                if level is not None and not (f.min_supported_version <= level
                                              <= f.max_supported_version):
                    raise ControllerError(Err.UNSUPPORTED_VERSION,
                                          f"Unable to register because the broker does not "
                                          f"support version {level} of {f.name}. It wants a "
                                          f"version between {f.min_supported_version} and "
                                          f"{f.max_supported_version}, inclusive.")
            epoch = max(self.image.offset + 1, self._last_epoch + 1,
                        existing.broker_epoch + 1 if existing is not None else 0)
            self._last_epoch = epoch
            records: list[Record] = [RegisterBrokerRecord(
                broker_id, incarnation_id, epoch, tuple(endpoints), tuple(features), rack,
                fenced=True, in_controlled_shutdown=False)]
            if existing is not None:
                records += self._leadership_away(broker_id)
            offset = await self._propose(records)
            self.sessions.touch(broker_id, now)
            self.sessions.registered(broker_id, offset)
            return epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool, want_shut_down: bool) -> HeartbeatReply:
        """Kafka's broker state machine: a fenced broker that has caught up is unfenced and leads
        its offline partitions again; `want_fence` fences; `want_shut_down` is a controlled
        shutdown: leadership moves away (nowhere to go while the ISR is the leader alone), then
        the broker is fenced and told it may shut down."""
        async with self._lock:
            try:
                reg = self._check_broker_epoch(broker_id, broker_epoch)
            except ControllerError as e:
                return HeartbeatReply(e.code, False, True, False, str(e))
            self.sessions.touch(broker_id, self._clock())
            caught_up = self.sessions.caught_up(broker_id, metadata_offset)
            records: list[Record] = []
            should_shut_down = False
            fenced = reg.fenced
            if reg.fenced:
                if want_shut_down or reg.in_controlled_shutdown:
                    # shutting down: it comes back only by registering again
                    should_shut_down = True
                elif not want_fence and caught_up:
                    records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch,
                                                                  fenced=_UNFENCE))
                    records += self._leadership_back(broker_id)
                    fenced = False
            elif want_fence:
                records += self._fence(reg)
                fenced = True
            elif want_shut_down or reg.in_controlled_shutdown:
                records += self._fence(reg, controlled_shutdown=True)
                fenced, should_shut_down = True, True
            if records:
                await self._propose(records)
            return HeartbeatReply(Err.NONE, caught_up, fenced, should_shut_down)

    async def tick(self) -> None:
        """Fence every unfenced broker not heard from for broker.session.timeout.ms; then, every
        UNCLEAN_CHECK_MS, unclean elections for offline partitions of topics that allow them,
        and every leader.imbalance.check.interval.seconds (with auto.leader.rebalance.enable)
        preferred elections where leadership is imbalanced."""
        async with self._lock:
            now = self._clock()
            for broker_id in sorted(self.image.brokers):
                reg = self.image.brokers.get(broker_id)
                if reg is not None and not reg.fenced and self.sessions.expired(broker_id, now):
                    await self._propose(self._fence(reg))
            if now >= self._next_unclean_check:
                self._next_unclean_check = now + UNCLEAN_CHECK_MS
                records: list[Record] = list(unclean_elections(
                    self.image, self._acceptable_leader(), self._unclean_enabled,
                    MAX_ELECTIONS_PER_CHECK))
                if records:
                    await self._propose(records)
            if now >= self._next_rebalance:
                self._next_rebalance = now + self._rebalance_interval_ms()
                if _config_bool(self.config, "auto.leader.rebalance.enable", True):
                    records = list(rebalance_elections(
                        self.image, self._acceptable_leader(),
                        _config_int(self.config, "leader.imbalance.per.broker.percentage", 10)))
                    if records:
                        log.info("Leader imbalance: %d preferred leader election(s)",
                                 len(records))
                        await self._propose(records)

    def _rebalance_interval_ms(self) -> int:
        return 1000 * _config_int(self.config, "leader.imbalance.check.interval.seconds", 300)

    # ---- helpers ---------------------------------------------------------------------------

    def _check_broker_epoch(self, broker_id: int, broker_epoch: int) -> BrokerRegistration:
        reg = self.image.brokers.get(broker_id)
        if reg is None:
            raise ControllerError(Err.STALE_BROKER_EPOCH,
                                  f"No broker registration found for broker {broker_id}")
        if reg.broker_epoch != broker_epoch:
            raise ControllerError(Err.STALE_BROKER_EPOCH,
                                  f"Expected broker epoch {reg.broker_epoch}, but got broker "
                                  f"epoch {broker_epoch}")
        return reg

    def _initial_isr(self, replicas: Sequence[int]) -> tuple[int, ...]:
        """A new partition's ISR: every replica on a usable broker (Kafka: the active replicas;
        all their logs are empty, so all are in sync)."""
        usable = set(self._usable_brokers())
        return tuple(b for b in replicas if b in usable)

    def _usable_brokers(self) -> list[int]:
        """Brokers new replicas may go to: unfenced and not shutting down."""
        return [b.broker_id for b in self.image.live_brokers() if not b.in_controlled_shutdown]

    def _auto_placement(self, partitions: int,
                        replication: int) -> list[tuple[tuple[int, ...], int]]:
        if replication < -1 or replication == 0:
            raise ControllerError(Err.INVALID_REPLICATION_FACTOR,
                                  "Replication factor must be larger than 0, or -1 to use the "
                                  "default value.")
        if partitions < -1 or partitions == 0:
            raise ControllerError(Err.INVALID_PARTITIONS,
                                  "Number of partitions was set to an invalid non-positive value.")
        if partitions == -1:
            partitions = self.config.get_int("num.partitions")
        if replication == -1:
            replication = self.config.get_int("default.replication.factor")
        if partitions > MAX_PARTITIONS_PER_REQUEST:
            raise ControllerError(Err.POLICY_VIOLATION, EXCESSIVE)
        usable = self._usable_brokers()
        if replication > len(usable):
            raise ControllerError(Err.INVALID_REPLICATION_FACTOR,
                                  f"Unable to replicate the partition {replication} time(s): "
                                  f"The target replication factor of {replication} cannot be "
                                  f"reached because only {len(usable)} broker(s) are "
                                  "registered.")
        start = self._rng.randrange(len(usable))
        shift = self._rng.randrange(len(usable))
        return [(r, r[0]) for r in place_replicas(usable, partitions, replication, start, shift)]

    def _manual_placement(self, assignments: Assignments, partitions: int,
                          replication: int) -> list[tuple[tuple[int, ...], int]]:
        """CreateTopics' manual assignment: numPartitions and replicationFactor must be -1."""
        if replication != -1:
            raise ControllerError(Err.INVALID_REQUEST,
                                  "A manual partition assignment was specified, but replication "
                                  "factor was not set to -1.")
        if partitions != -1:
            raise ControllerError(Err.INVALID_REQUEST,
                                  "A manual partition assignment was specified, but "
                                  "numPartitions was not set to -1.")
        if not assignments:
            raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                                  "The manual partition assignment is empty.")
        check_topic_assignments(assignments, frozenset(self.image.brokers))
        by_index = dict(assignments)
        return [(tuple(by_index[i]), self._manual_leader(by_index[i], i))
                for i in range(len(by_index))]

    def _manual_leader(self, broker_ids: Sequence[int], partition: int) -> int:
        usable = set(self._usable_brokers())
        for b in broker_ids:
            if b in usable:
                return b
        raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                              f"All brokers specified in the manual partition assignment for "
                              f"partition {partition} are fenced or in controlled shutdown.")

    def _check_budget(self, placement: list[tuple[tuple[int, ...], int]]) -> None:
        """POLICY_VIOLATION when a broker would host more than max.broker.partitions replicas."""
        adding: dict[int, int] = {}
        for replicas, _ in placement:
            for b in replicas:
                adding[b] = adding.get(b, 0) + 1
        have = self._replica_counts()
        cap = self.config.get_int("max.broker.partitions")
        for b in sorted(adding):
            check_broker_budget(have.get(b, 0), adding[b], cap, b)

    def _replica_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for t in self.image.topics.values():
            for ps in t.partitions.values():
                for b in ps.replicas:
                    counts[b] = counts.get(b, 0) + 1
        return counts

    def _new_topic_id(self) -> uuid.UUID:
        while True:
            tid = uuid.UUID(int=self._rng.getrandbits(128), version=4)
            if tid.int != 0 and tid not in self.image.by_id:
                return tid

    def _fence(self, reg: BrokerRegistration,
               controlled_shutdown: bool = False) -> list[Record]:
        """Records fencing a broker: its registration change, then its leaderships moved away."""
        change = BrokerRegistrationChangeRecord(
            reg.broker_id, reg.broker_epoch, fenced=_FENCE,
            in_controlled_shutdown=_SHUTTING_DOWN if controlled_shutdown and
            not reg.in_controlled_shutdown else 0)
        return [change, *self._leadership_away(reg.broker_id)]

    def _leadership_away(self, broker_id: int) -> list[Record]:
        """Partition changes taking `broker_id` out of leadership and ISRs: a partition it leads
        goes to another usable ISR member in replica order, else offline (leader -1) with its ISR
        unchanged, so only a member of the ISR can lead it again; with
        unclean.leader.election.enable, to any usable replica instead (data may be lost)."""
        acceptable = self._acceptable_leader(exclude=broker_id)
        out: list[Record] = []
        for t in self.image.topics.values():
            unclean = None
            for pid, ps in sorted(t.partitions.items()):
                if broker_id not in ps.isr and ps.leader != broker_id:
                    continue
                if unclean is None:
                    unclean = self._unclean_enabled(t.name)
                rec, was_unclean = build_change(
                    ps, t.topic_id, pid, acceptable,
                    isr=[b for b in ps.isr if b != broker_id],
                    election=Election.UNCLEAN if unclean else Election.ONLINE)
                if rec is not None:
                    if was_unclean:
                        warn_unclean(t.name, pid, rec.leader, ps.isr)
                    out.append(rec)
        return out

    def _leadership_back(self, broker_id: int) -> list[Record]:
        """Offline partitions whose ISR holds `broker_id` get it back as leader (it is being
        unfenced in the same batch)."""
        acceptable = self._acceptable_leader(include=broker_id)
        out: list[Record] = []
        for t in self.image.topics.values():
            for pid, ps in sorted(t.partitions.items()):
                if ps.leader == NO_LEADER and broker_id in ps.isr:
                    rec, _ = build_change(ps, t.topic_id, pid, acceptable)
                    if rec is not None:
                        out.append(rec)
        return out

    def _acceptable_leader(self, exclude: int | None = None,
                           include: int | None = None) -> Callable[[int], bool]:
        """Kafka's leader acceptor: a broker may lead when it is unfenced and not shutting down
        (`exclude` is being fenced, `include` unfenced, in the batch being built)."""
        usable = set(self._usable_brokers())
        if exclude is not None:
            usable.discard(exclude)
        if include is not None:
            usable.add(include)
        return usable.__contains__

    def _unclean_enabled(self, topic: str) -> bool:
        """unclean.leader.election.enable: the topic's own, else the dynamic broker setting
        (this controller's node, then cluster-wide), else the static one."""
        name = "unclean.leader.election.enable"
        t = self.image.topics.get(topic)
        for layer in (t.configs if t is not None else {},
                      self.image.node_configs.get(self.config.node_id, {}),
                      self.image.cluster_configs):
            if name in layer:
                return layer[name].strip().lower() == "true"
        return self.config.get_bool(name)


def _config_bool(config: BrokerConfig, name: str, default: bool) -> bool:
    v = config.get(name)
    return default if v is None else v.strip().lower() == "true"


def _config_int(config: BrokerConfig, name: str, default: int) -> int:
    try:
        return config.get_int(name)
    except (ConfigError, ValueError):
        return default
