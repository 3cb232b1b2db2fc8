"""The Raft core's messages on Kafka's wire (samsa/cluster/quorum/wire.py): round trips, byte layouts
checked by hand against Kafka's message specs, and malformed frames (truncated, mutated, lying)."""

from __future__ import annotations

import asyncio
import collections
import random
import struct
import uuid
from collections.abc import Sequence

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.cluster.quorum import messages as m
from samsa.cluster.quorum import wire
from samsa.cluster.quorum.config import QuorumConfig
from samsa.cluster.quorum.log import Entry, MemoryLog, OffsetAndEpoch
from samsa.cluster.quorum.node import Output, RaftNode
from samsa.cluster.quorum.sim import Simulation
from samsa.cluster.quorum.wire.transport import QuorumPeer
from samsa.protocol.records import encode_batch

I32 = st.integers(-(2**31), 2**31 - 1)
NAT32 = st.integers(0, 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
NAT64 = st.integers(0, 2**62)
CLUSTER = st.none() | st.text(max_size=40)
PARTITION_ERRORS = st.sampled_from(
    [
        m.NONE,
        m.NOT_LEADER_OR_FOLLOWER,
        m.FENCED_LEADER_EPOCH,
        m.UNKNOWN_LEADER_EPOCH,
        m.INCONSISTENT_VOTER_SET,
        m.SNAPSHOT_NOT_FOUND,
        m.POSITION_OUT_OF_RANGE,
    ]
)
OE = st.builds(OffsetAndEpoch, NAT64, NAT32)
ENTRIES = st.lists(st.builds(Entry, NAT32, st.binary(max_size=40), st.booleans()), max_size=12).map(
    lambda es: tuple(sorted(es, key=lambda e: e.epoch))
)

REQUESTS = st.one_of(
    st.builds(m.VoteRequest, CLUSTER, I32, I32, I32, I32, I64, st.booleans()),
    st.builds(m.BeginQuorumEpochRequest, CLUSTER, I32, I32, I32),
    st.builds(m.EndQuorumEpochRequest, CLUSTER, I32, I32, st.lists(I32, max_size=5).map(tuple)),
    st.builds(m.FetchRequest, CLUSTER, I32, I32, I64, I32, NAT32),
    st.builds(m.FetchSnapshotRequest, CLUSTER, I32, I32, OE, I64, I32),
    st.just(m.DescribeQuorumRequest()),
)
STATES = st.lists(st.builds(m.ReplicaState, I32, I64, I64, I64), max_size=4).map(tuple)


@st.composite
def exchanges(draw: st.DrawFn) -> tuple[wire.CoreRequest, wire.CoreResponse]:
    """A request and a response to it (echo fields copied from the request, as the core does)."""
    req = draw(REQUESTS)
    err = draw(PARTITION_ERRORS)
    leader, epoch = draw(I32), draw(I32)
    resp: wire.CoreResponse
    match req:
        case m.VoteRequest():
            resp = m.VoteResponse(err, leader, epoch, draw(st.booleans()), req.pre_vote)
        case m.BeginQuorumEpochRequest():
            resp = m.BeginQuorumEpochResponse(err, leader, epoch)
        case m.EndQuorumEpochRequest():
            resp = m.EndQuorumEpochResponse(err, leader, epoch)
        case m.FetchRequest():
            offset = draw(NAT64)
            resp = m.FetchResponse(
                err,
                leader,
                epoch,
                draw(I64),
                draw(I64),
                draw(ENTRIES),
                draw(st.none() | OE),
                draw(st.none() | OE),
                offset,
                req.last_fetched_epoch,
            )
            req = m.FetchRequest(
                req.cluster_id,
                req.replica_id,
                req.current_leader_epoch,
                offset,
                req.last_fetched_epoch,
                req.max_wait_ms,
            )
        case m.FetchSnapshotRequest():
            resp = m.FetchSnapshotResponse(
                err, leader, epoch, draw(OE), draw(I64), draw(I64), draw(st.binary(max_size=64))
            )
        case _:
            resp = m.DescribeQuorumResponse(err, leader, epoch, draw(I64), draw(STATES), draw(STATES))
    return req, resp


# ---------------------------------------------------------------- round trips


@settings(max_examples=300, deadline=None)
@given(REQUESTS, I32)
def test_request_round_trip(req: wire.CoreRequest, corr: int) -> None:
    assert wire.decode_request(wire.encode_request(req, corr)) == (corr, req)


@settings(max_examples=300, deadline=None)
@given(exchanges(), I32)
def test_response_round_trip(exchange: tuple[wire.CoreRequest, wire.CoreResponse], corr: int) -> None:
    req, resp = exchange
    assert wire.decode_response(wire.encode_response(resp, corr), req) == (corr, resp)


@settings(max_examples=50, deadline=None)
@given(REQUESTS)
def test_top_level_cluster_id_error_reads_as_no_leader(req: wire.CoreRequest) -> None:
    """INCONSISTENT_CLUSTER_ID goes out as Kafka sends it: a top-level error and no topics."""
    if isinstance(req, m.DescribeQuorumRequest):
        return
    sent = wire.top_level_error(req, m.INCONSISTENT_CLUSTER_ID)
    frame = wire.encode_response(sent, 1)
    assert frame.endswith(b"\x00")
    _, got = wire.decode_response(frame, req)
    assert got == sent and got.error_code == m.INCONSISTENT_CLUSTER_ID and got.leader_id == -1


def test_entries_travel_as_epoch_batches() -> None:
    entries = (Entry(1, b"a"), Entry(1, b"b"), Entry(2, b"LeaderChange", True), Entry(2, b"c"))
    raw = wire.encode_entries(entries, 100)
    batches = []
    pos = 0
    while pos < len(raw):
        base, length, epoch, magic, _crc, attrs, last_delta = struct.unpack_from(">qiibIhi", raw, pos)
        batches.append((base, epoch, magic, attrs, last_delta))
        pos += 12 + length
    # one batch per epoch run, the control entry alone in a control batch (attribute bit 5)
    assert batches == [(100, 1, 2, 0, 1), (102, 2, 2, 0x20, 0), (103, 2, 2, 0, 0)]
    assert wire.decode_entries(raw, 100) == entries
    assert wire.decode_entries(b"", 7) == () and wire.decode_entries(None, 7) == ()


# ---------------------------------------------------------------- byte layouts (Kafka's specs)


def cstr(s: str | None) -> bytes:
    """Compact (nullable) string: uvarint(len + 1), 0 for null."""
    if s is None:
        return b"\x00"
    b = s.encode()
    assert len(b) < 127
    return bytes([len(b) + 1]) + b


def req_header(key: int, version: int, corr: int, client: str = "raft-client") -> bytes:
    """Request header v2: key, version, correlation id, int16-length client id, empty tag section."""
    return struct.pack(">hhih", key, version, corr, len(client)) + client.encode() + b"\x00"


TOPIC = cstr("__cluster_metadata")
NULL_UUID = bytes(16)
ARR1 = b"\x02"  # compact array of one element
NO_TAGS = b"\x00"


def test_vote_request_v2_bytes() -> None:
    req = m.VoteRequest("abc", 5, 1, 2, 4, 77, True)
    part = struct.pack(">iii", 0, 5, 1) + NULL_UUID + NULL_UUID + struct.pack(">iq?", 4, 77, True) + NO_TAGS
    body = cstr("abc") + struct.pack(">i", 2) + ARR1 + TOPIC + ARR1 + part + NO_TAGS + NO_TAGS
    assert wire.encode_request(req, 9) == req_header(52, 2, 9) + body


def test_vote_response_v2_bytes() -> None:
    resp = m.VoteResponse(m.FENCED_LEADER_EPOCH, 3, 8, False, False)
    part = struct.pack(">ihii?", 0, 74, 3, 8, False) + NO_TAGS
    expected = (
        struct.pack(">i", 4) + NO_TAGS + struct.pack(">h", 0) + ARR1 + TOPIC + ARR1 + part + NO_TAGS + NO_TAGS
    )
    assert wire.encode_response(resp, 4) == expected


def test_begin_quorum_epoch_v1_bytes() -> None:
    req = m.BeginQuorumEpochRequest(None, 2, 1, 6)
    part = struct.pack(">i", 0) + NULL_UUID + struct.pack(">ii", 1, 6) + NO_TAGS
    body = cstr(None) + struct.pack(">i", 2) + ARR1 + TOPIC + ARR1 + part + NO_TAGS + b"\x01" + NO_TAGS
    assert wire.encode_request(req, 1) == req_header(53, 1, 1) + body
    resp = m.BeginQuorumEpochResponse(m.NONE, 1, 6)
    part = struct.pack(">ihii", 0, 0, 1, 6) + NO_TAGS
    expected = (
        struct.pack(">i", 1) + NO_TAGS + struct.pack(">h", 0) + ARR1 + TOPIC + ARR1 + part + NO_TAGS + NO_TAGS
    )
    assert wire.encode_response(resp, 1) == expected


def test_end_quorum_epoch_v1_bytes() -> None:
    req = m.EndQuorumEpochRequest("x", 1, 6, (3, 2))
    cands = b"\x03" + struct.pack(">i", 3) + NULL_UUID + NO_TAGS + struct.pack(">i", 2) + NULL_UUID + NO_TAGS
    part = struct.pack(">iii", 0, 1, 6) + cands + NO_TAGS
    body = cstr("x") + ARR1 + TOPIC + ARR1 + part + NO_TAGS + b"\x01" + NO_TAGS
    assert wire.encode_request(req, 2) == req_header(54, 1, 2) + body


def test_describe_quorum_v2_bytes() -> None:
    body = ARR1 + TOPIC + ARR1 + struct.pack(">i", 0) + NO_TAGS + NO_TAGS + NO_TAGS
    assert wire.encode_request(m.DescribeQuorumRequest(), 3) == req_header(55, 2, 3) + body
    resp = m.DescribeQuorumResponse(m.NONE, 1, 6, 40, (m.ReplicaState(1, 40, 5, 6),), ())
    voter = struct.pack(">i", 1) + NULL_UUID + struct.pack(">qqq", 40, 5, 6) + NO_TAGS
    part = (
        struct.pack(">ih", 0, 0)
        + cstr(None)
        + struct.pack(">iiq", 1, 6, 40)
        + ARR1
        + voter
        + b"\x01"
        + NO_TAGS
    )
    expected = (
        struct.pack(">i", 3)
        + NO_TAGS
        + struct.pack(">h", 0)
        + cstr(None)
        + ARR1
        + TOPIC
        + ARR1
        + part
        + NO_TAGS
        + b"\x01"
        + NO_TAGS
    )
    assert wire.encode_response(resp, 3) == expected


def test_fetch_v17_request_bytes() -> None:
    """Replica fetch on __cluster_metadata-0 by topic id 0...01; ClusterId is tag 0 and ReplicaState
    (ReplicaId, ReplicaEpoch -1) tag 1 of the request's tag section."""
    req = m.FetchRequest("c1", 2, 6, 40, 5, 500)
    assert wire.METADATA_TOPIC_ID.bytes == bytes(15) + b"\x01"
    part = struct.pack(">iiqiqi", 0, 6, 40, 5, -1, wire.FETCH_MAX_BYTES) + NO_TAGS
    replica_state = struct.pack(">iq", 2, -1) + NO_TAGS
    tags = (
        b"\x02"
        + b"\x00"
        + bytes([len(cstr("c1"))])
        + cstr("c1")
        + b"\x01"
        + bytes([len(replica_state)])
        + replica_state
    )
    body = (
        struct.pack(">iiibii", 500, 0, wire.FETCH_MAX_BYTES, 0, 0, -1)
        + ARR1
        + wire.METADATA_TOPIC_ID.bytes
        + ARR1
        + part
        + NO_TAGS
        + b"\x01"
        + cstr("")
        + tags
    )
    assert wire.encode_request(req, 5) == req_header(1, 17, 5) + body


def test_fetch_v17_response_bytes() -> None:
    """DivergingEpoch (tag 0), CurrentLeader (tag 1) and SnapshotId (tag 2) in the partition's tag
    section; records as one RecordBatch v2 with partitionLeaderEpoch = the entries' epoch."""
    resp = m.FetchResponse(
        m.NONE,
        1,
        6,
        42,
        3,
        (Entry(6, b"v"),),
        OffsetAndEpoch(30, 4),
        OffsetAndEpoch(20, 2),
        fetch_offset=41,
        last_fetched_epoch=5,
    )
    records = encode_batch([(None, b"v", [], 0)], base_offset=41, leader_epoch=6)
    diverging = struct.pack(">iq", 4, 30) + NO_TAGS
    leader = struct.pack(">ii", 1, 6) + NO_TAGS
    snapshot = struct.pack(">qi", 20, 2) + NO_TAGS
    tags = (
        b"\x03"
        + b"\x00"
        + bytes([len(diverging)])
        + diverging
        + b"\x01"
        + bytes([len(leader)])
        + leader
        + b"\x02"
        + bytes([len(snapshot)])
        + snapshot
    )
    part = (
        struct.pack(">ihqqq", 0, 0, 42, -1, 3)
        + b"\x00"
        + struct.pack(">i", -1)
        + bytes([len(records) + 1])
        + records
        + tags
    )
    expected = (
        struct.pack(">i", 5)
        + NO_TAGS
        + struct.pack(">ihi", 0, 0, 0)
        + ARR1
        + wire.METADATA_TOPIC_ID.bytes
        + ARR1
        + part
        + NO_TAGS
        + NO_TAGS
    )
    assert wire.encode_response(resp, 5) == expected
    assert records[12:16] == struct.pack(">i", 6)  # partitionLeaderEpoch


def test_fetch_snapshot_v1_bytes() -> None:
    req = m.FetchSnapshotRequest(None, 2, 6, OffsetAndEpoch(100, 5), 8, 4096)
    # SnapshotId is a struct: it has its own (empty) tag section
    part = struct.pack(">ii", 0, 6) + struct.pack(">qi", 100, 5) + NO_TAGS + struct.pack(">q", 8) + NO_TAGS
    body = struct.pack(">ii", 2, 4096) + ARR1 + TOPIC + ARR1 + part + NO_TAGS + NO_TAGS
    assert wire.encode_request(req, 6) == req_header(59, 1, 6) + body
    resp = m.FetchSnapshotResponse(m.NONE, 1, 6, OffsetAndEpoch(100, 5), 300, 8, b"snap")
    leader = struct.pack(">ii", 1, 6) + NO_TAGS
    part = (
        struct.pack(">ih", 0, 0)
        + struct.pack(">qi", 100, 5)
        + NO_TAGS
        + struct.pack(">qq", 300, 8)
        + cstr("snap")
        + b"\x01\x00"
        + bytes([len(leader)])
        + leader
    )
    expected = (
        struct.pack(">i", 6)
        + NO_TAGS
        + struct.pack(">ih", 0, 0)
        + ARR1
        + TOPIC
        + ARR1
        + part
        + NO_TAGS
        + NO_TAGS
    )
    assert wire.encode_response(resp, 6) == expected


# ---------------------------------------------------------------- malformed input

SAMPLE_EXCHANGES: list[tuple[wire.CoreRequest, wire.CoreResponse]] = [
    (m.VoteRequest("c", 3, 1, 2, 2, 10, True), m.VoteResponse(0, 1, 3, True, True)),
    (m.BeginQuorumEpochRequest("c", 2, 1, 3), m.BeginQuorumEpochResponse(0, 1, 3)),
    (m.EndQuorumEpochRequest(None, 1, 3, (2, 3)), m.EndQuorumEpochResponse(6, 1, 3)),
    (
        m.FetchRequest("c", 2, 3, 10, 2, 500),
        m.FetchResponse(
            0,
            1,
            3,
            12,
            0,
            (Entry(2, b"a"), Entry(3, b"LC", True), Entry(3, b"x")),
            OffsetAndEpoch(9, 2),
            None,
            10,
            2,
        ),
    ),
    (
        m.FetchSnapshotRequest("c", 2, 3, OffsetAndEpoch(10, 2), 0, 1000),
        m.FetchSnapshotResponse(0, 1, 3, OffsetAndEpoch(10, 2), 100, 0, b"abc"),
    ),
    (m.DescribeQuorumRequest(), m.DescribeQuorumResponse(0, 1, 3, 12, (m.ReplicaState(1, 12, 5, 5),), ())),
]
IDS = [type(q).__name__ for q, _ in SAMPLE_EXCHANGES]


@pytest.mark.parametrize(("req", "resp"), SAMPLE_EXCHANGES, ids=IDS)
def test_every_truncation_is_rejected(req: wire.CoreRequest, resp: wire.CoreResponse) -> None:
    qf, rf = wire.encode_request(req, 1), wire.encode_response(resp, 1)
    for n in range(len(qf)):
        with pytest.raises(wire.WireError):
            wire.decode_request(qf[:n])
    for n in range(len(rf)):
        with pytest.raises(wire.WireError):
            wire.decode_response(rf[:n], req)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(range(len(SAMPLE_EXCHANGES))),
    st.booleans(),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 255), st.sampled_from("sid")), min_size=1, max_size=6
    ),
)
def test_mutated_frames_decode_or_raise_wire_error(
    which: int, response: bool, edits: list[tuple[int, int, str]]
) -> None:
    """Set, insert or delete bytes anywhere: the decoder returns a core message or raises WireError."""
    req, resp = SAMPLE_EXCHANGES[which]
    frame = bytearray(wire.encode_response(resp, 1) if response else wire.encode_request(req, 1))
    for at, byte, op in edits:
        i = at % (len(frame) + 1)
        if op == "s" and i < len(frame):
            frame[i] = byte
        elif op == "i":
            frame.insert(i, byte)
        elif i < len(frame):
            del frame[i]
    try:
        got = wire.decode_response(bytes(frame), req)[1] if response else wire.decode_request(bytes(frame))[1]
    except wire.WireError:
        return
    assert type(got).__name__.startswith(type(req).__name__.removesuffix("Request"))


