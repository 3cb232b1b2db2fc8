"""Log compaction on a PartitionLog directly: the latest value per key survives with its offset,
tombstones go after delete.retention.ms, transactions and producer state are kept as Kafka keeps
them, and an interrupted swap never leaves a mix of old and new segments."""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.protocol import codecs
from samsa.protocol.batch import HEADER_SIZE, read_header
from samsa.protocol.recordcheck import validate_records
from samsa.protocol.records import decode_batch, encode_batch, iter_batches
from samsa.storage import log as log_mod
from samsa.storage.cleaner import CHECKPOINT, CleanerConfig, LogCleaner
from samsa.storage.cleaner_job import DELETE_HORIZON_BIT
from samsa.storage.log import LogConfig, PartitionLog

pytestmark = pytest.mark.timeout(120)
T0 = 1_700_000_000_000
Row = tuple[int, bytes | None, bytes | None]


def open_log(d: Path, clean: bool = True, **cfg: Any) -> PartitionLog:
    base = {"segment_bytes": 700, "cleanup_policy": "compact", "min_cleanable_ratio": 0.0,
            "delete_retention_ms": 1000, "index_interval": 100}
    base.update(cfg)
    return PartitionLog.open(d / "t-0", "t", 0, LogConfig(**base), clean)


def cleaner(d: Path, **cfg: Any) -> LogCleaner:
    return LogCleaner(CleanerConfig(mode="inline", **cfg), [d])


def clean(cl: LogCleaner, lg: PartitionLog, now: int) -> bool:
    return asyncio.run(cl.clean_once({(lg.topic, lg.partition): lg}, now_ms=now))


def batches(lg: PartitionLog) -> list[tuple[Any, bytes]]:
    """Every batch in the log (header, bytes), following reads like a consumer."""
    off = lg.log_start_offset
    out = []
    while off < lg.high_watermark:
        data = lg.read(off, 1 << 20)
        if not data:
            break
        for pos, size in iter_batches(data):
            h = read_header(data, pos)
            out.append((h, data[pos : pos + size]))
            off = h.last_offset + 1
    return out


def read_all(lg: PartitionLog, start: int | None = None) -> list[Row]:
    off = lg.log_start_offset if start is None else start
    rows: list[Row] = []
    while off < lg.high_watermark:
        data = lg.read(off, 1 << 20)
        if not data:
            break
        for pos, _size in iter_batches(data):
            h = read_header(data, pos)
            if not h.is_control:
                rows += [(r.offset, r.key, r.value) for r in decode_batch(data, pos) if r.offset >= off]
            off = max(off, h.last_offset + 1)
    return rows


def put(lg: PartitionLog, records: list[tuple[bytes | None, bytes | None]], ts: int = T0,
        codec: int = 0, **kw: Any) -> int:
    batch = encode_batch([(k, v, [], ts + i) for i, (k, v) in enumerate(records)], compression=codec,
                         **kw)
    return lg.append(bytearray(batch), now_ms=ts)[0]


def control(lg: PartitionLog, pid: int, commit: bool, ts: int = T0, epoch: int = 0) -> int:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    batch = encode_batch([(key, struct.pack(">hi", 0, 0), [], ts)], producer_id=pid,
                         producer_epoch=epoch, attributes_extra=0x30)
    return lg.append(bytearray(batch), now_ms=ts)[0]


