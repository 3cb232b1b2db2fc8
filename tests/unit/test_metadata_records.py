"""KRaft metadata records: Kafka's ApiMessageAndVersion framing and field layouts, every version
Kafka 3.7-4.0 writes, unknown tagged fields skipped, and garbage always a MetadataRecordError."""

from __future__ import annotations

import random
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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

U1 = uuid.UUID("11111111-2222-3333-4444-555555555555")
U2 = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")


# ------------------------------------------------------------------ hand-made Kafka layouts
def uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uv(len(b) + 1) + b


def i32s(xs: tuple[int, ...] | None) -> bytes:
    if xs is None:
        return b"\x00"
    return uv(len(xs) + 1) + b"".join(struct.pack(">i", x) for x in xs)


def uuids(xs: tuple[uuid.UUID, ...]) -> bytes:
    return uv(len(xs) + 1) + b"".join(x.bytes for x in xs)


def tagged(*fields: tuple[int, bytes]) -> bytes:
    return uv(len(fields)) + b"".join(uv(t) + uv(len(v)) + v for t, v in fields)


def frame(api_key: int, version: int, body: bytes) -> bytes:
    return uv(1) + uv(api_key) + uv(version) + body


def test_feature_level_record_as_kafka_writes_it() -> None:
    # the metadata.version record at the start of a Kafka 3.8 __cluster_metadata log
    data = bytes.fromhex("010c0011") + b"metadata.version" + bytes.fromhex("001400")
    assert decode(data) == FeatureLevelRecord("metadata.version", 20)
    assert encode(FeatureLevelRecord("metadata.version", 20)) == data


def test_topic_record_layout() -> None:
    rec = TopicRecord("orders", U1)
    assert encode(rec) == frame(2, 0, cstr("orders") + U1.bytes + tagged())
    assert decode(encode(rec)) == rec


def test_partition_record_v0_and_v1_layouts() -> None:
    v0 = PartitionRecord(3, U1, (1, 2, 3), (1, 2), 1, leader_epoch=7, partition_epoch=9)
    body = (struct.pack(">i", 3) + U1.bytes + i32s((1, 2, 3)) + i32s((1, 2)) + i32s(()) + i32s(())
            + struct.pack(">iii", 1, 7, 9))
    assert encode(v0) == frame(3, 0, body + tagged())
    v1 = PartitionRecord(3, U1, (1, 2, 3), (1, 2), 1, 7, 9, directories=(U1, U2, U1),
                         leader_recovery_state=1)
    assert encode(v1) == frame(3, 1, body + uuids((U1, U2, U1)) + tagged((0, b"\x01")))
    assert decode(encode(v0)) == v0 and decode(encode(v1)) == v1


def test_partition_record_v2_elr_tags() -> None:
    body = (struct.pack(">i", 0) + U1.bytes + i32s((1, 2)) + i32s((1,)) + i32s(()) + i32s(())
            + struct.pack(">iii", 1, 0, 0) + uuids((U1, U2)))
    data = frame(3, 2, body + tagged((1, i32s((2,))), (2, i32s(()))))
    rec = decode(data)
    assert isinstance(rec, PartitionRecord)
    assert rec.eligible_leader_replicas == (2,) and rec.last_known_elr == ()
    assert rec.directories == (U1, U2)
    assert encode(rec) == data


def test_partition_change_record_tags() -> None:
    rec = PartitionChangeRecord(4, U2, isr=(1,), leader=-1, replicas=(1, 2), adding_replicas=(2,))
    data = frame(5, 0, struct.pack(">i", 4) + U2.bytes + tagged(
        (0, i32s((1,))), (1, struct.pack(">i", -1)), (2, i32s((1, 2))), (4, i32s((2,)))))
    assert encode(rec) == data
    assert decode(data) == rec
    # nothing changed but the partition epoch: no tags at all
    assert encode(PartitionChangeRecord(4, U2)) == frame(5, 0, struct.pack(">i", 4) + U2.bytes
                                                         + b"\x00")
    # v1 adds Directories (tag 8), v2 ELR (tags 6, 7)
    d = PartitionChangeRecord(4, U2, directories=(U1,))
    assert encode(d)[:3] == b"\x01\x05\x01" and decode(encode(d)) == d
    e = PartitionChangeRecord(4, U2, eligible_leader_replicas=(3,), directories=(U1,))
    assert encode(e)[:3] == b"\x01\x05\x02" and decode(encode(e)) == e