def test_huge_array_count_is_rejected_before_kio() -> None:
    """A topics count of 2^31 in a 30-byte frame: kio's native reader would reserve for it."""
    frame = req_header(55, 2, 1) + b"\xff\xff\xff\xff\x07"
    with pytest.raises(wire.WireError, match="malformed"):
        wire.decode_request(frame)


def test_wrong_shape_is_rejected() -> None:
    frame = wire.encode_request(m.DescribeQuorumRequest(), 1)
    with pytest.raises(wire.WireError, match="expected topic __cluster_metadata"):
        wire.decode_request(frame.replace(b"__cluster_metadata", b"__cluster_metadatX"))
    fetch = wire.encode_request(m.FetchRequest(None, 2, 3, 10, 2, 500), 1)
    with pytest.raises(wire.WireError, match="expected topic"):
        wire.decode_request(fetch.replace(wire.METADATA_TOPIC_ID.bytes, uuid.UUID(int=2).bytes))
    with pytest.raises(wire.WireError, match="not a quorum RPC"):
        wire.decode_request(struct.pack(">hhi", 1, 16, 1) + frame[8:])
    with pytest.raises(wire.WireError, match="no header"):
        wire.decode_request(b"\x00\x34")


def test_unknown_tagged_field_is_ignored() -> None:
    """KIP-482: a tag this version does not know is skipped, not an error."""
    req = m.BeginQuorumEpochRequest("c", 2, 1, 3)
    frame = wire.encode_request(req, 1)
    assert frame.endswith(b"\x00")
    assert wire.decode_request(frame[:-1] + b"\x01\x09\x02hi") == (1, req)