# ---- the property: latest value per key, offsets unchanged, tombstones go ----------------------
ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.lists(st.tuples(st.integers(0, 15), st.booleans()), min_size=1,
                                        max_size=5), st.sampled_from([0, 1, 2, 3, 4])),
    st.tuples(st.just("clean"), st.just([]), st.just(0)),
    st.tuples(st.just("roll"), st.just([]), st.just(0)),
), min_size=1, max_size=60)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, seg=st.sampled_from([300, 700, 2000]))
def test_compaction_keeps_latest_value_per_key(tmp_path_factory: pytest.TempPathFactory,
                                               ops: list[tuple[str, list[tuple[int, bool]], int]],
                                               seg: int) -> None:
    d = tmp_path_factory.mktemp("prop")
    lg = open_log(d, segment_bytes=seg)
    cl = cleaner(d)
    written: dict[int, tuple[bytes, bytes | None]] = {}  # offset -> (key, value)
    latest: dict[bytes, int] = {}
    now = T0
    for n, (op, recs, codec) in enumerate(ops):
        now += 10
        if op == "put":
            rows = [(f"key-{k}".encode(), None if tomb else f"v{n}-{i}-{k}".encode() * 3)
                    for i, (k, tomb) in enumerate(recs)]
            base = put(lg, rows, ts=now, codec=codec)
            for i, (k, v) in enumerate(rows):
                written[base + i] = (k, v)
                latest[k] = base + i
        elif op == "roll":
            lg.roll()
        else:
            clean(cl, lg, now)
            check_never_loses_latest(lg, written, latest)
    # everything into closed segments, then clean: exactly one record per key
    lg.roll()
    clean(cl, lg, now)
    rows = read_all(lg)
    expected = sorted((off, *written[off]) for off in latest.values())
    assert rows == expected
    # after delete.retention.ms (and something new to make the log dirty) tombstones are gone
    put(lg, [(b"other", b"x")], ts=now)
    lg.roll()
    clean(cl, lg, now + 2000)
    rows = [r for r in read_all(lg) if r[1] != b"other"]
    assert rows == [r for r in expected if r[2] is not None]
    # and the same after an unclean restart
    lg.close(clean=False)
    again = open_log(d, clean=False, segment_bytes=seg)
    assert [r for r in read_all(again) if r[1] != b"other"] == [r for r in expected if r[2] is not None]
    again.close()


def check_never_loses_latest(lg: PartitionLog, written: dict[int, tuple[bytes, bytes | None]],
                             latest: dict[bytes, int]) -> None:
    rows = read_all(lg)
    offsets = [r[0] for r in rows]
    assert offsets == sorted(set(offsets))
    for off, k, v in rows:
        assert written[off] == (k, v)  # offsets unchanged
    seen = {r[0] for r in rows}
    assert all(off in seen for off in latest.values())


