"""The Raft core's messages (messages.py) to and from Kafka's KRaft RPC frames, via kio.

One function pair per direction: `encode_request` / `decode_request` and `encode_response` /
`decode_response`. Frames are a request or response header plus body, *without* the int32 size
prefix (`sized` adds it). Every decode path first walks the frame against its schema with
request_guard's checker (so kio's native reader never sees a count it would over-allocate for),
then checks the KRaft shape (one topic, `__cluster_metadata`, partition 0), and raises `WireError`
for anything malformed; nothing else escapes.

Versions are the highest that both kio and Kafka 4.0 define: Vote v2, BeginQuorumEpoch v1,
EndQuorumEpoch v1, DescribeQuorum v2, Fetch v17, FetchSnapshot v1. Directory ids and endpoints
(KIP-853) are not modelled by the core: they go out null/empty and are ignored when read.
Fetch entries travel as RecordBatch v2 batches: consecutive entries of one epoch share a batch
whose partitionLeaderEpoch is that epoch; a control entry is a control batch of one record.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Sequence
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.cluster.quorum import messages as m
from samsa.cluster.quorum.log import OffsetAndEpoch
from samsa.cluster.quorum.wire.entries import decode_entries, encode_entries
from samsa.cluster.quorum.wire.errors import WireError
from samsa.protocol import request_guard
from samsa.protocol.codec import Chunks, build

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
# Kafka's Topic.CLUSTER_METADATA_TOPIC_ID: Uuid(0, 1), "AAAAAAAAAAAAAAAAAAAAAQ" in base64
METADATA_TOPIC_ID = uuid.UUID(int=1)

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM, FETCH, FETCH_SNAPSHOT = 52, 53, 54, 55, 1, 59
VERSIONS = {
    VOTE: 2,
    BEGIN_QUORUM_EPOCH: 1,
    END_QUORUM_EPOCH: 1,
    DESCRIBE_QUORUM: 2,
    FETCH: 17,
    FETCH_SNAPSHOT: 1,
}

# Kafka answers these before looking at the partition: top-level error, no topics
TOP_LEVEL_ERRORS = frozenset({m.INCONSISTENT_CLUSTER_ID})

FETCH_MAX_BYTES = 8 * 1024 * 1024  # Kafka's KafkaRaftClient.MAX_FETCH_SIZE_BYTES
_SIZE = struct.Struct(">i")
_MS = datetime.timedelta(milliseconds=1)

CoreRequest = m.Request | m.DescribeQuorumRequest
CoreResponse = (
    m.VoteResponse
    | m.BeginQuorumEpochResponse
    | m.EndQuorumEpochResponse
    | m.FetchResponse
    | m.FetchSnapshotResponse
    | m.DescribeQuorumResponse
)


def sized(frame: bytes) -> bytes:
    """The frame with its int32 size prefix, as it goes on the socket."""
    return _SIZE.pack(len(frame)) + frame


# ---------------------------------------------------------------- kio plumbing


@cache
def _writers(key: int, version: int, request: bool) -> tuple[type, Any, type, Any]:
    cls = (load_request_schema if request else load_response_schema)(key, version)
    hdr = cls.__header_schema__
    return cls, entity_writer(cls), hdr, entity_writer(hdr)


@cache
def _readers(key: int, version: int, request: bool) -> tuple[Any, Any]:
    cls = (load_request_schema if request else load_response_schema)(key, version)
    return entity_reader(cls.__header_schema__), entity_reader(cls)


def _encode(key: int, request: bool, header: dict[str, Any], body: dict[str, Any]) -> bytes:
    cls, write_body, hdr_cls, write_hdr = _writers(key, VERSIONS[key], request)
    out = Chunks()
    try:
        write_hdr(out, build(hdr_cls, header))
        write_body(out, build(cls, body))
    except (struct.error, ValueError, TypeError, OverflowError) as e:
        raise WireError(f"cannot encode api key {key}: {e}") from e
    return b"".join(out)


# ---------------------------------------------------------------- requests


def _partition(**kw: Any) -> dict[str, Any]:
    return {"partition_index": METADATA_PARTITION, **kw}


def _topic(partition: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"topic_name": METADATA_TOPIC, "partitions": [partition]}]


def _request_body(req: CoreRequest) -> tuple[int, dict[str, Any]]:
    match req:
        case m.VoteRequest():
            return VOTE, {
                "cluster_id": req.cluster_id,
                "voter_id": req.voter_id,
                "topics": _topic(
                    _partition(
                        replica_epoch=req.replica_epoch,
                        replica_id=req.replica_id,
                        replica_directory_id=None,
                        voter_directory_id=None,
                        last_offset_epoch=req.last_offset_epoch,
                        last_offset=req.last_offset,
                        pre_vote=req.pre_vote,
                    )
                ),
            }
        case m.BeginQuorumEpochRequest():
            return BEGIN_QUORUM_EPOCH, {
                "cluster_id": req.cluster_id,
                "voter_id": req.voter_id,
                "topics": _topic(
                    _partition(
                        voter_directory_id=None, leader_id=req.leader_id, leader_epoch=req.leader_epoch
                    )
                ),
                "leader_endpoints": [],
            }
        case m.EndQuorumEpochRequest():
            return END_QUORUM_EPOCH, {
                "cluster_id": req.cluster_id,
                "leader_endpoints": [],
                "topics": _topic(
                    _partition(
                        leader_id=req.leader_id,
                        leader_epoch=req.leader_epoch,
                        preferred_candidates=[
                            {"candidate_id": c, "candidate_directory_id": None}
                            for c in req.preferred_successors
                        ],
                    )
                ),
            }
        case m.DescribeQuorumRequest():
            return DESCRIBE_QUORUM, {"topics": _topic(_partition())}
        case m.FetchRequest():
            return FETCH, {
                "cluster_id": req.cluster_id,
                "replica_state": {"replica_id": req.replica_id, "replica_epoch": -1},
                "max_wait": req.max_wait_ms,
                "min_bytes": 0,
                "max_bytes": FETCH_MAX_BYTES,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic_id": METADATA_TOPIC_ID,
                        "partitions": [
                            {
                                "partition": METADATA_PARTITION,
                                "current_leader_epoch": req.current_leader_epoch,
                                "fetch_offset": req.fetch_offset,
                                "last_fetched_epoch": req.last_fetched_epoch,
                                "log_start_offset": -1,
                                "partition_max_bytes": FETCH_MAX_BYTES,
                                "replica_directory_id": None,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
        case m.FetchSnapshotRequest():
            return FETCH_SNAPSHOT, {
                "cluster_id": req.cluster_id,
                "replica_id": req.replica_id,
                "max_bytes": req.max_bytes,
                "topics": [
                    {
                        "name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition": METADATA_PARTITION,
                                "current_leader_epoch": req.current_leader_epoch,
                                "snapshot_id": {
                                    "end_offset": req.snapshot_id.offset,
                                    "epoch": req.snapshot_id.epoch,
                                },
                                "position": req.position,
                                "replica_directory_id": None,
                            }
                        ],
                    }
                ],
            }
    raise TypeError(f"not a quorum request: {req!r}")


def api_key_of(msg: CoreRequest | CoreResponse) -> int:
    """The Kafka api key a core request or response travels as."""
    name = type(msg).__name__.removesuffix("Request").removesuffix("Response")
    return {
        "Vote": VOTE,
        "BeginQuorumEpoch": BEGIN_QUORUM_EPOCH,
        "EndQuorumEpoch": END_QUORUM_EPOCH,
        "DescribeQuorum": DESCRIBE_QUORUM,
        "Fetch": FETCH,
        "FetchSnapshot": FETCH_SNAPSHOT,
    }[name]


def encode_request(req: CoreRequest, correlation_id: int, client_id: str = "raft-client") -> bytes:
    """Request header and body of the core request's RPC (no size prefix)."""
    key, body = _request_body(req)
    header = {
        "request_api_key": key,
        "request_api_version": VERSIONS[key],
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    return _encode(key, True, header, body)


def _one_partition(topics: Sequence[Any], name_attr: str, want: Any, index_attr: str) -> Any:
    if len(topics) != 1:
        raise WireError(f"expected one topic, got {len(topics)}")
    topic = topics[0]
    if getattr(topic, name_attr) != want:
        raise WireError(f"expected topic {want}, got {getattr(topic, name_attr)!r}")
    if len(topic.partitions) != 1:
        raise WireError(f"expected one partition, got {len(topic.partitions)}")
    p = topic.partitions[0]
    if getattr(p, index_attr) != METADATA_PARTITION:
        raise WireError(f"expected partition {METADATA_PARTITION}, got {getattr(p, index_attr)}")
    return p


def _read(key: int, version: int, request: bool, frame: bytes) -> tuple[Any, Any]:
    if not isinstance(frame, bytes):
        frame = bytes(frame)
    try:
        if request:
            frame = request_guard.check_frame(key, version, frame)
        else:
            frame = request_guard.check_frame(key, version, frame, response=True)
        read_header, read_body = _readers(key, version, request)
        header, n = read_header(frame, 0)
        body, _ = read_body(frame, n)
    except request_guard.MalformedRequest as e:
        raise WireError(f"malformed api key {key} v{version} frame: {e}") from e
    except Exception as e:  # kio's reader: bad UTF-8, unknown error code, short buffer...
        raise WireError(f"undecodable api key {key} v{version} frame: {type(e).__name__}: {e}") from e
    return header, body


def decode_request(frame: bytes) -> tuple[int, CoreRequest]:
    """(correlation id, core request) of a request frame (no size prefix)."""
    if len(frame) < 8:
        raise WireError(f"request frame of {len(frame)} bytes has no header")
    key, version = struct.unpack_from(">hh", frame, 0)
    if VERSIONS.get(key) != version:
        raise WireError(f"api key {key} v{version} is not a quorum RPC this mapping speaks")
    header, b = _read(key, version, True, frame)
    corr = int(header.correlation_id)
    if key == VOTE:
        p = _one_partition(b.topics, "topic_name", METADATA_TOPIC, "partition_index")
        return corr, m.VoteRequest(
            b.cluster_id,
            p.replica_epoch,
            p.replica_id,
            b.voter_id,
            p.last_offset_epoch,
            p.last_offset,
            p.pre_vote,
        )
    if key == BEGIN_QUORUM_EPOCH:
        p = _one_partition(b.topics, "topic_name", METADATA_TOPIC, "partition_index")
        return corr, m.BeginQuorumEpochRequest(b.cluster_id, b.voter_id, p.leader_id, p.leader_epoch)
    if key == END_QUORUM_EPOCH:
        p = _one_partition(b.topics, "topic_name", METADATA_TOPIC, "partition_index")
        return corr, m.EndQuorumEpochRequest(
            b.cluster_id,
            p.leader_id,
            p.leader_epoch,
            tuple(int(c.candidate_id) for c in p.preferred_candidates),
        )
    if key == DESCRIBE_QUORUM:
        _one_partition(b.topics, "topic_name", METADATA_TOPIC, "partition_index")
        return corr, m.DescribeQuorumRequest()
    if key == FETCH:
        p = _one_partition(b.topics, "topic_id", METADATA_TOPIC_ID, "partition")
        return corr, m.FetchRequest(
            b.cluster_id,
            b.replica_state.replica_id,
            p.current_leader_epoch,
            p.fetch_offset,
            p.last_fetched_epoch,
            b.max_wait // _MS,
        )
    p = _one_partition(b.topics, "name", METADATA_TOPIC, "partition")
    return corr, m.FetchSnapshotRequest(
        b.cluster_id,
        b.replica_id,
        p.current_leader_epoch,
        OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
        p.position,
        b.max_bytes,
    )


# ---------------------------------------------------------------- responses


def _leader_partition(resp: Any) -> dict[str, Any]:
    return _partition(error_code=resp.error_code, leader_id=resp.leader_id, leader_epoch=resp.leader_epoch)


def _response_body(resp: CoreResponse) -> tuple[int, dict[str, Any]]:
    key = api_key_of(resp)
    if key != DESCRIBE_QUORUM and resp.error_code in TOP_LEVEL_ERRORS:
        extra: dict[str, Any] = {"throttle_time": 0} if key in (FETCH, FETCH_SNAPSHOT) else {}
        field = "responses" if key == FETCH else "topics"
        return key, {"error_code": resp.error_code, field: [], **extra}
    match resp:
        case m.VoteResponse():
            return key, {
                "error_code": 0,
                "topics": _topic({**_leader_partition(resp), "vote_granted": resp.vote_granted}),
            }
        case m.BeginQuorumEpochResponse() | m.EndQuorumEpochResponse():
            return key, {"error_code": 0, "topics": _topic(_leader_partition(resp))}
        case m.DescribeQuorumResponse():

            def states(rs: Sequence[m.ReplicaState]) -> list[dict[str, Any]]:
                return [
                    {
                        "replica_id": r.replica_id,
                        "replica_directory_id": None,
                        "log_end_offset": r.log_end_offset,
                        "last_fetch_timestamp": r.last_fetch_timestamp,
                        "last_caught_up_timestamp": r.last_caught_up_timestamp,
                    }
                    for r in rs
                ]

            return key, {
                "error_code": 0,
                "error_message": None,
                "nodes": [],
                "topics": _topic(
                    {
                        **_leader_partition(resp),
                        "error_message": None,
                        "high_watermark": resp.high_watermark,
                        "current_voters": states(resp.current_voters),
                        "observers": states(resp.observers),
                    }
                ),
            }
        case m.FetchResponse():
            part: dict[str, Any] = {
                "partition_index": METADATA_PARTITION,
                "error_code": resp.error_code,
                "high_watermark": resp.high_watermark,
                "last_stable_offset": -1,
                "log_start_offset": resp.log_start_offset,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "current_leader": {"leader_id": resp.leader_id, "leader_epoch": resp.leader_epoch},
                "records": encode_entries(resp.records, resp.fetch_offset),
            }
            if resp.diverging_epoch is not None:
                part["diverging_epoch"] = {
                    "epoch": resp.diverging_epoch.epoch,
                    "end_offset": resp.diverging_epoch.offset,
                }
            if resp.snapshot_id is not None:
                part["snapshot_id"] = {"end_offset": resp.snapshot_id.offset, "epoch": resp.snapshot_id.epoch}
            return key, {
                "throttle_time": 0,
                "error_code": 0,
                "session_id": 0,
                "node_endpoints": [],
                "responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [part]}],
            }
        case m.FetchSnapshotResponse():
            return key, {
                "throttle_time": 0,
                "error_code": 0,
                "node_endpoints": [],
                "topics": [
                    {
                        "name": METADATA_TOPIC,
                        "partitions": [
                            {
                                "index": METADATA_PARTITION,
                                "error_code": resp.error_code,
                                "snapshot_id": {
                                    "end_offset": resp.snapshot_id.offset,
                                    "epoch": resp.snapshot_id.epoch,
                                },
                                "current_leader": {
                                    "leader_id": resp.leader_id,
                                    "leader_epoch": resp.leader_epoch,
                                },
                                "size": resp.size,
                                "position": resp.position,
                                "unaligned_records": resp.unaligned_records,
                            }
                        ],
                    }
                ],
            }
    raise TypeError(f"not a quorum response: {resp!r}")


def encode_response(resp: CoreResponse, correlation_id: int) -> bytes:
    """Response header and body of the core response's RPC (no size prefix). A FetchResponse's
    records are written from its `fetch_offset` (the echo of the request's offset) on."""
    key, body = _response_body(resp)
    return _encode(key, False, {"correlation_id": correlation_id}, body)


_NO_LEADER = (m.NO_LEADER, -1)


def decode_response(frame: bytes, request: CoreRequest) -> tuple[int, CoreResponse]:
    """(correlation id, core response) of a response frame (no size prefix) answering `request`,
    whose fields fill the core response's echo fields."""
    key = api_key_of(request)
    header, b = _read(key, VERSIONS[key], False, frame)
    corr = int(header.correlation_id)
    top = int(b.error_code)
    if top != m.NONE and key != DESCRIBE_QUORUM:
        return corr, top_level_error(request, top)
    if isinstance(request, m.VoteRequest):
        p = _one_partition(b.topics, "topic_name", METADATA_TOPIC, "partition_index")
        return corr, m.VoteResponse(
            int(p.error_code), p.leader_id, p.leader_epoch, p.vote_granted, request.pre_vote
        )
    if isinstance(request, m.BeginQuorumEpochRequest):
        p = _one_partition(b.topics, "topic_name", METADATA_TOPIC, "partition_index")
        return corr, m.BeginQuorumEpochResponse(int(p.error_code), p.leader_id, p.leader_epoch)
    if isinstance(request, m.EndQuorumEpochRequest):
        p = _one_partition(b.topics, "topic_name", METADATA_TOPIC, "partition_index")
        return corr, m.EndQuorumEpochResponse(int(p.error_code), p.leader_id, p.leader_epoch)
    if isinstance(request, m.DescribeQuorumRequest):
        if top != m.NONE:
            return corr, m.DescribeQuorumResponse(top, *_NO_LEADER, -1)
        p = _one_partition(b.topics, "topic_name", METADATA_TOPIC, "partition_index")

        def states(rs: Sequence[Any]) -> tuple[m.ReplicaState, ...]:
            return tuple(
                m.ReplicaState(
                    r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp
                )
                for r in rs
            )

        return corr, m.DescribeQuorumResponse(
            int(p.error_code),
            p.leader_id,
            p.leader_epoch,
            p.high_watermark,
            states(p.current_voters),
            states(p.observers),
        )
    if isinstance(request, m.FetchRequest):
        p = _one_partition(b.responses, "topic_id", METADATA_TOPIC_ID, "partition_index")
        div = p.diverging_epoch
        snap = p.snapshot_id
        return corr, m.FetchResponse(
            int(p.error_code),
            p.current_leader.leader_id,
            p.current_leader.leader_epoch,
            p.high_watermark,
            p.log_start_offset,
            decode_entries(p.records, request.fetch_offset),
            OffsetAndEpoch(div.end_offset, div.epoch) if (div.epoch, div.end_offset) != (-1, -1) else None,
            OffsetAndEpoch(snap.end_offset, snap.epoch)
            if (snap.end_offset, snap.epoch) != (-1, -1)
            else None,
            request.fetch_offset,
            request.last_fetched_epoch,
        )
    p = _one_partition(b.topics, "name", METADATA_TOPIC, "index")
    return corr, m.FetchSnapshotResponse(
        int(p.error_code),
        p.current_leader.leader_id,
        p.current_leader.leader_epoch,
        OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
        p.size,
        p.position,
        bytes(p.unaligned_records or b""),
    )


def top_level_error(request: CoreRequest, code: int) -> CoreResponse:
    """What a top-level error (no partition data) reads as: no leader known."""
    if isinstance(request, m.VoteRequest):
        return m.VoteResponse(code, *_NO_LEADER, False, request.pre_vote)
    if isinstance(request, m.BeginQuorumEpochRequest):
        return m.BeginQuorumEpochResponse(code, *_NO_LEADER)
    if isinstance(request, m.EndQuorumEpochRequest):
        return m.EndQuorumEpochResponse(code, *_NO_LEADER)
    if isinstance(request, m.FetchRequest):
        return m.FetchResponse(
            code,
            *_NO_LEADER,
            -1,
            -1,
            fetch_offset=request.fetch_offset,
            last_fetched_epoch=request.last_fetched_epoch,
        )
    if isinstance(request, m.FetchSnapshotRequest):
        return m.FetchSnapshotResponse(code, *_NO_LEADER, request.snapshot_id, -1, -1)
    return m.DescribeQuorumResponse(code, *_NO_LEADER, -1)
