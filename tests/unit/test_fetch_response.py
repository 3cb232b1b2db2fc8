"""The hand-written Fetch response encoder must produce exactly kio's bytes (slices materialised)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from samsa.protocol import apis
from samsa.protocol.codec import encode_response
from samsa.protocol.fetch_response import FetchPartition, encode_fetch_response


class FakeSlice:
    """Stands for record bytes the server would send with sendfile."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.length = len(data)


def materialise(chunks: list[Any]) -> bytes:
    return b"".join(c.data if isinstance(c, FakeSlice) else c for c in chunks)


ALPHA = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
BETA = uuid.UUID("12345678-1234-5678-1234-567812345678")
# every Fetch version ApiVersions advertises (v4-v17, as Kafka 4.0)
VERSIONS = range(apis.SUPPORTED[apis.FETCH][0], apis.SUPPORTED[apis.FETCH][1] + 1)
BIG = bytes(range(256)) * 200  # 51200 bytes: above the inline limit, sent as its own chunk


def sample() -> list[tuple[str, uuid.UUID, list[FetchPartition]]]:
    return [
        ("alpha", ALPHA, [
            FetchPartition(0, 0, 120, 118, 3, None, FakeSlice(b"\x01" * 300)),
            FetchPartition(2, 1, 50, 50, 10, None, b""),                       # OFFSET_OUT_OF_RANGE
            FetchPartition(5, 0, 2**40, 2**40 - 7, 0, [(77, 5), (2**50, 9)], FakeSlice(BIG)),
            FetchPartition(7, 0, 9, 9, 0, [], b""),                            # read_committed, empty
        ]),
        ("beta-topic", BETA, [
            FetchPartition(1, 0, 3, 3, 0, None, b"\x02" * 40),                 # inline bytes
            FetchPartition(4, 0, 8, 8, 0, [(1, 2)], BIG),                      # large bytes
        ]),
        ("gone", uuid.UUID(int=0), [
            FetchPartition(0, 100, -1, -1, -1, None, b""),                     # UNKNOWN_TOPIC_ID
        ]),
    ]


def as_dict(version: int, topics: list[tuple[str, uuid.UUID, list[FetchPartition]]], error_code: int,
            session_id: int) -> dict[str, Any]:
    responses = []
    for name, tid, parts in topics:
        out = []
        for p in parts:
            records = p.records.data if isinstance(p.records, FakeSlice) else p.records
            aborted = None if p.aborted is None else [
                {"producer_id": pid, "first_offset": first} for pid, first in p.aborted]
            out.append({"partition_index": p.index, "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset,
                        "log_start_offset": p.log_start_offset, "aborted_transactions": aborted,
                        "preferred_read_replica": p.preferred_read_replica, "records": records})
        responses.append({"topic": name, "topic_id": tid, "partitions": out})
    return {"throttle_time": 0, "error_code": error_code, "session_id": session_id,
            "responses": responses}


def ours(version: int, topics: list[tuple[str, uuid.UUID, list[FetchPartition]]], error_code: int = 0,
         session_id: int = 0) -> list[Any]:
    keyed: list[tuple[str | uuid.UUID | None, list[FetchPartition]]] = [
        (tid if version >= 13 else name, parts) for name, tid, parts in topics]
    return encode_fetch_response(version, 4242, keyed, error_code=error_code, session_id=session_id)


@pytest.mark.parametrize("version", VERSIONS)
def test_matches_kio_for_every_version(version: int) -> None:
    topics = sample()
    mine = ours(version, topics, session_id=123456789)
    ref = encode_response(1, version, 4242, as_dict(version, topics, 0, 123456789))
    assert materialise(mine) == b"".join(ref)
    # slices are passed through, not copied
    assert sum(isinstance(c, FakeSlice) for c in mine) == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_top_level_error_and_empty_responses(version: int) -> None:
    mine = ours(version, [], error_code=70, session_id=0)  # FETCH_SESSION_ID_NOT_FOUND
    ref = encode_response(1, version, 4242, as_dict(version, [], 70, 0))
    assert materialise(mine) == b"".join(ref)


@pytest.mark.parametrize("version", VERSIONS)
def test_null_records_and_empty_partition_list(version: int) -> None:
    topics = [("t", ALPHA, []), ("u", BETA, [FetchPartition(3, 0, 1, 1, 0, None, None)])]
    mine = ours(version, topics, session_id=1)
    ref = encode_response(1, version, 4242, as_dict(version, topics, 0, 1))
    assert materialise(mine) == b"".join(ref)


def test_size_prefix_counts_slices() -> None:
    chunks = ours(16, sample())
    body = materialise(chunks)
    assert int.from_bytes(body[:4], "big") == len(body) - 4
