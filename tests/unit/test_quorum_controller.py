"""QuorumController without a quorum: `propose` applies the records to an in-memory image (with a
small apply written here, independent of the image module's), a fake clock drives sessions."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from typing import Any

import pytest

from samsa.cluster.controller import ControllerError, HeartbeatReply, QuorumController
from samsa.cluster.controller.placement import place_replicas
from samsa.cluster.controller.quorum import BOOTSTRAP_METADATA_VERSION
from samsa.cluster.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from samsa.cluster.metadata.records import (
    BROKER_RESOURCE,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from samsa.config import BrokerConfig
from samsa.protocol.errors import Err

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
SESSION_MS = 9000


def apply(image: MetadataImage, r: Record, offset: int) -> None:
    """Just enough of the image's apply for these tests (Kafka's semantics: a leader change bumps
    leader_epoch, any partition change bumps partition_epoch)."""
    image.offset = offset
    if isinstance(r, FeatureLevelRecord):
        image.features[r.name] = r.feature_level
    elif isinstance(r, TopicRecord):
        t = TopicImage(r.name, r.topic_id)
        image.topics[r.name] = image.by_id[r.topic_id] = t
    elif isinstance(r, PartitionRecord):
        image.by_id[r.topic_id].partitions[r.partition_id] = PartitionState(
            r.replicas, r.isr, r.leader, r.leader_epoch, r.partition_epoch)
    elif isinstance(r, PartitionChangeRecord):
        ps = image.by_id[r.topic_id].partitions[r.partition_id]
        if r.isr is not None:
            ps.isr = r.isr
        if r.leader != NO_LEADER_CHANGE:
            ps.leader = r.leader
            ps.leader_epoch += 1
        ps.partition_epoch += 1
    elif isinstance(r, RemoveTopicRecord):
        t = image.by_id.pop(r.topic_id)
        del image.topics[t.name]
    elif isinstance(r, ConfigRecord):
        if r.resource_type == TOPIC_RESOURCE:
            target = image.topics[r.resource_name].configs
        elif r.resource_name == "":
            target = image.cluster_configs
        else:
            target = image.node_configs.setdefault(int(r.resource_name), {})
        if r.value is None:
            target.pop(r.name, None)
        else:
            target[r.name] = r.value
    elif isinstance(r, RegisterBrokerRecord):
        image.brokers[r.broker_id] = BrokerRegistration(
            r.broker_id, r.incarnation_id, r.broker_epoch,
            {e.name: (e.host, e.port) for e in r.endpoints}, r.rack, r.fenced,
            r.in_controlled_shutdown)
    elif isinstance(r, BrokerRegistrationChangeRecord):
        b = image.brokers[r.broker_id]
        assert b.broker_epoch == r.broker_epoch
        if r.fenced:
            b.fenced = r.fenced == 1
        if r.in_controlled_shutdown:
            b.in_controlled_shutdown = True
    elif isinstance(r, ProducerIdsRecord):
        image.next_producer_id = r.next_producer_id
    else:
        raise AssertionError(f"unexpected record {r}")


class Harness:
    """A controller over an in-memory 'log': every proposal is appended, applied, committed."""

    def __init__(self, **config: str) -> None:
        self.now = 1_000_000
        self.image = MetadataImage(cluster_id=CLUSTER)
        self.log: list[Record] = []
        self.batches: list[list[Record]] = []
        values = {"broker.session.timeout.ms": str(SESSION_MS)}
        values.update({k.replace("_", "."): v for k, v in config.items()})
        self.ctl = QuorumController(BrokerConfig(values), self.image, self.propose,
                                    lambda: self.now, rng=random.Random(7))
        self.incarnations: dict[int, uuid.UUID] = {}
        self.epochs: dict[int, int] = {}

    async def propose(self, records: list[Record]) -> int:
        await asyncio.sleep(0)  # let other requests run, as a real commit would
        self.batches.append(list(records))
        for r in records:
            self.log.append(r)
            apply(self.image, r, len(self.log) - 1)
        return len(self.log) - 1

    async def register(self, broker_id: int, incarnation: uuid.UUID | None = None,
                       cluster_id: str = CLUSTER) -> int:
        inc = incarnation or self.incarnations.get(broker_id) or uuid.uuid4()
        epoch = await self.ctl.register_broker(
            broker_id, inc, cluster_id, [BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id)],
            None, [BrokerFeature("metadata.version", 1, 30)])
        self.incarnations[broker_id] = inc
        self.epochs[broker_id] = epoch
        return epoch

    async def beat(self, broker_id: int, *, offset: int | None = None, fence: bool = False,
                   shut_down: bool = False) -> HeartbeatReply:
        return await self.ctl.heartbeat(broker_id, self.epochs[broker_id],
                                        len(self.log) - 1 if offset is None else offset,
                                        fence, shut_down)

    async def start(self, brokers: int = 3) -> None:
        """Activate, register and unfence `brokers` brokers (ids 1..n)."""
        await self.ctl.activate()
        for b in range(1, brokers + 1):
            await self.register(b)
        for b in range(1, brokers + 1):
            reply = await self.beat(b)
            assert reply == HeartbeatReply(Err.NONE, True, False, False)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def started(brokers: int = 3, **config: str) -> Harness:
    h = Harness(**config)
    run(h.start(brokers))
    return h


def error_of(h: Harness, coro: Any) -> tuple[int, str]:
    n = len(h.log)
    with pytest.raises(ControllerError) as e:
        run(coro)
    assert len(h.log) == n, "a refused request wrote records"
    return e.value.code, str(e.value)


# ---- placement -------------------------------------------------------------------------------

def test_place_replicas_round_robin_leaders_shifted_followers() -> None:
    brokers = [1, 2, 3, 4]
    placement = place_replicas(brokers, 8, 3, start=1, shift=0)
    assert Counter(r[0] for r in placement) == {1: 2, 2: 2, 3: 2, 4: 2}
    assert [r[0] for r in placement[:4]] == [2, 3, 4, 1]
    assert all(len(set(r)) == 3 for r in placement)
    # after the round-robin wraps, the followers are shifted: partition 0 and 4 share a leader
    # but not the same followers
    assert placement[0][0] == placement[4][0] and placement[0][1:] != placement[4][1:]
    assert Counter(b for r in placement for b in r) == {1: 6, 2: 6, 3: 6, 4: 6}


def test_create_topic_spreads_partitions_over_three_brokers() -> None:
    h = started()
    tid = run(h.ctl.create_topic("spread", 6, 1, {}))
    t = h.image.topics["spread"]
    assert t.topic_id == tid and t.count == 6
    assert Counter(ps.leader for ps in t.partitions.values()) == {1: 2, 2: 2, 3: 2}
    for ps in t.partitions.values():
        assert ps.replicas == (ps.leader,) and ps.isr == (ps.leader,)
        assert ps.leader_epoch == 0 and ps.partition_epoch == 0
    run(h.ctl.create_topic("rf3", 3, 3, {"retention.ms": "1000", "cleanup.policy": None}))
    t3 = h.image.topics["rf3"]
    for ps in t3.partitions.values():
        assert sorted(ps.replicas) == [1, 2, 3]
        assert ps.leader == ps.replicas[0] and ps.isr == ps.replicas  # every replica in sync
    assert sorted(ps.leader for ps in t3.partitions.values()) == [1, 2, 3]
    assert t3.configs == {"retention.ms": "1000"}  # null configs write nothing
    batch = h.batches[-1]
    assert isinstance(batch[0], TopicRecord) and len(batch) == 1 + 3 + 1


def test_defaults_for_minus_one() -> None:
    h = started(num_partitions="4", default_replication_factor="2")
    run(h.ctl.create_topic("d", -1, -1, {}))
    t = h.image.topics["d"]
    assert t.count == 4 and all(len(ps.replicas) == 2 for ps in t.partitions.values())


def test_replication_factor_above_unfenced_brokers_refused() -> None:
    h = started()
    code, msg = error_of(h, h.ctl.create_topic("t", 1, 4, {}))
    assert code == Err.INVALID_REPLICATION_FACTOR
    assert msg == ("Unable to replicate the partition 4 time(s): The target replication factor "
                   "of 4 cannot be reached because only 3 broker(s) are registered.")
    run(h.beat(3, fence=True))
    code, msg = error_of(h, h.ctl.create_topic("t", 1, 3, {}))
    assert code == Err.INVALID_REPLICATION_FACTOR and "only 2 broker(s)" in msg
    run(h.ctl.create_topic("t", 4, 2, {}))
    assert all(3 not in ps.replicas for ps in h.image.topics["t"].partitions.values())


def test_validate_only_writes_nothing() -> None:
    h = started()
    n = len(h.log)
    tid = run(h.ctl.create_topic("v", 3, 2, {"retention.ms": "5"}, validate_only=True))
    assert isinstance(tid, uuid.UUID) and "v" not in h.image.topics
    run(h.ctl.create_topic("v", 1, 1, {}))
    n = len(h.log)
    run(h.ctl.create_partitions("v", 5, True))
    run(h.ctl.alter_topic_configs("v", {"retention.ms": "7"}, True))
    run(h.ctl.alter_broker_configs({"log.retention.ms": "7"}, True))
    assert len(h.log) == n and h.image.topics["v"].count == 1
    assert h.image.topics["v"].configs == {} and h.image.cluster_configs == {}


def test_concurrent_creates_are_serialised() -> None:
    h = started()

    async def both() -> tuple[Any, ...]:
        return await asyncio.gather(h.ctl.create_topic("same", 1, 1, {}),
                                    h.ctl.create_topic("same", 1, 1, {}),
                                    return_exceptions=True)

    results = run(both())
    errors = [r for r in results if isinstance(r, ControllerError)]
    assert len(errors) == 1 and errors[0].code == Err.TOPIC_ALREADY_EXISTS
    assert sum(isinstance(r, TopicRecord) for r in h.log) == 1


# ---- topic errors ----------------------------------------------------------------------------

def test_create_topic_error_paths() -> None:
    h = started(max_broker_partitions="10")
    run(h.ctl.create_topic("a.b", 3, 1, {}))
    cases = [
        (h.ctl.create_topic("bad name", 1, 1, {}), Err.INVALID_TOPIC_EXCEPTION, "illegal"),
        (h.ctl.create_topic("a.b", 1, 1, {}), Err.TOPIC_ALREADY_EXISTS,
         "Topic 'a.b' already exists."),
        (h.ctl.create_topic("a_b", 1, 1, {}), Err.INVALID_TOPIC_EXCEPTION,
         "Topic 'a_b' collides with existing topic: a.b"),
        (h.ctl.create_topic("c", 1, 1, {"no.such": "1"}), Err.INVALID_CONFIG, "no.such"),
        (h.ctl.create_topic("c", 1, 1, {"retention.ms": "x"}), Err.INVALID_CONFIG, ""),
        (h.ctl.create_topic("c", 1, 0, {}), Err.INVALID_REPLICATION_FACTOR, "larger than 0"),
        (h.ctl.create_topic("c", 0, 1, {}), Err.INVALID_PARTITIONS, "non-positive"),
        (h.ctl.create_topic("c", -5, 1, {}), Err.INVALID_PARTITIONS, "non-positive"),
        # 3 brokers x 10 = 30 slots, 3 used: 28 RF-1 partitions put some broker over 10
        (h.ctl.create_topic("c", 28, 1, {}), Err.POLICY_VIOLATION, "max.broker.partitions=10"),
        # refused before any placement work, however large
        (h.ctl.create_topic("c", 2**31 - 1, 1, {}), Err.POLICY_VIOLATION, "Excessively large"),
        (h.ctl.create_topic("c", 1, 2**31 - 1, {}), Err.INVALID_REPLICATION_FACTOR, "only 3"),
    ]
    for coro, code, text in cases:
        got, msg = error_of(h, coro)
        assert got == code, msg
        assert text in msg
    # internal topics are not held to the budget
    run(h.ctl.create_topic("__consumer_offsets", 50, 1, {}))
    assert h.image.topics["__consumer_offsets"].count == 50


def test_manual_assignment() -> None:
    h = started()
    run(h.ctl.create_topic("m", -1, -1, {}, assignments=[(0, [2, 1]), (1, [3, 2])]))
    t = h.image.topics["m"]
    assert t.partitions[0].replicas == (2, 1) and t.partitions[0].leader == 2
    assert t.partitions[1].isr == (3, 2)  # every live replica starts in sync
    cases = [
        (h.ctl.create_topic("x", 2, -1, {}, assignments=[(0, [1])]), Err.INVALID_REQUEST,
         "numPartitions was not set to -1"),
        (h.ctl.create_topic("x", -1, 1, {}, assignments=[(0, [1])]), Err.INVALID_REQUEST,
         "replication factor was not set to -1"),
        (h.ctl.create_topic("x", -1, -1, {}, assignments=[(0, [9])]),
         Err.INVALID_REPLICA_ASSIGNMENT, "broker 9, but no such broker is registered"),
        (h.ctl.create_topic("x", -1, -1, {}, assignments=[(0, [1, 1])]),
         Err.INVALID_REPLICA_ASSIGNMENT, "more than once"),
        (h.ctl.create_topic("x", -1, -1, {}, assignments=[(0, [1]), (2, [2])]),
         Err.INVALID_REPLICA_ASSIGNMENT, "consecutive"),
        (h.ctl.create_topic("x", -1, -1, {}, assignments=[(0, [1]), (1, [1, 2])]),
         Err.INVALID_REPLICA_ASSIGNMENT, "not consistent"),
        (h.ctl.create_topic("x", -1, -1, {}, assignments=[]),
         Err.INVALID_REPLICA_ASSIGNMENT, "empty"),
    ]
    for coro, code, text in cases:
        got, msg = error_of(h, coro)
        assert got == code and text in msg, msg
    run(h.beat(3, fence=True))
    got, msg = error_of(h, h.ctl.create_topic("x", -1, -1, {}, assignments=[(0, [3])]))
    assert got == Err.INVALID_REPLICA_ASSIGNMENT and "fenced" in msg
    run(h.ctl.create_topic("x", -1, -1, {}, assignments=[(0, [3, 1])]))
    assert h.image.topics["x"].partitions[0].leader == 1  # first usable replica leads


def test_delete_topic() -> None:
    h = started()
    tid = run(h.ctl.create_topic("gone", 2, 1, {}))
    assert run(h.ctl.delete_topic("gone")) == tid
    assert h.log[-1] == RemoveTopicRecord(tid) and "gone" not in h.image.topics
    code, msg = error_of(h, h.ctl.delete_topic("gone"))
    assert code == Err.UNKNOWN_TOPIC_OR_PARTITION
    h2 = started(delete_topic_enable="false")
    run(h2.ctl.create_topic("kept", 1, 1, {}))
    code, msg = error_of(h2, h2.ctl.delete_topic("kept"))
    assert (code, msg) == (Err.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")


def test_create_partitions() -> None:
    h = started(max_broker_partitions="6")
    run(h.ctl.create_topic("p", 2, 2, {}))
    run(h.ctl.create_partitions("p", 5, False))
    t = h.image.topics["p"]
    assert t.count == 5
    assert all(len(ps.replicas) == 2 and ps.isr == ps.replicas and ps.leader == ps.replicas[0]
               for ps in t.partitions.values())
    assert all(isinstance(r, PartitionRecord) for r in h.batches[-1])
    run(h.ctl.create_partitions("p", 6, False, [[3, 1]]))
    assert t.partitions[5].replicas == (3, 1) and t.partitions[5].leader == 3
    cases = [
        (h.ctl.create_partitions("nope", 2, False), Err.UNKNOWN_TOPIC_OR_PARTITION, ""),
        (h.ctl.create_partitions("p", 6, False), Err.INVALID_PARTITIONS,
         "Topic already has 6 partition(s)."),
        (h.ctl.create_partitions("p", 3, False), Err.INVALID_PARTITIONS,
         "3 would not be an increase"),
        (h.ctl.create_partitions("p", 8, False, [[1, 2]]), Err.INVALID_REPLICA_ASSIGNMENT,
         "add 2 additional partition(s), but only 1"),
        (h.ctl.create_partitions("p", 7, False, [[1]]), Err.INVALID_REPLICA_ASSIGNMENT,
         "not consistent with previous partitions, which have 2"),
        (h.ctl.create_partitions("p", 7, False, [[1, 7]]), Err.INVALID_REPLICA_ASSIGNMENT,
         "broker 7"),
        # 6 partitions x RF 2 = 12 replicas on 3 brokers: 4 each; 3 more each passes 6
        (h.ctl.create_partitions("p", 11, False), Err.POLICY_VIOLATION, "max.broker.partitions=6"),
        (h.ctl.create_partitions("p", 2**31 - 1, False), Err.POLICY_VIOLATION, "Excessively"),
    ]
    for coro, code, text in cases:
        got, msg = error_of(h, coro)
        assert got == code and text in msg, msg


# ---- configs ---------------------------------------------------------------------------------

def test_topic_configs() -> None:
    h = started()
    run(h.ctl.create_topic("c", 1, 1, {"retention.ms": "100"}))
    run(h.ctl.alter_topic_configs("c", {"retention.ms": None, "segment.ms": "60000"}, False))
    assert h.image.topics["c"].configs == {"segment.ms": "60000"}
    assert h.batches[-1] == [ConfigRecord(TOPIC_RESOURCE, "c", "retention.ms", None),
                             ConfigRecord(TOPIC_RESOURCE, "c", "segment.ms", "60000")]
    code, msg = error_of(h, h.ctl.alter_topic_configs("x", {"retention.ms": "1"}, False))
    assert (code, msg) == (Err.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'x' does not exist.")
    code, _ = error_of(h, h.ctl.alter_topic_configs("c", {"nope": "1"}, False))
    assert code == Err.INVALID_CONFIG


def test_broker_configs() -> None:
    h = started()
    run(h.ctl.alter_broker_configs({"log.retention.ms": "1000"}, False))
    run(h.ctl.alter_broker_configs({"log.segment.bytes": "1048576"}, False, node="2"))
    assert h.batches[-2] == [ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "1000")]
    assert h.batches[-1] == [ConfigRecord(BROKER_RESOURCE, "2", "log.segment.bytes", "1048576")]
    assert h.image.cluster_configs == {"log.retention.ms": "1000"}
    assert h.image.node_configs == {2: {"log.segment.bytes": "1048576"}}
    cases = [
        (h.ctl.alter_broker_configs({"num.io.threads": "4"}, False), Err.INVALID_CONFIG,
         "Cannot update broker config num.io.threads dynamically"),
        (h.ctl.alter_broker_configs({"log.retention.ms": "abc"}, False), Err.INVALID_CONFIG, ""),
        (h.ctl.alter_broker_configs({"log.retention.ms": "1"}, False, node="x"),
         Err.INVALID_REQUEST, "Invalid broker name x"),
        (h.ctl.alter_broker_configs({"log.retention.ms": "1"}, False, node="9"),
         Err.BROKER_ID_NOT_REGISTERED, "No broker with id 9 found."),
    ]
    for coro, code, text in cases:
        got, msg = error_of(h, coro)
        assert got == code and text in msg, msg


# ---- producer ids ----------------------------------------------------------------------------

def test_producer_id_blocks_are_unique() -> None:
    h = started()
    blocks = [run(h.ctl.allocate_producer_ids(b, h.epochs[b])) for b in (1, 2, 3, 1)]
    assert blocks == [(0, 1000), (1000, 1000), (2000, 1000), (3000, 1000)]
    assert h.log[-1] == ProducerIdsRecord(1, h.epochs[1], 4000)
    code, msg = error_of(h, h.ctl.allocate_producer_ids(1, h.epochs[1] + 1))
    assert code == Err.STALE_BROKER_EPOCH
    assert msg == f"Expected broker epoch {h.epochs[1]}, but got broker epoch {h.epochs[1] + 1}"
    code, msg = error_of(h, h.ctl.allocate_producer_ids(8, 0))
    assert (code, msg) == (Err.STALE_BROKER_EPOCH, "No broker registration found for broker 8")


# ---- registration, heartbeats, fencing -------------------------------------------------------

def test_session_timeout_defaults_to_kafkas() -> None:
    ctl = QuorumController(BrokerConfig(), MetadataImage(), Harness().propose, lambda: 0)
    assert ctl.sessions.timeout_ms == 9000


def test_activate_bootstraps_once() -> None:
    h = Harness()
    run(h.ctl.activate())
    assert h.log == [FeatureLevelRecord("metadata.version", BOOTSTRAP_METADATA_VERSION)]
    run(h.ctl.activate())
    assert len(h.log) == 1


def test_cluster_id_mismatch() -> None:
    h = started()
    code, msg = error_of(h, h.register(4, cluster_id="other"))
    assert code == Err.INCONSISTENT_CLUSTER_ID
    assert msg == f"Expected cluster ID {CLUSTER}, but got cluster ID other"
    assert 4 not in h.image.brokers


def test_unsupported_metadata_version_refused() -> None:
    h = started()
    with pytest.raises(ControllerError) as e:
        run(h.ctl.register_broker(5, uuid.uuid4(), CLUSTER, [], None,
                                  [BrokerFeature("metadata.version", 20, 21)]))
    assert e.value.code == Err.UNSUPPORTED_VERSION
    assert f"does not support version {BOOTSTRAP_METADATA_VERSION} of metadata.version" in str(
        e.value)


def test_duplicate_registration() -> None:
    h = started()
    old_epoch = h.epochs[2]
    code, msg = error_of(h, h.register(2, incarnation=uuid.uuid4()))
    assert (code, msg) == (Err.DUPLICATE_BROKER_REGISTRATION,
                           "Another broker is registered with that broker id.")
    # the same incarnation registering again (a retry) is fine and gets a new epoch
    assert run(h.register(2)) > old_epoch
    # once the old session expired, a new incarnation may take the id
    h.now += SESSION_MS
    epoch = run(h.register(2, incarnation=uuid.uuid4()))
    assert epoch > old_epoch and h.image.brokers[2].broker_epoch == epoch
    assert h.image.brokers[2].fenced


def test_broker_epochs_increase() -> None:
    h = started()
    epochs = [h.epochs[b] for b in (1, 2, 3)]
    assert epochs == sorted(set(epochs))
    assert all(h.epochs[b] <= h.log.index(next(
        r for r in reversed(h.log) if isinstance(r, RegisterBrokerRecord) and r.broker_id == b))
        for b in (1, 2, 3))


def test_heartbeat_errors() -> None:
    h = started()
    reply = run(h.ctl.heartbeat(2, h.epochs[2] - 1, 0, False, False))
    assert reply.error == Err.STALE_BROKER_EPOCH and reply.is_fenced
    assert reply.error_message == (f"Expected broker epoch {h.epochs[2]}, but got broker epoch "
                                   f"{h.epochs[2] - 1}")
    reply = run(h.ctl.heartbeat(9, 0, 0, False, False))
    assert reply.error == Err.STALE_BROKER_EPOCH
    assert reply.error_message == "No broker registration found for broker 9"


def test_fenced_until_caught_up() -> None:
    h = Harness()
    run(h.ctl.activate())
    run(h.register(1))
    reg_offset = len(h.log) - 1
    reply = run(h.beat(1, offset=reg_offset - 1))
    assert reply == HeartbeatReply(Err.NONE, False, True, False)
    assert h.image.brokers[1].fenced
    reply = run(h.beat(1, offset=reg_offset))
    assert reply == HeartbeatReply(Err.NONE, True, False, False)
    assert not h.image.brokers[1].fenced
    assert h.log[-1] == BrokerRegistrationChangeRecord(1, h.epochs[1], fenced=-1)


def test_session_timeout_fences_and_catch_up_restores_leaders() -> None:
    h = started()
    run(h.ctl.create_topic("t", 6, 1, {}))
    t = h.image.topics["t"]
    led_by_2 = sorted(p for p, ps in t.partitions.items() if ps.leader == 2)
    assert led_by_2
    h.now += SESSION_MS - 1
    run(h.beat(1))
    run(h.beat(3))
    run(h.ctl.tick())
    assert not h.image.brokers[2].fenced  # not yet: one ms short of the session timeout
    h.now += 1
    run(h.ctl.tick())
    assert h.image.brokers[2].fenced and not h.image.brokers[1].fenced
    assert not h.image.brokers[3].fenced
    for p in led_by_2:
        ps = t.partitions[p]
        assert ps.leader == -1 and ps.isr == (2,) and ps.leader_epoch == 1
    assert 2 not in [b.broker_id for b in h.image.live_brokers()]
    n = len(h.log)
    run(h.ctl.tick())
    assert len(h.log) == n  # fencing is done once
    # the broker comes back: behind the log it stays fenced, caught up it leads again
    reply = run(h.beat(2, offset=-1))
    assert reply.is_fenced and not reply.is_caught_up
    reply = run(h.beat(2))
    assert reply == HeartbeatReply(Err.NONE, True, False, False)
    for p in led_by_2:
        ps = t.partitions[p]
        assert ps.leader == 2 and ps.isr == (2,) and ps.leader_epoch == 2
    assert all(ps.leader != -1 for ps in t.partitions.values())


def test_restarted_broker_new_incarnation_leads_again_after_catch_up() -> None:
    h = started()
    run(h.ctl.create_topic("t", 3, 1, {}))
    t = h.image.topics["t"]
    led = [p for p, ps in t.partitions.items() if ps.leader == 1]
    h.now += SESSION_MS  # the old process died silently; no tick ran yet
    run(h.register(1, incarnation=uuid.uuid4()))
    assert h.image.brokers[1].fenced
    assert all(t.partitions[p].leader == -1 for p in led)
    assert not run(h.beat(1)).is_fenced
    assert all(t.partitions[p].leader == 1 for p in led)


def test_want_fence_and_controlled_shutdown() -> None:
    h = started()
    run(h.ctl.create_topic("t", 3, 1, {}))
    t = h.image.topics["t"]
    reply = run(h.beat(1, fence=True))
    assert reply == HeartbeatReply(Err.NONE, True, True, False)
    assert all(ps.leader != 1 for ps in t.partitions.values())
    led = [p for p, ps in t.partitions.items() if ps.leader == 3]
    reply = run(h.beat(3, shut_down=True))
    assert reply == HeartbeatReply(Err.NONE, True, True, True)
    b3 = h.image.brokers[3]
    assert b3.fenced and b3.in_controlled_shutdown
    assert all(t.partitions[p].leader == -1 and t.partitions[p].isr == (3,) for p in led)
    # a fenced broker asking to shut down may do so at once
    assert run(h.beat(1, shut_down=True)) == HeartbeatReply(Err.NONE, True, True, True)
    # a broker that shut down stays fenced until it registers again
    assert run(h.beat(3)) == HeartbeatReply(Err.NONE, True, True, True)
    assert h.image.brokers[3].fenced
    h.now += SESSION_MS
    run(h.register(3, incarnation=uuid.uuid4()))
    assert run(h.beat(3)) == HeartbeatReply(Err.NONE, True, False, False)
    assert all(t.partitions[p].leader == 3 for p in led)


def test_leadership_moves_to_another_isr_member() -> None:
    """Forward-looking (issue 14): with a larger ISR a fenced leader's partition stays online."""
    h = started()
    run(h.ctl.create_topic("t", -1, -1, {}, assignments=[(0, [1, 2, 3])]))
    tid = h.image.topics["t"].topic_id
    run(h.propose([PartitionChangeRecord(0, tid, isr=(1, 2, 3))]))
    run(h.beat(1, fence=True))
    ps = h.image.topics["t"].partitions[0]
    assert ps.leader == 2 and ps.isr == (2, 3)


def test_activation_gives_fresh_sessions() -> None:
    h = started()
    h.now += SESSION_MS * 5
    # a new controller becomes active: it gives every broker a full session
    ctl = QuorumController(BrokerConfig({"broker.session.timeout.ms": str(SESSION_MS)}),
                           h.image, h.propose, lambda: h.now)
    run(ctl.activate())
    n = len(h.log)
    assert n == len(h.log)
    run(ctl.tick())
    assert len(h.log) == n and not any(b.fenced for b in h.image.brokers.values())
    h.now += SESSION_MS
    run(ctl.tick())
    assert all(b.fenced for b in h.image.brokers.values())


def test_topic_name_validation_exported() -> None:
    from samsa.cluster.controller import validate_topic_name

    with pytest.raises(ControllerError):
        validate_topic_name("..")
