"""The Spark source's remote-tier reader (samsa/spark/remote.py) on segments in moto's S3 over
real HTTP: rows as a consumer sees them (compression, LogAppendTime, headers, control batches,
aborted transactions under read_committed, a start inside the segment through the offset index)
and a corrupted object refused by the batch CRC check."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.protocol import codecs
from samsa.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, encode_batch, encode_control_batch
from samsa.storage.remote.metadata import encode_event
from samsa.storage.remote.rsm import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from samsa.testing.s3 import MotoS3, aws_env

pytest.importorskip("pyspark")
from samsa.spark.remote import (  # noqa: E402
    CorruptRemoteData,
    RemoteSegmentRange,
    read_remote_rows,
    remote_options,
)

BUCKET = "samsa-spark-remote"
T0 = 1_700_000_000_000
PID_OK, PID_ABORT = 7000, 7001


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    with MotoS3() as server, aws_env(server.env):
        server.create_bucket(BUCKET)
        yield server


def _segment(base: int) -> tuple[bytes, bytes, bytes, list[dict[str, Any]]]:
    """A segment's log, offset index, txn index and the rows a read_uncommitted consumer sees
    (rows of aborted batches flagged)."""
    batches: list[bytes] = []
    rows: list[dict[str, Any]] = []
    index = bytearray()
    off = base

    def add(batch: bytes, recs: list[tuple[bytes | None, bytes | None, list[Any], int]],
            ts_type: int = 0, aborted: bool = False, control: bool = False,
            log_append_ts: int | None = None) -> None:
        nonlocal off
        pos = sum(len(b) for b in batches)
        index.extend(struct.pack(">ii", off - base, pos))
        batches.append(batch)
        if not control:
            for i, (k, v, h, ts) in enumerate(recs):
                rows.append({"key": k, "value": v, "offset": off + i,
                             "ts": log_append_ts if log_append_ts is not None else ts,
                             "type": ts_type, "headers": [(a, b) for a, b in h] or None,
                             "aborted": aborted})
        off += len(recs)

    recs = [(b"k%d" % i, b"v%d" % i, [("h", b"x")] if i % 2 else [], T0 + i) for i in range(5)]
    add(encode_batch(recs, base_offset=off), recs)
    recs = [(None, b"z" * 300, [("n", None)], T0 + 10 + i) for i in range(4)]
    add(encode_batch(recs, base_offset=off, compression=codecs.GZIP), recs)
    recs = [(b"la", b"log-append", [], T0 + 20)]
    b = bytearray(encode_batch(recs, base_offset=off, attributes_extra=0x08))
    struct.pack_into(">q", b, 35, T0 + 99)  # the broker's LogAppendTime
    import crc32c

    from samsa.protocol.batch import ATTR_OFFSET, CRC_OFFSET
    struct.pack_into(">I", b, CRC_OFFSET, crc32c.crc32c(bytes(b[ATTR_OFFSET:])))
    add(bytes(b), recs, ts_type=1, log_append_ts=T0 + 99)
    first_aborted = off
    recs = [(b"t", b"aborted-%d" % i, [], T0 + 30 + i) for i in range(3)]
    add(encode_batch(recs, base_offset=off, producer_id=PID_ABORT, producer_epoch=0,
                     base_sequence=0, attributes_extra=0x10), recs, aborted=True)
    recs = [(b"t", b"committed-%d" % i, [], T0 + 40 + i) for i in range(2)]
    add(encode_batch(recs, base_offset=off, producer_id=PID_OK, producer_epoch=0,
                     base_sequence=0, attributes_extra=0x10), recs)
    last_aborted = off
    ctl = [(b"", b"", [], T0 + 50)]
    add(_at(encode_control_batch(PID_ABORT, 0, CONTROL_ABORT, 1, T0 + 50), off), ctl, control=True)
    add(_at(encode_control_batch(PID_OK, 0, CONTROL_COMMIT, 1, T0 + 51), off), ctl, control=True)
    recs = [(b"tail%d" % i, b"after", [], T0 + 60 + i) for i in range(6)]
    add(encode_batch(recs, base_offset=off, compression=codecs.ZSTD), recs)
    txn = struct.pack(">qqqq", PID_ABORT, first_aborted, last_aborted, first_aborted)
    return b"".join(batches), bytes(index), txn, rows


def _at(batch: bytes, offset: int) -> bytes:
    return struct.pack(">q", offset) + batch[8:]


def _upload(moto: MotoS3, tmp: Path, base: int, log_bytes: bytes | None = None
            ) -> tuple[RemoteLogSegmentMetadata, Any, list[dict[str, Any]]]:
    data, index, txn, rows = _segment(base)
    if log_bytes is not None:
        data = log_bytes
    props = {"samsa.remote.read": "true", "remote.log.storage.manager.class.name": "s3",
             "rsm.config.bucket": BUCKET, "rsm.config.endpoint.url": moto.endpoint,
             "rsm.config.region": "us-east-1"}
    opts = remote_options(props)
    assert opts is not None
    tp = TopicIdPartition(uuid.uuid4(), "backfill", 0)
    end = rows[-1]["offset"]
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(tp), base, end, T0 + 99, 1, 0,
                                    len(data), ((0, base),), has_txn_index=True)
    (tmp / "s.log").write_bytes(data)
    (tmp / "s.index").write_bytes(index)
    (tmp / "s.timeindex").write_bytes(b"")
    rsm = opts.open()
    rsm.copy_log_segment_data(meta, LogSegmentData(tmp / "s.log", tmp / "s.index",
                                                   tmp / "s.timeindex", txn, None, b"0\n1\n0 0\n"))
    rsm.close()
    return meta, opts, rows


def _rng(meta: RemoteLogSegmentMetadata, start: int, end: int) -> RemoteSegmentRange:
    return RemoteSegmentRange(meta.tp.topic, meta.tp.partition, start, end, encode_event(meta)[1])


def _simple(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["offset"], r["key"], r["value"], int(r["timestamp"].timestamp() * 1000),
             r["timestampType"], [(h["key"], h["value"]) for h in r["headers"]]
             if r["headers"] else None) for r in rows]


def _expected(rows: list[dict[str, Any]], start: int, end: int, committed: bool
              ) -> list[tuple[Any, ...]]:
    return [(r["offset"], r["key"], r["value"], r["ts"], r["type"], r["headers"]) for r in rows
            if start <= r["offset"] < end and not (committed and r["aborted"])]


def test_rows_match_what_a_consumer_sees(moto: MotoS3, tmp_path: Path) -> None:
    meta, opts, rows = _upload(moto, tmp_path, 1000)
    end = meta.end_offset + 1
    got = read_remote_rows(opts, _rng(meta, 1000, end))
    assert _simple(got) == _expected(rows, 1000, end, False)
    assert {r["topic"] for r in got} == {"backfill"} and {r["partition"] for r in got} == {0}
    committed = read_remote_rows(opts, _rng(meta, 1000, end), read_committed=True)
    assert _simple(committed) == _expected(rows, 1000, end, True)
    assert len(committed) == len(got) - 3  # the aborted transaction's three records
    # a range starting inside a compressed batch and ending inside another
    assert _simple(read_remote_rows(opts, _rng(meta, 1007, 1013))) == _expected(rows, 1007, 1013,
                                                                               False)


def test_corrupted_log_object_is_refused(moto: MotoS3, tmp_path: Path) -> None:
    data = bytearray(_segment(0)[0])
    data[len(data) // 2] ^= 0x40  # bit rot in the middle of a batch
    meta, opts, _rows = _upload(moto, tmp_path, 0, bytes(data))
    with pytest.raises(CorruptRemoteData, match="CRC"):
        read_remote_rows(opts, _rng(meta, 0, meta.end_offset + 1))


def test_remote_read_options() -> None:
    from samsa.spark.options import OptionError

    assert remote_options({"subscribe": "t"}) is None
    assert remote_options({"samsa.remote.read": "false"}) is None
    o = remote_options({"SAMSA.REMOTE.READ": "True", "rsm.config.dir": "/x", "kafka.x": "y"})
    assert o is not None and o.class_name == "local" and o.rsm_props == {"rsm.config.dir": "/x"}
    with pytest.raises(OptionError, match="samsa.remote.read"):
        remote_options({"samsa.remote.read": "yes"})


def test_a_torn_object_is_refused(moto: MotoS3, tmp_path: Path) -> None:
    """An object cut short inside a batch (a bad upload): an error, not the rows before it
    silently ending the range early."""
    data = _segment(0)[0]
    meta, opts, rows = _upload(moto, tmp_path, 0, data[:-20])
    with pytest.raises(CorruptRemoteData, match="not a whole batch"):
        read_remote_rows(opts, _rng(meta, 0, meta.end_offset + 1))