def _fetch_answer(records: bytes) -> bytes:
    resp = m.FetchResponse(0, 1, 3, 12, 0, (Entry(3, b"x"),), fetch_offset=10, last_fetched_epoch=2)
    frame = wire.encode_response(resp, 1)
    good = wire.encode_entries(resp.records, 10)
    assert len(records) == len(good)
    return frame.replace(good, records)


FETCH_REQ = m.FetchRequest("c", 2, 3, 10, 2, 500)


def test_bad_batches_are_rejected() -> None:
    good = wire.encode_entries((Entry(3, b"x"),), 10)
    bad_crc = good[:-1] + bytes([good[-1] ^ 1])
    with pytest.raises(wire.WireError, match="CRC"):
        wire.decode_response(_fetch_answer(bad_crc), FETCH_REQ)
    wrong_base = wire.encode_entries((Entry(3, b"x"),), 11)
    with pytest.raises(wire.WireError, match="expected 10"):
        wire.decode_response(_fetch_answer(wrong_base), FETCH_REQ)
    magic1 = bytearray(good)
    magic1[16] = 1
    magic1[17:21] = struct.pack(">I", crc32c.crc32c(bytes(magic1[21:])))
    with pytest.raises(wire.WireError, match="magic"):
        wire.decode_response(_fetch_answer(bytes(magic1)), FETCH_REQ)
    null_value = encode_batch([(None, None, [], 0)], base_offset=10, leader_epoch=3)
    with pytest.raises(wire.WireError, match="no value"):
        wire.decode_entries(null_value, 10)


