"""request_guard: every advertised request version is walked exactly as kio decodes it, and no
mutation of a valid frame can reach kio's native reader with a length it cannot back."""

from __future__ import annotations

import datetime
import subprocess
import sys
import textwrap
import uuid
from dataclasses import fields
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
)

from samsa.protocol import apis
from samsa.protocol.codec import Chunks, decode_request
from samsa.protocol.request_guard import MalformedRequest, check_frame

_PRIMS: dict[str, Any] = {
    "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 3, "uint32": 3, "int64": 4,
    "uint64": 4, "float64": 1.5, "bool": True, "string": "ab", "bytes": b"xyz", "records": b"rec",
    "uuid": uuid.UUID(int=7), "timedelta_i32": datetime.timedelta(milliseconds=5),
    "timedelta_i64": datetime.timedelta(milliseconds=5),
    "datetime_i64": datetime.datetime.fromtimestamp(1, datetime.UTC),
}


def sample(cls: type, depth: int = 0) -> Any:
    """An instance with every array holding two elements and every tagged field set."""
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        kind = classify_field(f)
        ktype = f.metadata.get("kafka_type", "")
        if isinstance(kind, EntityTupleField):
            kwargs[f.name] = tuple(sample(kind.type_, depth + 1) for _ in range(2))
        elif isinstance(kind, EntityField):
            kwargs[f.name] = sample(kind.type_, depth + 1)
        elif isinstance(kind, PrimitiveTupleField):
            kwargs[f.name] = (_PRIMS[ktype], _PRIMS[ktype])
        elif ktype == "error_code":
            from kio.schema.errors import ErrorCode
            kwargs[f.name] = ErrorCode.none
        else:
            kwargs[f.name] = _PRIMS[ktype]
        if get_field_tag(f) is not None and isinstance(kind, EntityField):
            kwargs[f.name] = sample(kind.type_, depth + 1)
    return cls(**kwargs)


def frame_of(key: int, version: int) -> bytes:
    req = load_request_schema(key, version)
    hdr = req.__header_schema__
    out = Chunks()
    entity_writer(hdr)(out, hdr(request_api_key=key, request_api_version=version,
                                 correlation_id=9, client_id="guard"))
    entity_writer(req)(out, sample(req))
    return b"".join(out)


ADVERTISED = [(k, v) for k, (lo, hi) in sorted(apis.SUPPORTED.items()) for v in range(lo, hi + 1)]


@pytest.mark.parametrize(("key", "version"), ADVERTISED)
def test_valid_frames_pass_unchanged(key: int, version: int) -> None:
    frame = frame_of(key, version)
    assert check_frame(key, version, frame) is frame
    decode_request(key, version, frame)  # and kio agrees it is valid


def test_metadata_frame_claiming_4g_topics_is_malformed() -> None:
    # the fuzzer's 23-byte frame (without its size prefix): compact topics count 0xFFFFFFFF
    frame = bytes.fromhex("0003000c000000010003726f6200ffffffff0f")
    with pytest.raises(MalformedRequest, match="topics"):
        decode_request(3, 12, frame)


def test_null_in_non_nullable_array_is_malformed() -> None:
    # Produce v3 (legacy): transactional_id null, acks, timeout, topic_data = null (-1)
    import struct
    frame = struct.pack(">hhih", 0, 3, 1, -1) + struct.pack(">hhii", -1, 1, 1000, -1)
    with pytest.raises(MalformedRequest, match="non-nullable field topic_data"):
        check_frame(0, 3, frame)


def test_string_over_32767_bytes_is_malformed() -> None:
    # DescribeConfigs v4 (flexible): one resource whose name is a 40,000-byte compact string
    import struct

    from samsa.protocol.codec import uvarint
    name = b"n" * 40000
    body = b"\x02" + b"\x02" + uvarint(len(name) + 1) + name + b"\x00" + b"\x00" + b"\x00\x00\x00"
    hdr = struct.pack(">hhih", 32, 4, 1, 1) + b"c" + b"\x00"
    with pytest.raises(MalformedRequest, match="invalid length 40000"):
        check_frame(32, 4, hdr + body)


def test_unknown_tagged_fields_are_removed_before_decoding() -> None:
    # ApiVersions v3 with an unknown tag (id 99, 3 bytes) in the body's tagged fields
    frame = frame_of(18, 3)
    assert frame.endswith(b"\x00")
    mutated = frame[:-1] + b"\x01" + b"\x63\x03abc"
    cleaned = check_frame(18, 3, mutated)
    assert cleaned == frame
    decode_request(18, 3, mutated)  # kio alone raises KeyError on tag 99


_SWEEP = textwrap.dedent("""
    import sys
    from tests.unit.test_request_guard import ADVERTISED, frame_of
    from samsa.protocol.codec import decode_request
    patterns = [b"\\xff\\xff\\xff\\xff", b"\\x7f\\xff\\xff\\xff", b"\\xff\\xff\\xff\\x0f",
                b"\\xff\\xff", b"\\x80", b"\\x00"]
    tried = 0
    for key, version in ADVERTISED[int(sys.argv[1])::int(sys.argv[2])]:
        frame = frame_of(key, version)
        for i in range(8, len(frame)):
            for p in patterns:
                mutated = frame[:i] + p + frame[i + len(p):]
                for cut in (len(mutated), i + len(p)):
                    tried += 1
                    try:
                        decode_request(key, version, mutated[:cut])
                    except Exception:
                        pass
    print("tried", tried)
""")


@pytest.mark.parametrize("shard", range(2))
def test_no_mutation_aborts_the_decoder(shard: int) -> None:
    """Every 4-, 2- and 1-byte overwrite of every position of every advertised request, whole and
    truncated, decoded in a child process: an allocation abort in kio would kill the child."""
    proc = subprocess.run([sys.executable, "-c", _SWEEP, str(shard), "2"], capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split()[-1]) > 10_000


def test_client_id_with_invalid_utf8_is_repaired_not_refused() -> None:
    """Kafka decodes the client id leniently (replacement characters); so does the guard."""
    frame = frame_of(18, 3)
    good = b"guard"
    assert good in frame
    bad = b"\xff\xfe\xc3("
    mutated = frame.replace(b"\x00\x05" + good, b"\x00\x04" + bad, 1)
    header, _ = decode_request(18, 3, mutated)
    assert header.client_id == "\ufffd\ufffd\ufffd("


def test_a_frame_of_too_many_array_elements_is_refused_before_decoding() -> None:
    """A 600 KB DeleteTopics v1 frame naming 300,000 empty topic names is valid by every length,
    but would cost the broker 300,000 walk steps and Python objects: refused. 150,000 pass."""
    import struct

    from samsa.protocol.request_guard import MAX_ELEMENTS

    def delete_topics(n: int) -> bytes:
        hdr = struct.pack(">hhih", 20, 1, 1, 1) + b"c"
        return hdr + struct.pack(">i", n) + b"\x00\x00" * n + struct.pack(">i", 1000)

    assert MAX_ELEMENTS < 300_000
    with pytest.raises(MalformedRequest, match="array elements"):
        check_frame(20, 1, delete_topics(300_000))
    ok = delete_topics(150_000)
    assert check_frame(20, 1, ok) is ok
