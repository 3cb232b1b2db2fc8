"""Known tagged fields: the walk and kio's native reader must agree on where each one ends."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
import uuid

import pytest

from samsa.protocol.codec import decode_request
from samsa.protocol.request_guard import MalformedRequest, check_frame
from tests.wire import Wire

_DIR = b"\xab" * 16


def _fetch_v17() -> tuple[bytes, int]:
    """A Fetch v17 frame whose first partition carries replica_directory_id (tag 0, 16 bytes),
    and the index of that uuid in the frame."""
    def part(i: int, d: uuid.UUID | None) -> dict:
        return {"partition": i, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20,
                "replica_directory_id": d}
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": uuid.UUID(int=5),
                        "partitions": [part(0, uuid.UUID(bytes=_DIR)), part(1, None)]}],
            "forgotten_topics_data": [], "rack_id": ""}
    w = Wire.__new__(Wire)
    w.corr = 0
    frame = w.encode(1, 17, body)[4:]
    i = frame.index(_DIR)
    assert frame[i - 3:i] == b"\x01\x00\x10"  # one tagged field: tag 0, size 16
    return frame, i


# What kio reads after the uuid when it ignores the declared size: a whole second partition, the
# end of the topic, then forgotten_topics_data claiming 2^32 - 2 entries (kio reserves them: abort).
_SMUGGLED = struct.pack(">iiqiqi", 1, -1, 0, -1, -1, 1 << 20) + b"\x00\x00" + b"\xff\xff\xff\xff\x0f"


def _oversized_tag() -> bytes:
    frame, i = _fetch_v17()
    return frame[:i - 1] + bytes([16 + len(_SMUGGLED)]) + frame[i:i + 16] + _SMUGGLED + frame[i + 16:]


def test_well_sized_known_tag_passes() -> None:
    frame, _ = _fetch_v17()
    assert check_frame(1, 17, frame) is frame
    _, body = decode_request(1, 17, frame)
    assert body.topics[0].partitions[0].replica_directory_id == uuid.UUID(bytes=_DIR)


@pytest.mark.parametrize("extra", [1, len(_SMUGGLED)])
def test_known_tag_whose_size_exceeds_its_value_is_malformed(extra: int) -> None:
    frame, i = _fetch_v17()
    pad = _SMUGGLED[:extra]
    bad = frame[:i - 1] + bytes([16 + extra]) + frame[i:i + 16] + pad + frame[i + 16:]
    with pytest.raises(MalformedRequest, match="tagged field 0 declares"):
        check_frame(1, 17, bad)


def test_oversized_known_tag_does_not_abort_the_decoder() -> None:
    """In a child process: before the fix the walk skipped the smuggled bytes and kio aborted."""
    code = textwrap.dedent("""
        from tests.unit.test_request_guard_tags import _oversized_tag
        from samsa.protocol.codec import decode_request
        try:
            decode_request(1, 17, _oversized_tag())
        except Exception as e:
            print(type(e).__name__)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "MalformedRequest"