@settings(max_examples=300, deadline=None)
@given(
    ENTRIES.filter(bool),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutated_batches_decode_or_raise_wire_error(
    entries: tuple[Entry, ...], edits: list[tuple[int, int]]
) -> None:
    """Corrupted record batches (header or records, CRC recomputed half the time so the records
    parser is reached) give entries or WireError, nothing else."""
    raw = bytearray(wire.encode_entries(entries, 5))
    for at, byte in edits:
        raw[at % len(raw)] = byte
    end = 12 + struct.unpack_from(">i", raw, 8)[0]  # the first batch's end, as its (maybe edited) header says
    if edits[0][1] % 2 and 61 <= end <= len(raw):
        raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:end])))
    try:
        got = wire.decode_entries(bytes(raw), 5)
    except wire.WireError:
        return
    assert all(isinstance(e, Entry) for e in got)


def test_trailing_partial_batch_is_ignored() -> None:
    raw = wire.encode_entries((Entry(3, b"x"), Entry(4, b"y")), 10)
    first = wire.encode_entries((Entry(3, b"x"),), 10)
    assert wire.decode_entries(raw[:-3], 10) == (Entry(3, b"x"),)
    assert wire.decode_entries(first + raw[len(first) : len(first) + 20], 10) == (Entry(3, b"x"),)