def test_tags_of_a_later_version_are_unknown_in_an_earlier_one() -> None:
    # tag 8 (Directories) in a v0 PartitionChangeRecord is not Directories: skipped
    data = frame(5, 0, struct.pack(">i", 1) + U1.bytes + tagged((8, uuids((U2,)))))
    assert decode(data) == PartitionChangeRecord(1, U1)


def test_register_broker_record_v3_layout() -> None:
    rec = RegisterBrokerRecord(2, U1, 40, (BrokerEndpoint("PLAINTEXT", "h", 9092, 0),),
                               (BrokerFeature("metadata.version", 1, 21),), None, True, False,
                               log_dirs=(U2,))
    body = (struct.pack(">i", 2) + b"\x00" + U1.bytes + struct.pack(">q", 40)
            + uv(2) + cstr("PLAINTEXT") + cstr("h") + struct.pack(">Hh", 9092, 0) + b"\x00"
            + uv(2) + cstr("metadata.version") + struct.pack(">hh", 1, 21) + b"\x00"
            + cstr(None) + b"\x01" + b"\x00" + tagged((0, uuids((U2,)))))
    assert encode(rec) == frame(0, 3, body)
    assert decode(frame(0, 3, body)) == rec


@pytest.mark.parametrize("version", [0, 1, 2])
def test_register_broker_record_older_versions(version: int) -> None:
    body = struct.pack(">i", 5)
    if version >= 2:
        body += b"\x01"  # IsMigratingZkBroker
    body += (U1.bytes + struct.pack(">q", 3) + uv(1) + uv(1) + cstr("rack-a") + b"\x00")
    if version >= 1:
        body += b"\x01"  # InControlledShutdown
    body += tagged()
    rec = decode(frame(0, version, body))
    assert isinstance(rec, RegisterBrokerRecord)
    assert (rec.broker_id, rec.broker_epoch, rec.rack, rec.fenced) == (5, 3, "rack-a", False)
    assert rec.in_controlled_shutdown == (version >= 1)
    assert rec.is_migrating_zk_broker == (version >= 2)


def test_broker_registration_change_record_versions() -> None:
    assert encode(BrokerRegistrationChangeRecord(1, 9, fenced=-1)) == frame(
        17, 0, struct.pack(">iq", 1, 9) + tagged((0, b"\xff")))
    assert encode(BrokerRegistrationChangeRecord(1, 9, in_controlled_shutdown=1)) == frame(
        17, 1, struct.pack(">iq", 1, 9) + tagged((1, b"\x01")))
    r = BrokerRegistrationChangeRecord(1, 9, fenced=1, log_dirs=(U1,))
    assert encode(r) == frame(17, 2, struct.pack(">iq", 1, 9)
                              + tagged((0, b"\x01"), (2, uuids((U1,)))))
    assert decode(encode(r)) == r


def test_simple_record_layouts() -> None:
    assert encode(ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", None)) == frame(
        4, 0, b"\x02" + cstr("t") + cstr("retention.ms") + b"\x00" + b"\x00")
    assert encode(FenceBrokerRecord(3, 4)) == frame(7, 0, struct.pack(">iq", 3, 4) + b"\x00")
    assert encode(UnfenceBrokerRecord(3, 4)) == frame(8, 0, struct.pack(">iq", 3, 4) + b"\x00")
    assert encode(UnregisterBrokerRecord(3, 4)) == frame(1, 0, struct.pack(">iq", 3, 4) + b"\x00")
    assert encode(RemoveTopicRecord(U1)) == frame(9, 0, U1.bytes + b"\x00")
    assert encode(ProducerIdsRecord(1, 2, 3000)) == frame(15, 0, struct.pack(">iqq", 1, 2, 3000)
                                                          + b"\x00")
    assert encode(NoOpRecord()) == b"\x01\x14\x00\x00"


