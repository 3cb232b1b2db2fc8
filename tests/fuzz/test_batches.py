"""Malformed record batches in Produce: the batch header and CRC32C are valid, the contents are not.

Kafka validates every record of a produced batch (LogValidator): a record whose lengths or varints
do not add up, a header count out of range, a compressed payload that does not decompress, a
record count or lastOffsetDelta that does not match the records: each gets CORRUPT_MESSAGE (2) or
INVALID_RECORD (87), and nothing is appended. Checked on three topics, because each takes another
path through the broker: default (batches appended verbatim), compacted (keys are read) and
compression.type=gzip (batches are recompressed).
"""

from __future__ import annotations

import gzip
import os
import random
import struct
import time
import zlib
from socket import socket

import cramjam
import crc32c
import lz4.frame
import pytest
import zstandard
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.serial import entity_reader

from samsa.protocol.records import write_varint
from samsa.testing import SamsaBroker

from ._support import Health, connect, encode_request, produce_request, read_answer, rss_mb

pytestmark = pytest.mark.timeout(300)

TOPICS = {"fuzz-batch-plain": {}, "fuzz-batch-compact": {"cleanup.policy": "compact"},
          "fuzz-batch-gzip": {"compression.type": "gzip"}}
NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
XERIAL = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def zz(n: int) -> bytes:
    """Signed varint (zigzag), as in records."""
    out = bytearray()
    write_varint(out, n)
    return bytes(out)


def record(key: bytes | None = b"k", value: bytes | None = b"v", headers: bytes = zz(0),
           offset_delta: int = 0, length: int | None = None, raw_key_len: bytes | None = None,
           raw_value_len: bytes | None = None) -> bytes:
    """One record; any length can be overridden with a raw (possibly wrong) encoding."""
    body = b"\x00" + zz(0) + zz(offset_delta)
    body += raw_key_len if raw_key_len is not None else (zz(-1) if key is None else zz(len(key)))
    body += key or b""
    body += raw_value_len if raw_value_len is not None else \
        (zz(-1) if value is None else zz(len(value)))
    body += value or b""
    body += headers
    return zz(len(body) if length is None else length) + body