# ---- reads across gaps -------------------------------------------------------------------------
def test_fetch_in_a_gap_returns_the_next_batch_and_timestamps_still_resolve(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(40):
        put(lg, [(b"a", b"old%d" % i), (b"k%d" % i, b"v")], ts=T0 + i * 10)
    put(lg, [(b"a", b"new")], ts=T0 + 1000)
    lg.roll()
    assert clean(cleaner(tmp_path), lg, T0 + 2000)
    rows = read_all(lg)
    assert [r[0] for r in rows] == [2 * i + 1 for i in range(40)] + [80]
    assert rows[-1] == (80, b"a", b"new")
    data = lg.read(2, 1 << 20)  # offset 2 was compacted away: the batch holding 3 comes back
    assert decode_batch(data)[0].offset == 3
    assert lg.offset_for_timestamp(T0 + 55) == (13, T0 + 61)
    assert lg.offset_for_timestamp(T0 + 1000) == (80, T0 + 1000)
    assert lg.max_timestamp_offset() == (80, T0 + 1000)
    # every rewritten batch is a valid v2 batch with its original offsets
    for h, raw in batches(lg):
        assert h.magic == 2
        recs = decode_batch(raw)
        assert all(h.base_offset <= r.offset <= h.last_offset for r in recs)


def test_compressed_batches_keep_their_codec_and_valid_crc(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=4000)
    for codec in (codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD):
        for i in range(10):
            put(lg, [(b"k%d" % j, b"%d-%d" % (codec, i) * 20) for j in range(4)], codec=codec)
    lg.roll()
    assert clean(cleaner(tmp_path), lg, T0)
    kept = batches(lg)
    assert {h.compression for h, _ in kept} == {codecs.ZSTD}  # only the last codec's keys survive
    import crc32c
    for h, raw in kept:
        assert crc32c.crc32c(raw[21:]) == h.crc
    assert read_all(lg) == [(156 + i, b"k%d" % i, b"4-9" * 20) for i in range(4)]


def test_log_append_time_batches_keep_their_timestamp(tmp_path: Path) -> None:
    lg = open_log(tmp_path, log_append_time=True)
    for i in range(5):
        lg.append(bytearray(encode_batch([(b"a", b"%d" % i, [], T0), (b"b%d" % i, b"x", [], T0)])),
                  now_ms=T0 + 100 * i)
    lg.roll()
    assert clean(cleaner(tmp_path), lg, T0 + 1000)
    recs = [r for h, raw in batches(lg) for r in decode_batch(raw)]
    assert [(r.offset, r.timestamp) for r in recs] == [(1, T0), (3, T0 + 100), (5, T0 + 200),
                                                       (7, T0 + 300), (8, T0 + 400), (9, T0 + 400)]


# ---- tombstones --------------------------------------------------------------------------------
def test_tombstone_gets_delete_horizon_then_goes(tmp_path: Path) -> None:
    lg = open_log(tmp_path, delete_retention_ms=5000)
    cl = cleaner(tmp_path)
    put(lg, [(b"a", b"1"), (b"b", b"1")])
    put(lg, [(b"a", None)], ts=T0 + 10)
    lg.roll()
    assert clean(cl, lg, T0 + 100)
    (h, raw), = [b for b in batches(lg) if b[0].records_count and decode_batch(b[1])[0].value is None]
    assert h.attributes & DELETE_HORIZON_BIT and h.base_timestamp == T0 + 100 + 5000
    assert decode_batch(raw)[0].timestamp == T0 + 10  # record timestamps survive the rebase
    assert read_all(lg) == [(1, b"b", b"1"), (2, b"a", None)]
    put(lg, [(b"c", b"1")])
    lg.roll()
    clean(cl, lg, T0 + 5099)  # before the horizon: kept
    assert (2, b"a", None) in read_all(lg)
    put(lg, [(b"d", b"1")])
    lg.roll()
    clean(cl, lg, T0 + 5100)
    assert read_all(lg) == [(1, b"b", b"1"), (3, b"c", b"1"), (4, b"d", b"1")]


def test_keyless_records_are_dropped_and_detected(tmp_path: Path) -> None:
    raw = encode_batch([(b"k", b"v", [], T0), (None, b"v", [], T0), (None, None, [], T0)],
                       compression=codecs.LZ4)
    assert validate_records(raw, read_header(raw), max_message_bytes=1 << 20,
                            want_keyless=True) == [1, 2]
    lg = open_log(tmp_path)
    put(lg, [(b"k", b"v"), (None, b"x")])
    put(lg, [(b"j", b"v")])
    lg.roll()
    assert clean(cleaner(tmp_path), lg, T0)
    assert read_all(lg) == [(0, b"k", b"v"), (2, b"j", b"v")]


# ---- transactions and producer state ------------------------------------------------------------
def test_transactions_committed_kept_aborted_removed_markers_expire(tmp_path: Path) -> None:
    lg = open_log(tmp_path, delete_retention_ms=1000)
    cl = cleaner(tmp_path, producer_id_expiration_ms=10**12)
    txn = {"producer_id": 7, "producer_epoch": 0, "attributes_extra": 0x10}
    put(lg, [(b"a", b"committed")], base_sequence=0, **txn)  # 0
    put(lg, [(b"b", b"plain")])  # 1
    control(lg, 7, commit=True)  # 2
    put(lg, [(b"a", b"aborted"), (b"c", b"aborted")], base_sequence=1, **txn)  # 3-4
    control(lg, 7, commit=False)  # 5
    put(lg, [(b"x", b"1")])  # 6
    lg.roll()
    assert clean(cl, lg, T0)
    # aborted data is gone even though it was the newest for "a"; 3-4 stays as an empty header
    # because that batch carries producer 7's last sequence, and so both markers stay
    hs = [h for h, _ in batches(lg)]
    assert [(h.base_offset, h.records_count, h.is_control) for h in hs] == [
        (0, 1, False), (1, 1, False), (2, 1, True), (3, 0, False), (5, 1, True), (6, 1, False)]
    assert not any(h.attributes & DELETE_HORIZON_BIT for h in hs)
    assert read_all(lg) == [(0, b"a", b"committed"), (1, b"b", b"plain"), (6, b"x", b"1")]
    # producer 7 writes again (a later value for "a"): the committed and aborted data go; the
    # markers, with nothing left to mark, get a delete horizon on the next pass and go after it
    put(lg, [(b"a", b"later")], producer_id=7, producer_epoch=0, base_sequence=3)  # 7
    lg.roll()
    assert clean(cl, lg, T0 + 10)
    assert [h.base_offset for h, _ in batches(lg)] == [1, 2, 5, 6, 7]
    for i, now in enumerate((T0 + 20, T0 + 5000)):
        put(lg, [(b"y%d" % i, b"1")])
        lg.roll()
        assert clean(cl, lg, now)
        markers = [h for h, _ in batches(lg) if h.is_control]
        assert all(h.attributes & DELETE_HORIZON_BIT for h in markers)
    assert not markers
    assert read_all(lg) == [(1, b"b", b"plain"), (6, b"x", b"1"), (7, b"a", b"later"),
                            (8, b"y0", b"1"), (9, b"y1", b"1")]
    # the aborted transaction left the aborted index with its data (read_committed consumers
    # would otherwise skip producer 7's later transactions)
    assert lg.producers.aborted == []
    lg.close()
    assert open_log(tmp_path).producers.aborted == []


def test_stale_aborted_entry_does_not_hide_later_transactions(tmp_path: Path) -> None:
    from samsa.storage.producer_state import AbortedTxn

    lg = open_log(tmp_path)
    for i in range(3):  # 0-2: where an aborted transaction of producer 7 and its marker were
        put(lg, [(b"p%d" % i, b"1")])
    lg.producers._add_aborted(AbortedTxn(7, 0, 2, 0), persist=True)  # its entry outlived them
    put(lg, [(b"a", b"committed")], producer_id=7, producer_epoch=0, base_sequence=0,
        attributes_extra=0x10)  # 3
    control(lg, 7, commit=True)  # 4
    put(lg, [(b"z", b"1")])
    lg.roll()
    assert clean(cleaner(tmp_path), lg, T0)
    assert (3, b"a", b"committed") in read_all(lg)


def test_open_transaction_caps_the_cleanable_range(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=150)
    put(lg, [(b"a", b"1")])
    put(lg, [(b"a", b"2")])
    lg.roll()
    put(lg, [(b"t", b"open")], producer_id=9, attributes_extra=0x10)  # never committed
    lg.roll()
    put(lg, [(b"a", b"3")])
    lg.roll()
    cl = cleaner(tmp_path)
    assert clean(cl, lg, T0)
    # only the segments before the open transaction were cleaned
    assert read_all(lg) == [(1, b"a", b"2"), (2, b"t", b"open"), (3, b"a", b"3")]
    assert cl.checkpoint(lg) == 2


def test_producer_last_batch_kept_as_empty_header_until_expired(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    put(lg, [(b"a", b"1")], producer_id=5, producer_epoch=2, base_sequence=0)
    put(lg, [(b"a", b"2"), (b"b", b"2")], producer_id=5, producer_epoch=2, base_sequence=1)
    put(lg, [(b"a", b"3"), (b"b", b"3")])
    put(lg, [(b"z", b"z")])
    lg.roll()
    cl = cleaner(tmp_path, producer_id_expiration_ms=60000)
    assert clean(cl, lg, T0 + 1000)
    hs = [h for h, _ in batches(lg)]
    assert [(h.base_offset, h.last_offset, h.records_count) for h in hs] == [(1, 2, 0), (3, 4, 2),
                                                                            (5, 5, 1)]
    assert (hs[0].producer_id, hs[0].producer_epoch, hs[0].base_sequence) == (5, 2, 1)
    put(lg, [(b"q", b"q")])
    lg.roll()
    assert clean(cl, lg, T0 + 120000)  # the producer expired: its empty batch goes
    assert [h.base_offset for h, _ in batches(lg)] == [3, 5, 6]


def test_last_batch_of_the_cleaned_range_is_kept_even_empty(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    put(lg, [(b"a", b"1")])
    put(lg, [(b"a", None)], attributes_extra=DELETE_HORIZON_BIT)  # horizon T0, already passed
    lg.roll()
    lg.active.close()  # a crash right after the roll: the empty active segment will be dropped
    assert clean(cleaner(tmp_path), lg, T0 + 10)
    hs = [h for h, _ in batches(lg)]
    assert [(h.base_offset, h.last_offset, h.records_count) for h in hs] == [(1, 1, 0)]
    lg.close(clean=False)
    again = open_log(tmp_path, clean=False)
    assert again.end_offset == 2  # the empty header still tells where the log ends
    assert put(again, [(b"b", b"1")]) == 2


# ---- scheduling knobs ---------------------------------------------------------------------------
def test_dirty_ratio_min_and_max_compaction_lag(tmp_path: Path) -> None:
    lg = open_log(tmp_path, min_cleanable_ratio=0.5, segment_bytes=200)
    for i in range(6):
        put(lg, [(b"a", b"x" * 50)], ts=T0 + i * 1000)
    cl = cleaner(tmp_path)
    tc = cl.to_clean(lg, T0 + 10000)
    assert tc.first_dirty == 0 and tc.first_uncleanable == lg.active.base
    assert tc.ratio == 1.0 and tc.cleanable
    assert clean(cl, lg, T0 + 10000)
    tc = cl.to_clean(lg, T0 + 10000)
    assert tc.first_dirty == lg.active.base and tc.cleanable_bytes == 0 and not tc.cleanable
    # min.compaction.lag.ms: segments younger than the lag are uncleanable
    lg.config.min_compaction_lag_ms = 3000
    for i in range(6):
        put(lg, [(b"a", b"y" * 50)], ts=T0 + 20000 + i * 1000)
    tc = cl.to_clean(lg, T0 + 26000)
    young = [s.base for s in lg.segments if s.max_timestamp > T0 + 23000]
    assert tc.first_uncleanable == young[0]
    # max.compaction.lag.ms forces cleaning below the ratio
    lg.config.min_compaction_lag_ms = 0
    lg.config.min_cleanable_ratio = 0.99
    tc = cl.to_clean(lg, T0 + 26000)
    assert not tc.cleanable
    lg.config.max_compaction_lag_ms = 1000
    assert cl.to_clean(lg, T0 + 26000).cleanable
    # and rolls the active segment after max.compaction.lag.ms
    n = len(lg.segments)
    put(lg, [(b"b", b"1")], ts=T0 + 40000)
    assert len(lg.segments) == n + 1


def test_checkpoint_survives_restart_and_resets_when_invalid(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(20):
        put(lg, [(b"k%d" % (i % 3), b"v%d" % i)])
    lg.roll()
    cl = cleaner(tmp_path)
    assert clean(cl, lg, T0)
    text = (tmp_path / CHECKPOINT).read_text()
    assert text == "0\n1\nt 0 20\n"
    again = cleaner(tmp_path)
    assert again.checkpoint(lg) == 20 and again.to_clean(lg, T0).first_dirty == 20
    (tmp_path / CHECKPOINT).write_text("0\n1\nt 0 999\n")  # beyond the log end: start over
    assert cleaner(tmp_path).to_clean(lg, T0).first_dirty == 0
    again.forget("t")
    assert (tmp_path / CHECKPOINT).read_text() == "0\n0\n"


def test_small_offset_map_makes_partial_progress(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=300)
    latest = {}
    for i in range(200):
        k = b"k%d" % (i % 50)
        latest[k] = put(lg, [(k, b"v%d" % i)])
    lg.roll()
    from samsa.storage import cleaner_job
    cl = cleaner(tmp_path, dedupe_buffer_size=30 * cleaner_job.MAP_ENTRY_BYTES, load_factor=1.0)
    passes = 0
    while clean(cl, lg, T0):
        passes += 1
        assert passes < 30
    assert passes > 1
    assert [r[0] for r in read_all(lg)] == sorted(latest.values())


# ---- robustness -----------------------------------------------------------------------------------
@pytest.mark.parametrize("step", ["swap-named", "old-deleted", "indexes-renamed", "done"])
def test_crash_at_each_swap_step_leaves_old_or_new_never_a_mix(tmp_path: Path, step: str) -> None:
    lg = open_log(tmp_path, segment_bytes=300)
    latest = {}
    for i in range(60):
        k = b"k%d" % (i % 7)
        latest[k] = put(lg, [(k, b"v%d" % i)], ts=T0 + i)
    lg.roll()
    before = read_all(lg)

    def crash(name: str) -> None:
        if name == step:
            raise SystemExit("crash")  # not an Exception: nothing handles it, like kill -9

    log_mod.swap_hook = crash
    try:
        with pytest.raises(SystemExit):
            clean(cleaner(tmp_path), lg, T0 + 1000)
    finally:
        log_mod.swap_hook = None
    for s in lg.segments:
        s.close()
    again = open_log(tmp_path, clean=False, segment_bytes=300)
    rows = read_all(again)
    assert not list((tmp_path / "t-0").glob("*.swap")) and not list((tmp_path / "t-0").glob("*.cleaned"))
    assert {r[0] for r in rows} >= set(latest.values())
    assert set(rows) <= set(before)
    assert [r[0] for r in rows] == sorted({r[0] for r in rows})
    assert again.end_offset == 60
    # and cleaning finishes the job afterwards: a pass runs (the interrupted one left dirty data
    # below the active segment), after which only each key's latest record below the active
    # segment is left there (the active segment is neither cleaned nor in the key map)
    active_base = again.segments[-1].base
    assert clean(cleaner(tmp_path), again, T0 + 2000)
    latest_below = {k: o for o, k, _ in before if o < active_base}
    assert [r[0] for r in read_all(again) if r[0] < active_base] == sorted(latest_below.values())
    again.roll()
    put(again, [(b"zz", b"1")])
    again.roll()
    clean(cleaner(tmp_path), again, T0 + 3000)
    assert [r[0] for r in read_all(again) if r[1] != b"zz"] == sorted(latest.values())


def test_leftover_cleaned_files_are_discarded_on_start(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    put(lg, [(b"a", b"1")])
    lg.close()
    junk = tmp_path / "t-0" / "00000000000000000000.log.cleaned"
    junk.write_bytes(b"garbage")
    again = open_log(tmp_path, clean=False)
    assert not junk.exists() and read_all(again) == [(0, b"a", b"1")]


def test_retention_during_cleaning_aborts_the_swap(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=200)
    for i in range(20):
        put(lg, [(b"k%d" % (i % 3), b"v%d" % i)])
    lg.roll()
    cl = cleaner(tmp_path)
    original = cl.worker.clean_group

    async def meanwhile(job_id: int, index: int) -> Any:
        res = await original(job_id, index)
        lg.delete_records(lg.segments[2].base)  # drops the segments being cleaned
        return res

    cl.worker.clean_group = meanwhile  # type: ignore[method-assign]
    assert not clean(cl, lg, T0)
    assert cl.last_run is not None and cl.last_run.outcome.startswith("aborted")
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    assert cl.checkpoint(lg) is None
    assert [r[0] for r in read_all(lg)] == list(range(lg.log_start_offset, 20))


def test_corrupt_segment_is_left_alone(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=300)
    for i in range(20):
        put(lg, [(b"k%d" % (i % 3), b"v%d" % i)])
    lg.roll()
    path = lg.segments[1].log_path
    with open(path, "r+b") as f:
        f.seek(HEADER_SIZE + 3)
        b = f.read(1)
        f.seek(HEADER_SIZE + 3)
        f.write(bytes([b[0] ^ 0xFF]))
    before = [p.read_bytes() for p in sorted((tmp_path / "t-0").glob("*.log"))]
    cl = cleaner(tmp_path)
    assert not clean(cl, lg, T0)
    assert ("t", 0) in cl.uncleanable
    assert [p.read_bytes() for p in sorted((tmp_path / "t-0").glob("*.log"))] == before


def test_deleting_the_topic_mid_pass_aborts(tmp_path: Path) -> None:
    lg = open_log(tmp_path, segment_bytes=200)
    for i in range(20):
        put(lg, [(b"k%d" % (i % 3), b"v%d" % i)])
    lg.roll()
    cl = cleaner(tmp_path)
    logs = {("t", 0): lg}
    original = cl.worker.prepare

    async def meanwhile(job_id: int, plan: Any) -> Any:
        res = await original(job_id, plan)
        logs.pop(("t", 0))
        lg.delete()
        return res

    cl.worker.prepare = meanwhile  # type: ignore[method-assign]
    assert not asyncio.run(cl.clean_once(logs, now_ms=T0))
    assert not (tmp_path / "t-0").exists()


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_thread_and_process_workers(tmp_path: Path, mode: str) -> None:
    lg = open_log(tmp_path, segment_bytes=500)
    latest = {}
    for i in range(300):
        k = b"k%d" % (i % 11)
        latest[k] = put(lg, [(k, b"v%d" % i)], codec=codecs.ZSTD)
    lg.roll()
    cl = LogCleaner(CleanerConfig(mode=mode), [tmp_path])

    async def go() -> bool:
        try:
            return await cl.clean_once({("t", 0): lg}, now_ms=T0)
        finally:
            cl.close()

    assert asyncio.run(go())
    assert [r[0] for r in read_all(lg)] == sorted(latest.values())
    cl.write_stats({("t", 0): lg})
    import json
    stats = json.loads((tmp_path / "cleaner-stats.json").read_text())
    assert stats["metrics"]["runs"] == 1 and stats["last_run"]["outcome"] == "done"
    assert stats["partitions"]["t-0"]["first_dirty_offset"] == 300
    if mode == "process":
        assert os.getpid() != 0


def test_compact_delete_combines_retention_and_compaction(tmp_path: Path) -> None:
    lg = open_log(tmp_path, cleanup_policy="compact,delete", retention_ms=10_000, segment_bytes=300)
    cl = cleaner(tmp_path)
    for i in range(30):  # old data: keys 0-4
        put(lg, [(b"old%d" % (i % 5), b"v%d" % i)], ts=T0 + i)
    lg.roll()
    assert clean(cl, lg, T0 + 100)
    assert [r[1] for r in read_all(lg)] == [b"old0", b"old1", b"old2", b"old3", b"old4"]
    for i in range(30):  # new data: keys 0-2, 20 s later
        put(lg, [(b"new%d" % (i % 3), b"v%d" % i)], ts=T0 + 20_000 + i)
    lg.roll()
    assert lg.apply_retention(T0 + 20_100) > 0  # the old segments are past retention.ms
    assert all(r[1].startswith(b"new") for r in read_all(lg))
    assert cl.to_clean(lg, T0 + 20_100).first_dirty == lg.log_start_offset  # checkpoint below it
    assert clean(cl, lg, T0 + 20_100)
    assert [r[1] for r in read_all(lg)] == [b"new0", b"new1", b"new2"]
    assert lg.config.compact and lg.config.delete
