"""RecordBatch v2 view, validation and record encoding."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.protocol import codecs
from samsa.protocol.batch import (
    InvalidBatch,
    read_header,
    recompress,
    set_base_offset,
    set_log_append_time,
    validate_single_batch,
)
from samsa.protocol.records import decode_batch, encode_batch


def _recs(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]:
    return [(f"k{i}".encode(), f"v{i}".encode() * 3, [("h", b"x")], 1_700_000_000_000 + i)
            for i in range(n)]


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
def test_roundtrip_every_codec(codec: int) -> None:
    b = encode_batch(_recs(50), compression=codec)
    h = validate_single_batch(b)
    assert h.records_count == 50 and h.compression == codec
    out = decode_batch(b)
    assert [r.key for r in out] == [f"k{i}".encode() for i in range(50)]
    assert out[7].headers == [("h", b"x")] and out[7].timestamp == 1_700_000_000_007


def test_patch_base_offset_keeps_crc_valid() -> None:
    b = bytearray(encode_batch(_recs(3)))
    set_base_offset(b, 1234)
    assert validate_single_batch(bytes(b)).base_offset == 1234  # CRC does not cover baseOffset
    assert [r.offset for r in decode_batch(bytes(b))] == [1234, 1235, 1236]


def test_log_append_time_rewrites_timestamp_and_crc() -> None:
    b = bytearray(encode_batch(_recs(3)))
    set_log_append_time(b, 42)
    h = validate_single_batch(bytes(b))
    assert h.attributes & 0x08 and h.max_timestamp == 42
    assert {r.timestamp for r in decode_batch(bytes(b))} == {42}


def test_recompress_changes_codec_keeps_records() -> None:
    b = encode_batch(_recs(20), compression=codecs.GZIP)
    r = recompress(b, codecs.ZSTD)
    assert validate_single_batch(bytes(r)).compression == codecs.ZSTD
    assert [x.value for x in decode_batch(bytes(r))] == [x.value for x in decode_batch(b)]


def test_rejections_carry_kafka_codes() -> None:
    good = encode_batch(_recs(2))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(InvalidBatch) as e:
        validate_single_batch(bytes(bad_crc))
    assert e.value.code == 2  # CORRUPT_MESSAGE
    old_magic = bytearray(good)
    old_magic[16] = 1
    with pytest.raises(InvalidBatch) as e:
        validate_single_batch(bytes(old_magic))
    assert e.value.code == 87  # INVALID_RECORD
    with pytest.raises(InvalidBatch) as e:
        validate_single_batch(good + good)
    assert e.value.code == 87  # exactly one batch per partition in Produce v3+
    with pytest.raises(InvalidBatch) as e:
        validate_single_batch(good[:-5])
    assert e.value.code == 2
    wrong_count = bytearray(good)
    struct.pack_into(">i", wrong_count, 57, 5)
    import crc32c
    struct.pack_into(">I", wrong_count, 17, crc32c.crc32c(bytes(wrong_count[21:])))
    with pytest.raises(InvalidBatch) as e:
        validate_single_batch(bytes(wrong_count))
    assert e.value.code == 87


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_random_bytes_never_crash_validation(data: bytes) -> None:
    try:
        h = validate_single_batch(data)
    except InvalidBatch as e:
        assert e.code in (2, 87)
    else:
        assert read_header(data).records_count == h.records_count