def test_sized_prefix() -> None:
    frame = wire.encode_request(m.DescribeQuorumRequest(), 1)
    assert wire.sized(frame) == struct.pack(">i", len(frame)) + frame


# ---------------------------------------------------------------- the core over the wire


def test_correlator_pairs_requests_and_responses() -> None:
    a, b = wire.Correlator(1), wire.Correlator(2)
    first = m.FetchRequest(None, 1, 3, 10, 2, 500)
    stale = a.request_frame(2, first)
    newer = m.FetchRequest(None, 1, 3, 12, 3, 500)
    fresh = a.request_frame(2, newer)  # replaces the first Fetch in flight to 2
    got_stale, got_fresh = b.request_message(1, stale), b.request_message(1, fresh)
    assert got_stale == m.Message(1, 2, first) and got_fresh == m.Message(1, 2, newer)
    answer = m.FetchResponse(0, 2, 3, 13, 0, (Entry(3, b"z"),), fetch_offset=12, last_fetched_epoch=3)
    frame = b.response_frame(1, answer)
    assert frame is not None and b.response_frame(1, answer) is None  # one answer per request
    assert a.response_message(2, frame) == m.Message(2, 1, answer)
    assert a.response_message(2, frame) is None  # answered already
    # the stale request's answer (its correlation id) is dropped, as Kafka's RaftClient drops it
    late = wire.encode_response(answer, struct.unpack_from(">i", stale, 4)[0])
    assert a.response_message(2, late) is None
    # a broken connection fails what is in flight
    vote = m.VoteRequest(None, 4, 1, 3, 3, 13, False)
    a.request_frame(3, vote)
    assert a.failed(3) == [m.Message(3, 1, m.RequestFailed(vote))] and a.failed(3) == []
    with pytest.raises(wire.WireError):
        a.response_message(2, b"\x00")