def test_unknown_tagged_fields_are_skipped() -> None:
    data = frame(2, 0, cstr("x") + U1.bytes + tagged((7, b"abc"), (99, b"")))
    assert decode(data) == TopicRecord("x", U1)
    ep = cstr("L") + cstr("h") + struct.pack(">Hh", 1, 0) + tagged((3, b"zz"))
    body = (struct.pack(">i", 1) + U1.bytes + struct.pack(">q", 1) + uv(2) + ep + uv(1)
            + cstr(None) + b"\x01" + tagged((5, b"q")))
    rec = decode(frame(0, 0, body))
    assert isinstance(rec, RegisterBrokerRecord) and rec.endpoints == (BrokerEndpoint("L", "h", 1),)


@pytest.mark.parametrize("data, why", [
    (b"", "empty"),
    (b"\x00\x02\x00" + cstr("x") + U1.bytes + b"\x00", "frame version 0"),
    (b"\x02\x02\x00" + cstr("x") + U1.bytes + b"\x00", "frame version 2"),
    (frame(6, 0, b"\x00"), "unknown type 6"),
    (frame(200, 0, b"\x00"), "unknown type 200"),
    (frame(2, 1, cstr("x") + U1.bytes + b"\x00"), "TopicRecord v1"),
    (frame(0, 4, b""), "RegisterBrokerRecord v4"),
    (frame(2, 0, cstr("x") + U1.bytes + b"\x00" + b"\x00"), "trailing byte"),
    (frame(2, 0, b"\x00" + U1.bytes + b"\x00"), "null non-nullable string"),
    (frame(2, 0, b"\x02\xff" + U1.bytes + b"\x00"), "bad utf-8"),
    (frame(2, 0, cstr("x") + U1.bytes + tagged((1, b"a"), (1, b"b"))), "repeated tag"),
    (frame(2, 0, cstr("x") + U1.bytes + b"\x01\x01\x05ab"), "tag overruns"),
    (frame(5, 0, struct.pack(">i", 1) + U1.bytes + tagged((1, b"\x00\x00\x00\x01\x00"))),
     "tag not filled exactly"),
    (frame(3, 0, struct.pack(">i", 0) + U1.bytes + b"\xff\xff\xff\xff\x0f"), "huge array"),
    (frame(3, 0, struct.pack(">i", 0) + U1.bytes + b"\x00"), "null replicas"),
    (b"\x01\xff\xff\xff\xff\xff\xff", "varint too long"),
    (frame(4, 0, b"\x04" + cstr("") + uv(0x8001) + b"a" * 0x8000 + b"\x00\x00"), "long string"),
    (frame(0, 0, struct.pack(">i", 1) + U1.bytes + struct.pack(">q", 1) + b"\x01\x01" + b"\x00"
           + b"\x05" + b"\x00"), "bad boolean"),
])
def test_malformed_input_is_a_metadata_record_error(data: bytes, why: str) -> None:
    with pytest.raises(MetadataRecordError):
        decode(data)


def test_encode_refuses_out_of_range_fields() -> None:
    for bad in (TopicRecord("x" * 0x8000, U1), FeatureLevelRecord("f", 1 << 15),
                RegisterBrokerRecord(1, U1, 1, (BrokerEndpoint("L", "h", 70000),)),
                FenceBrokerRecord(1 << 31, 0), ProducerIdsRecord(1, 1, 1 << 63)):
        with pytest.raises(MetadataRecordError):
            encode(bad)


# ------------------------------------------------------------------ properties and fuzzing
ints32 = st.integers(-(1 << 31), (1 << 31) - 1)
ints64 = st.integers(-(1 << 63), (1 << 63) - 1)
ints16 = st.integers(-(1 << 15), (1 << 15) - 1)
ints8 = st.integers(-128, 127)
names = st.text(max_size=12)
uuids_st = st.uuids()
i32_tuples = st.lists(ints32, max_size=5).map(tuple)
opt_i32_tuples = st.none() | i32_tuples
uuid_tuples = st.lists(uuids_st, max_size=3).map(tuple)