def batch(payload: bytes, *, count: int, last_offset_delta: int | None = None,
          codec: int = NONE) -> bytes:
    """A RecordBatch v2 around `payload` (already compressed, or not): header fields and CRC32C are
    right, whatever the payload holds."""
    now = int(time.time() * 1000)
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = struct.pack(">hiqqqhii", codec, lod, now, now, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def compress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:
        block = bytes(cramjam.snappy.compress_raw(data))
        return XERIAL + struct.pack(">i", len(block)) + block
    if codec == LZ4:
        return bytes(lz4.frame.compress(data))
    if codec == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    return data


def bad_records() -> dict[str, tuple[bytes, int, int | None]]:
    """name -> (records payload, record count, lastOffsetDelta or None for count-1)."""
    ok = record()
    return {
        "record length negative": (record(length=-5), 1, None),
        "record length zero": (record(length=0), 1, None),
        "record length past end": (record(length=1000), 1, None),
        "record length 2^31-1": (record(length=2**31 - 1), 1, None),
        "key length past end": (record(raw_key_len=zz(500)), 1, None),
        "key length -2": (record(raw_key_len=zz(-2)), 1, None),
        "value length past end": (record(raw_value_len=zz(10**6)), 1, None),
        "value length -7": (record(raw_value_len=zz(-7)), 1, None),
        "header count 2^31-1": (record(headers=zz(2**31 - 1)), 1, None),
        "header count -3": (record(headers=zz(-3)), 1, None),
        "header count 1, no header": (record(headers=zz(1)), 1, None),
        "header key length past end": (record(headers=zz(1) + zz(300) + b"hk" + zz(1) + b"v"), 1,
                                       None),
        "header key length -1": (record(headers=zz(1) + zz(-1) + zz(1) + b"v"), 1, None),
        "header value length -2": (record(headers=zz(1) + zz(2) + b"hk" + zz(-2)), 1, None),
        "unterminated varint": (b"\xff\xff\xff", 1, None),
        "varint longer than 10 bytes": (b"\xff" * 11 + b"\x01" + ok, 1, None),
        "record count 2, one record": (ok, 2, None),
        "record count 1, two records": (ok + record(offset_delta=1), 1, None),
        "lastOffsetDelta 5, count 1": (ok, 1, 5),
        "lastOffsetDelta 0, count 3": (ok + record(offset_delta=1) + record(offset_delta=2), 3, 0),
        "offset deltas not consecutive": (ok + record(offset_delta=7), 2, None),
        "count 0x7FFFFFFF": (ok, 0x7FFFFFFF, None),
        "count 0": (b"", 0, None),
        "count -1": (ok, -1, None),
        "trailing garbage after records": (ok + b"\x00\x01\x02", 1, None),
        "empty payload, count 1": (b"", 1, None),
    }


def bad_streams(rng: random.Random) -> dict[str, tuple[bytes, int]]:
    """name -> (compressed payload that does not decompress, codec)."""
    good = record()
    junk = bytes(rng.getrandbits(8) for _ in range(200))
    gz = gzip.compress(good * 20)
    lz = bytes(lz4.frame.compress(good * 20))
    zs = zstandard.ZstdCompressor().compress(good * 20)
    raw = bytes(cramjam.snappy.compress_raw(good * 20))
    corrupt_deflate = bytearray(gz)
    corrupt_deflate[12:20] = b"\xff" * 8
    bad_lz_checksum = bytearray(lz)
    bad_lz_checksum[-5] ^= 0xFF
    return {
        "gzip: junk": (junk, GZIP),
        "gzip: empty": (b"", GZIP),
        "gzip: truncated": (gz[: len(gz) // 2], GZIP),
        "gzip: header only": (gz[:10], GZIP),
        "gzip: corrupt deflate": (bytes(corrupt_deflate), GZIP),
        "gzip: bad trailer crc": (gz[:-8] + struct.pack("<II", 0, len(good) * 20), GZIP),
        "gzip: zlib not gzip": (zlib.compress(good), GZIP),
        "snappy: junk": (junk, SNAPPY),
        "snappy: empty": (b"", SNAPPY),
        "snappy raw: truncated": (raw[: len(raw) // 2], SNAPPY),
        "snappy xerial: header only": (XERIAL, SNAPPY),
        "snappy xerial: magic only": (XERIAL[:8], SNAPPY),
        "snappy xerial: block length 2^31-1": (XERIAL + struct.pack(">i", 2**31 - 1) + raw, SNAPPY),
        "snappy xerial: block length -1": (XERIAL + struct.pack(">i", -1) + raw, SNAPPY),
        "snappy xerial: block past end": (XERIAL + struct.pack(">i", len(raw) + 50) + raw, SNAPPY),
        "snappy xerial: truncated length": (XERIAL + b"\x00\x00", SNAPPY),
        "snappy xerial: junk block": (XERIAL + struct.pack(">i", len(junk)) + junk, SNAPPY),
        "lz4: junk": (junk, LZ4),
        "lz4: empty": (b"", LZ4),
        "lz4: truncated": (lz[: len(lz) // 2], LZ4),
        "lz4: bad content checksum": (bytes(bad_lz_checksum), LZ4),
        "lz4: magic only": (lz[:4], LZ4),
        "zstd: junk": (junk, ZSTD),
        "zstd: empty": (b"", ZSTD),
        "zstd: truncated": (zs[: len(zs) // 2], ZSTD),
        "zstd: magic only": (zs[:4], ZSTD),
        # 256 MiB of zeros in a few KiB: the records are invalid (record length 0) at the first
        # byte; a validator that inflates everything first needs 256 MiB for nothing.
        "zstd: bomb of zeros": (zstandard.ZstdCompressor().compress(bytes(256 << 20)), ZSTD),
        "gzip: bomb of zeros": (gzip.compress(bytes(64 << 20), compresslevel=1), GZIP),
    }


def cases(rng: random.Random) -> list[tuple[str, bytes]]:
    out = []
    for name, (payload, count, lod) in bad_records().items():
        out.append((name, batch(payload, count=count, last_offset_delta=lod)))
        for codec in (GZIP, SNAPPY, LZ4, ZSTD):
            if count > 0 and payload:  # the same bad records, validly compressed
                out.append((f"{name} [codec {codec}]",
                            batch(compress(codec, payload), count=count, last_offset_delta=lod,
                                  codec=codec)))
    for name, (payload, codec) in bad_streams(rng).items():
        out.append((name, batch(payload, count=20, codec=codec)))
    # a batch that moves the log end by 2^31 when wrongly accepted goes last: it would change what
    # the cases after it meet
    return sorted(out, key=lambda c: "0x7FFFFFFF" in c[0])


class Conn:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.sock: socket | None = None
        self.corr = 0

    def call(self, key: int, version: int, frame_of: object) -> object | None:
        """Send, read and decode one answer; None if the broker closed the connection."""
        if self.sock is None:
            self.sock = connect(self.bootstrap, timeout=30)
        self.corr += 1
        data = frame_of(self.corr)  # type: ignore[operator]
        self.sock.sendall(data)
        ans = read_answer(self.sock, 30)
        if ans is None:
            self.sock.close()
            self.sock = None
            return None
        resp_cls = load_response_schema(key, version)
        hdr, n = entity_reader(resp_cls.__header_schema__)(ans, 0)
        assert hdr.correlation_id == self.corr
        return entity_reader(resp_cls)(ans, n)[0]

    def log_end(self, topic: str) -> int:
        resp = self.call(2, 7, lambda c: encode_request(2, 7, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
            correlation_id=c))
        assert resp is not None
        p = resp.topics[0].partitions[0]  # type: ignore[attr-defined]
        assert int(p.error_code) == 0
        return int(p.offset)


def _create(broker: SamsaBroker, suffix: str) -> list[str]:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = a.create_topics([NewTopic(t + suffix, 1, 1, config=c) for t, c in TOPICS.items()])
    for f in fs.values():
        f.result(15)
    return [t + suffix for t in TOPICS]


@pytest.fixture(scope="module")
def batch_topics(fuzz_broker: SamsaBroker) -> list[str]:
    return _create(fuzz_broker, "")


def test_malformed_batches_are_rejected_and_not_stored(fuzz_broker: SamsaBroker, health: Health,
                                                       batch_topics: list[str],
                                                       rng: random.Random) -> None:
    conn = Conn(fuzz_broker.bootstrap)
    failures: list[tuple[str, str, str]] = []
    first_hex: dict[str, str] = {}
    peak = 0.0
    all_cases = cases(rng)
    for topic in batch_topics:
        # a good batch first: the topic accepts valid data through this very path
        good = batch(record() + record(offset_delta=1), count=2)
        resp = conn.call(0, 9, lambda c, t=topic, g=good: produce_request(t, g, correlation_id=c))
        assert resp is not None
        assert int(resp.responses[0].partition_responses[0].error_code) == 0  # type: ignore[attr-defined]
        for name, data in all_cases:
            before = conn.log_end(topic)
            try:
                resp = conn.call(0, 9, lambda c, t=topic, d=data: produce_request(t, d,
                                                                                  correlation_id=c))
            except TimeoutError:
                resp = "timeout"
            proc = fuzz_broker.proc
            if proc is None or proc.poll() is not None:
                failures.append((topic, name, "BROKER DIED"))
                first_hex.setdefault(f"{topic} died", f"{name}: {data[:300].hex()}")
                break
            peak = max(peak, rss_mb(health.pid))
            if resp is None or resp == "timeout":
                failures.append((topic, name, str(resp or "connection closed")))
                first_hex.setdefault(f"{topic} {resp or 'closed'}", f"{name}: {data[:200].hex()}")
                conn = Conn(fuzz_broker.bootstrap)
                continue
            code = int(resp.responses[0].partition_responses[0].error_code)  # type: ignore[attr-defined]
            after = conn.log_end(topic)
            if code not in (2, 87) or after != before:
                failures.append((topic, name, f"error {code}, log end +{after - before}"))
                first_hex.setdefault(f"{topic} code {code}", f"{name}: {data[:200].hex()}")
    print(f"malformed batches: {len(all_cases)} cases x {len(batch_topics)} topics, "
          f"peak RSS {peak:.0f} MB, {len(failures)} failures")
    examples = "\n".join(f"  first {k}: {v}" for k, v in first_hex.items())
    by_case: dict[str, list[str]] = {}
    for topic, name, what in failures:
        by_case.setdefault(name, []).append(f"{topic.removeprefix('fuzz-batch-')} {what}")
    summary = "\n".join(f"  {name}: {'; '.join(v)}" for name, v in by_case.items())
    assert not failures, f"{len(failures)} failures in {len(by_case)} cases:\n{summary}" + \
        f"\nexamples (records field, hex):\n{examples}"
    health.check("malformed batches")


def test_good_batches_of_every_codec_still_accepted(fuzz_broker: SamsaBroker,
                                                    health: Health) -> None:
    """The other side of the validator: valid batches of every codec, with headers, null keys and
    values, a header key that is not UTF-8, are accepted and appended (count matches)."""
    conn = Conn(fuzz_broker.bootstrap)
    # the last record's second header key is not UTF-8: Kafka reads header keys with Java's
    # lenient decoding (replacement characters) and accepts the batch
    recs = record() + record(key=None, value=None, offset_delta=1) + \
        record(key=b"k" * 300, value=os.urandom(5000), offset_delta=2,
               headers=zz(2) + zz(2) + b"h1" + zz(-1) + zz(2) + b"\xff\xfe" + zz(3) + b"abc")
    for topic in _create(fuzz_broker, "-good"):
        for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
            if topic.startswith("fuzz-batch-compact"):
                continue  # the null key is refused there, rightly
            before = conn.log_end(topic)
            data = batch(compress(codec, recs), count=3, codec=codec)
            resp = conn.call(0, 9, lambda c, t=topic, d=data: produce_request(t, d, correlation_id=c))
            assert resp is not None
            code = int(resp.responses[0].partition_responses[0].error_code)  # type: ignore[attr-defined]
            assert code == 0, f"{topic} codec {codec}: error {code}"
            assert conn.log_end(topic) == before + 3
    health.check("good batches")