class WireNode(RaftNode):
    """A RaftNode whose every inbound message went to bytes and back (and must come back equal)."""

    seen: collections.Counter[str] = collections.Counter()

    def step(self, now_ms: int, inbound: Sequence[m.Message] = ()) -> Output:
        return super().step(now_ms, [self._transcode(msg) for msg in inbound])

    def _transcode(self, msg: m.Message) -> m.Message:
        body = msg.body
        if isinstance(body, m.RequestFailed):
            return msg
        corr = sum(WireNode.seen.values()) & 0x7FFFFFFF  # not the node's rng: that would change the run
        if isinstance(
            body,
            (
                m.VoteRequest,
                m.BeginQuorumEpochRequest,
                m.EndQuorumEpochRequest,
                m.FetchRequest,
                m.FetchSnapshotRequest,
                m.DescribeQuorumRequest,
            ),
        ):
            got = wire.decode_request(wire.encode_request(body, corr))
        else:
            got = wire.decode_response(wire.encode_response(body, corr), _request_for(body))  # type: ignore[arg-type]
        assert got == (corr, body)
        WireNode.seen[type(body).__name__] += 1
        return msg


def _request_for(resp: wire.CoreResponse) -> wire.CoreRequest:
    """A request the response could answer, carrying its echo fields."""
    match resp:
        case m.VoteResponse():
            return m.VoteRequest(None, 0, 0, 0, 0, 0, resp.pre_vote)
        case m.BeginQuorumEpochResponse():
            return m.BeginQuorumEpochRequest(None, 0, 0, 0)
        case m.EndQuorumEpochResponse():
            return m.EndQuorumEpochRequest(None, 0, 0, ())
        case m.FetchResponse():
            return m.FetchRequest(None, 0, 0, resp.fetch_offset, resp.last_fetched_epoch, 0)
        case m.FetchSnapshotResponse():
            return m.FetchSnapshotRequest(None, 0, 0, resp.snapshot_id, 0, 0)
    return m.DescribeQuorumRequest()


