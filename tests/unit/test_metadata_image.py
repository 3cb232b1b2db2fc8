"""The metadata image: what each record does to it, records naming unknown brokers or topics
ignored, and `to_records` (a snapshot's content) rebuilding an equal image."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.cluster.metadata.image import MetadataImage, PartitionState
from samsa.cluster.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode,
    encode,
)
from samsa.cluster.metadata.snapshot import decode_snapshot, encode_snapshot

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
INC = uuid.UUID(int=99)


def reg(broker_id: int, epoch: int, fenced: bool = True) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(broker_id, INC, epoch,
                                (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id, 0),
                                 BrokerEndpoint("CONTROLLER", "127.0.0.1", 9190 + broker_id, 0)),
                                (BrokerFeature("metadata.version", 1, 21),), "r1", fenced)


def image_of(*recs: Record) -> MetadataImage:
    img = MetadataImage()
    for i, r in enumerate(recs):
        img.apply(r, i)
    return img


def test_register_fence_unfence_with_epochs() -> None:
    img = image_of(reg(1, 10), reg(2, 11, fenced=False))
    b1 = img.brokers[1]
    assert b1.endpoints == {"PLAINTEXT": ("127.0.0.1", 9091), "CONTROLLER": ("127.0.0.1", 9191)}
    assert b1.fenced and b1.rack == "r1" and b1.broker_epoch == 10
    assert [b.broker_id for b in img.live_brokers()] == [2]
    img.apply(UnfenceBrokerRecord(1, 9), 2)  # stale epoch: ignored
    assert img.brokers[1].fenced
    img.apply(UnfenceBrokerRecord(1, 10), 3)
    assert [b.broker_id for b in img.live_brokers()] == [1, 2]
    img.apply(FenceBrokerRecord(2, 11), 4)
    assert img.brokers[2].fenced and img.offset == 4
    img.apply(BrokerRegistrationChangeRecord(2, 11, fenced=-1, in_controlled_shutdown=1), 5)
    assert not img.brokers[2].fenced and img.brokers[2].in_controlled_shutdown
    img.apply(BrokerRegistrationChangeRecord(2, 10, fenced=1), 6)  # stale epoch
    assert not img.brokers[2].fenced
    img.apply(reg(2, 12), 7)  # re-registration replaces the old one (fenced, new epoch)
    assert img.brokers[2].broker_epoch == 12 and img.brokers[2].fenced
    assert not img.brokers[2].in_controlled_shutdown
    img.apply(UnregisterBrokerRecord(2, 12), 8)
    assert 2 not in img.brokers


def test_unknown_brokers_and_topics_are_ignored() -> None:
    img = image_of(TopicRecord("a", T1))
    before = image_of(TopicRecord("a", T1))
    for r in (FenceBrokerRecord(7, 1), UnfenceBrokerRecord(7, 1), UnregisterBrokerRecord(7, 1),
              BrokerRegistrationChangeRecord(7, 1, fenced=1),
              PartitionRecord(0, T2, (1,), (1,), 1),
              PartitionChangeRecord(0, T2, leader=1), PartitionChangeRecord(5, T1, leader=1),
              RemoveTopicRecord(T2), ConfigRecord(TOPIC_RESOURCE, "nope", "retention.ms", "1"),
              ConfigRecord(BROKER_RESOURCE, "x1", "log.retention.ms", "1"),
              ConfigRecord(BROKER_RESOURCE, " 1", "log.retention.ms", "1"),
              ConfigRecord(8, "kafka.server", "DEBUG", "x"), NoOpRecord()):
        img.apply(r)
    assert img == before


def test_topics_partitions_and_changes() -> None:
    img = image_of(TopicRecord("a", T1),
                   PartitionRecord(0, T1, (1, 2), (1, 2), 1, 0, 0),
                   PartitionRecord(1, T1, (2, 1), (2, 1), 2, 0, 0),
                   ConfigRecord(TOPIC_RESOURCE, "a", "retention.ms", "100"))
    t = img.topics["a"]
    assert img.by_id[T1] is t and t.count == 2 and t.configs == {"retention.ms": "100"}
    img.apply(PartitionChangeRecord(0, T1, isr=(1,)))
    assert t.partitions[0] == PartitionState((1, 2), (1,), 1, 0, 1)
    img.apply(PartitionChangeRecord(0, T1, leader=-1))  # offline: a leader change bumps the epoch
    assert t.partitions[0] == PartitionState((1, 2), (1,), -1, 1, 2)
    img.apply(PartitionChangeRecord(0, T1, leader=1, isr=(1, 2)))
    assert t.partitions[0] == PartitionState((1, 2), (1, 2), 1, 2, 3)
    d1, d2 = uuid.UUID(int=11), uuid.UUID(int=12)
    img.apply(PartitionChangeRecord(1, T1, directories=(d2, d1)))
    img.apply(PartitionChangeRecord(1, T1, replicas=(1, 3)))  # 1 keeps its dir, 3 has none yet
    assert t.partitions[1].directories == (d1, uuid.UUID(int=0))
    assert t.partitions[1].partition_epoch == 2 and t.partitions[1].leader_epoch == 0
    img.apply(ConfigRecord(TOPIC_RESOURCE, "a", "retention.ms", None))
    assert t.configs == {}
    img.apply(RemoveTopicRecord(T1))
    assert img.topics == {} and img.by_id == {}
    img.apply(TopicRecord("a", T2))  # a new topic of the same name: nothing of the old one
    assert img.topics["a"].topic_id == T2 and img.topics["a"].partitions == {}


def test_configs_features_and_producer_ids() -> None:
    img = image_of(ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "1000"),
                   ConfigRecord(BROKER_RESOURCE, "", "log.segment.bytes", "2048"),
                   ConfigRecord(BROKER_RESOURCE, "1", "log.retention.ms", "5"),
                   ConfigRecord(BROKER_RESOURCE, "2", "log.cleanup.policy", "compact"),
                   FeatureLevelRecord("metadata.version", 21), FeatureLevelRecord("x", 2),
                   ProducerIdsRecord(1, 3, 2000))
    assert img.cluster_configs == {"log.retention.ms": "1000", "log.segment.bytes": "2048"}
    assert img.node_configs == {1: {"log.retention.ms": "5"}, 2: {"log.cleanup.policy": "compact"}}
    assert img.features == {"metadata.version": 21, "x": 2}
    assert img.next_producer_id == 2000
    # the node's own over the cluster-wide, in topic config names
    assert img.broker_configs_for_topics(1) == {"retention.ms": "5", "segment.bytes": "2048"}
    assert img.broker_configs_for_topics(2) == {"retention.ms": "1000", "segment.bytes": "2048",
                                                "cleanup.policy": "compact"}
    assert img.broker_configs_for_topics(3) == {"retention.ms": "1000", "segment.bytes": "2048"}
    img.apply(ConfigRecord(BROKER_RESOURCE, "2", "log.cleanup.policy", None))
    img.apply(FeatureLevelRecord("x", 0))
    assert img.node_configs == {1: {"log.retention.ms": "5"}} and img.features == {
        "metadata.version": 21}


# ------------------------------------------------------------------ to_records round trip
@st.composite
def operations(draw: st.DrawFn) -> list[Record]:
    """A random, mostly plausible history: brokers come and go, topics are created with their
    partitions, changed, configured and removed; some records name things that do not exist."""
    recs: list[Record] = []
    epochs: dict[int, int] = {}
    topics: dict[uuid.UUID, tuple[str, int]] = {}
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.integers(0, 11))
        bid = draw(st.integers(0, 4))
        if kind == 0:
            epochs[bid] = epochs.get(bid, 0) + draw(st.integers(1, 3))
            recs.append(RegisterBrokerRecord(
                bid, uuid.UUID(int=draw(st.integers(0, 3))), epochs[bid],
                tuple(BrokerEndpoint(n, "h", draw(st.integers(1, 65535)), draw(st.integers(0, 3)))
                      for n in draw(st.lists(st.sampled_from(["PLAINTEXT", "CONTROLLER", "SSL"]),
                                             unique=True, max_size=3))),
                (BrokerFeature("metadata.version", 1, draw(st.integers(1, 25))),),
                draw(st.none() | st.sampled_from(["r1", "r2"])), draw(st.booleans()),
                draw(st.booleans()),
                log_dirs=tuple(draw(st.lists(st.uuids(), max_size=2)))))
        elif kind == 1:
            e = epochs.get(bid, 0) - draw(st.integers(0, 1))
            which = draw(st.integers(0, 2))
            recs.append(FenceBrokerRecord(bid, e) if which == 0 else UnfenceBrokerRecord(bid, e)
                        if which == 1 else UnregisterBrokerRecord(bid, e))
        elif kind == 2:
            recs.append(BrokerRegistrationChangeRecord(
                bid, epochs.get(bid, 0), draw(st.sampled_from([-1, 0, 1])),
                draw(st.sampled_from([0, 1])), tuple(draw(st.lists(st.uuids(), max_size=1)))))
        elif kind in (3, 4):
            tid = uuid.UUID(int=draw(st.integers(1, 1 << 64)))
            name = draw(st.sampled_from(["a", "b", "c", "__consumer_offsets"]))
            n = draw(st.integers(0, 3))
            topics[tid] = (name, n)
            recs.append(TopicRecord(name, tid))
            for p in range(n):
                reps = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3,
                                           unique=True)))
                recs.append(PartitionRecord(
                    p, tid, reps, reps[:1], reps[0], draw(st.integers(0, 5)),
                    draw(st.integers(0, 5)), leader_recovery_state=draw(st.sampled_from([0, 1])),
                    directories=tuple(draw(st.lists(st.uuids(), max_size=len(reps))))))
        elif kind == 5 and topics:
            tid = draw(st.sampled_from(sorted(topics)))
            recs.append(PartitionChangeRecord(
                draw(st.integers(0, 3)), tid,
                isr=draw(st.none() | st.lists(st.integers(0, 4), max_size=3).map(tuple)),
                leader=draw(st.sampled_from([-2, -1, 0, 1, 2])),
                replicas=draw(st.none() | st.lists(st.integers(0, 4), max_size=3).map(tuple)),
                adding_replicas=draw(st.none() | st.just((3,))),
                removing_replicas=draw(st.none() | st.just((1,))),
                leader_recovery_state=draw(st.sampled_from([-1, 0, 1])),
                directories=draw(st.none() | st.lists(st.uuids(), max_size=2).map(tuple))))
        elif kind == 6 and topics:
            recs.append(RemoveTopicRecord(draw(st.sampled_from(sorted(topics)))))
        elif kind in (7, 8):
            target = draw(st.sampled_from([(TOPIC_RESOURCE, "a"), (TOPIC_RESOURCE, "b"),
                                           (BROKER_RESOURCE, ""), (BROKER_RESOURCE, "1"),
                                           (BROKER_RESOURCE, "2")]))
            recs.append(ConfigRecord(target[0], target[1],
                                     draw(st.sampled_from(["retention.ms", "log.retention.ms",
                                                           "cleanup.policy"])),
                                     draw(st.none() | st.sampled_from(["1", "2", "compact"]))))
        elif kind == 9:
            recs.append(FeatureLevelRecord(draw(st.sampled_from(["metadata.version", "kraft.version",
                                                                 "group.version"])),
                                           draw(st.integers(0, 3))))
        elif kind == 10:
            recs.append(ProducerIdsRecord(bid, epochs.get(bid, 0), draw(st.integers(0, 10_000))))
        else:
            recs.append(NoOpRecord())
    return recs


@settings(max_examples=300, deadline=None)
@given(operations())
def test_to_records_rebuilds_an_equal_image(recs: list[Record]) -> None:
    img = MetadataImage(cluster_id="c1")
    for i, r in enumerate(recs):
        img.apply(decode(encode(r)), i)
    snap = img.to_records()
    again = MetadataImage(cluster_id="c1")
    for r in snap:
        again.apply(r)
    again.offset = img.offset
    assert again == img
    assert all(again.by_id[t.topic_id] is t for t in again.topics.values())
    # the snapshot bytes carry exactly these records
    assert decode_snapshot(encode_snapshot(img)) == snap
    if img.features.get("metadata.version"):
        assert snap[0] == FeatureLevelRecord("metadata.version", img.features["metadata.version"])


def test_snapshot_bytes_reject_damage() -> None:
    assert decode_snapshot(encode_snapshot(MetadataImage())) == []
    img = image_of(FeatureLevelRecord("metadata.version", 21), reg(1, 3), TopicRecord("a", T1),
                   PartitionRecord(0, T1, (1,), (1,), 1),
                   ConfigRecord(TOPIC_RESOURCE, "a", "retention.ms", "5"))
    data = encode_snapshot(img)
    assert decode_snapshot(data) == img.to_records()
    for n in range(len(data)):
        with pytest.raises(MetadataRecordError):
            decode_snapshot(data[:n])
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x40
        with pytest.raises(MetadataRecordError):
            decode_snapshot(bytes(bad))
    with pytest.raises(MetadataRecordError):
        decode_snapshot(data + b"\x00")