records_st: st.SearchStrategy[Record] = st.one_of(
    st.builds(RegisterBrokerRecord, ints32, uuids_st, ints64,
              st.lists(st.builds(BrokerEndpoint, names, names, st.integers(0, 65535), ints16),
                       max_size=3).map(tuple),
              st.lists(st.builds(BrokerFeature, names, ints16, ints16), max_size=3).map(tuple),
              st.none() | names, st.booleans(), st.booleans(), st.booleans(), uuid_tuples),
    st.builds(UnregisterBrokerRecord, ints32, ints64),
    st.builds(TopicRecord, names, uuids_st),
    st.builds(PartitionRecord, ints32, uuids_st, i32_tuples, i32_tuples, ints32, ints32, ints32,
              i32_tuples, i32_tuples, ints8, uuid_tuples, opt_i32_tuples, opt_i32_tuples),
    st.builds(ConfigRecord, st.sampled_from([TOPIC_RESOURCE, BROKER_RESOURCE, 8]), names, names,
              st.none() | names),
    st.builds(PartitionChangeRecord, ints32, uuids_st, opt_i32_tuples, ints32, opt_i32_tuples,
              opt_i32_tuples, opt_i32_tuples, ints8, st.none() | uuid_tuples, opt_i32_tuples,
              opt_i32_tuples),
    st.builds(FenceBrokerRecord, ints32, ints64),
    st.builds(UnfenceBrokerRecord, ints32, ints64),
    st.builds(RemoveTopicRecord, uuids_st),
    st.builds(FeatureLevelRecord, names, ints16),
    st.builds(ProducerIdsRecord, ints32, ints64, ints64),
    st.builds(BrokerRegistrationChangeRecord, ints32, ints64, ints8, ints8, uuid_tuples),
    st.just(NoOpRecord()),
)


@settings(max_examples=400, deadline=None)
@given(records_st)
def test_round_trip(rec: Record) -> None:
    data = encode(rec)
    back = decode(data)
    assert back == rec
    assert encode(back) == data


@settings(max_examples=150, deadline=None)
@given(records_st)
def test_every_truncation_is_an_error(rec: Record) -> None:
    data = encode(rec)
    for n in range(len(data)):
        with pytest.raises(MetadataRecordError):
            decode(data[:n])


def _decode_or_error(data: bytes) -> None:
    try:
        rec = decode(data)
    except MetadataRecordError:
        return
    assert decode(encode(rec)) == rec  # whatever decodes is a record that survives a round trip


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_metadata_record_error(data: bytes) -> None:
    _decode_or_error(data)
    _decode_or_error(b"\x01" + data)  # a valid frame version: deeper into the readers
    if data:
        _decode_or_error(b"\x01" + bytes([data[0] % 21]) + b"\x00" + data[1:])


def test_mutated_records_decode_or_raise_metadata_record_error() -> None:
    rnd = random.Random(1307)
    samples = [encode(r) for r in (
        RegisterBrokerRecord(1, U1, 2, (BrokerEndpoint("PLAINTEXT", "localhost", 9092),),
                             (BrokerFeature("metadata.version", 1, 21),), "r", log_dirs=(U2,)),
        PartitionRecord(0, U1, (1, 2, 3), (1, 2), 1, 1, 1, directories=(U1, U2, U1),
                        eligible_leader_replicas=(3,)),
        PartitionChangeRecord(0, U1, isr=(1,), leader=1, directories=(U2,), last_known_elr=()),
        ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "1000"),
        BrokerRegistrationChangeRecord(1, 2, -1, 1, (U1,)),
    )]
    for _ in range(3000):
        b = bytearray(rnd.choice(samples))
        for _m in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(b))
            op = rnd.randrange(3)
            if op == 0:
                b[i] = rnd.randrange(256)
            elif op == 1:
                del b[i]
            else:
                b.insert(i, rnd.randrange(256))
        _decode_or_error(bytes(b))