def test_simulated_quorums_run_unchanged_over_the_wire() -> None:
    """Seeded fault schedules (loss, partitions, crashes, snapshots) with every message through
    bytes: same results as without the wire, and every RPC kind was on it."""
    WireNode.seen.clear()
    for n, seeds in ((3, 30), (5, 10)):
        for seed in range(seeds):
            assert Simulation(seed, n, node_factory=WireNode).run() == Simulation(seed, n).run()
    kinds = {
        "VoteRequest",
        "VoteResponse",
        "BeginQuorumEpochRequest",
        "BeginQuorumEpochResponse",
        "FetchRequest",
        "FetchResponse",
        "FetchSnapshotRequest",
        "FetchSnapshotResponse",
    }
    assert kinds <= set(WireNode.seen), WireNode.seen


# ---------------------------------------------------------------- over TCP (the transport sketch)


async def _tcp_quorum(n: int) -> tuple[list[QuorumPeer], list[MemoryLog]]:
    config = QuorumConfig(
        election_timeout_ms=300,
        fetch_timeout_ms=600,
        election_backoff_max_ms=300,
        request_timeout_ms=600,
        fetch_max_wait_ms=100,
    )
    ids = list(range(1, n + 1))
    logs = [MemoryLog() for _ in ids]
    now = int(asyncio.get_running_loop().time() * 1000)
    peers: dict[int, tuple[str, int]] = {}
    quorum = []
    for i, log in zip(ids, logs, strict=True):
        node = RaftNode(i, ids, config, None, log, random.Random(i), now)
        quorum.append(QuorumPeer(node, peers, lambda record: None, log.flush))
    for i, peer in zip(ids, quorum, strict=True):
        peers[i] = ("127.0.0.1", await peer.listen("127.0.0.1", 0))
    for peer in quorum:
        peer.run()
    return quorum, logs


async def _committed_everywhere(quorum: list[QuorumPeer], value: bytes, rounds: int = 1200) -> bool:
    """Propose `value` to whoever leads until every node's high watermark passes it (bounded: at
    most `rounds` polls; a proposal lost to a leader change is proposed again)."""
    proposed: tuple[RaftNode, int] | None = None
    for _ in range(rounds):
        await asyncio.sleep(0.05)
        leader = next((p.node for p in quorum if p.node.role == "leader"), None)
        if proposed is None and leader is not None:
            proposed = (leader, leader.propose([value]))
        if proposed is None:
            continue
        node, offset = proposed
        if all(p.node.high_watermark > offset for p in quorum):
            if quorum[0].node.log.read(offset, 1)[0].data == value:
                return True
            proposed = None  # a later leader's entry took the offset
        elif node.role != "leader":
            proposed = None
    return False


def test_three_nodes_elect_and_commit_over_tcp() -> None:
    """Three RaftNodes on 127.0.0.1, every RPC through the wire mapping: a leader is elected, a
    proposal commits on all of them, and a garbage frame closes only its own connection."""

    async def scenario() -> None:
        quorum, logs = await _tcp_quorum(3)
        try:
            assert await _committed_everywhere(quorum, b"first")
            host, port = quorum[0].peers[1]
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(struct.pack(">i", 12) + struct.pack(">hhi", 52, 2, 1) + b"\xff\xff\xff\xff")
            assert await asyncio.wait_for(reader.read(1), 10) == b""  # closed by the peer
            writer.close()
            assert quorum[0].rejected == 1
            assert await _committed_everywhere(quorum, b"second")
            assert all(any(e.data == b"second" for e in log.read(0, 1000)) for log in logs)
        finally:
            for peer in quorum:
                await peer.stop()

    asyncio.run(scenario())
