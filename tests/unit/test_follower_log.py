"""A follower's log: verbatim appends of the leader's batches, truncation (also under kill -9) and
the high watermark."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import crc32c
import pytest

from samsa.protocol.batch import ATTR_OFFSET, read_header, set_base_offset
from samsa.protocol.records import decode_batch, encode_batch, iter_batches
from samsa.storage.leader_epoch import FILE_NAME as EPOCH_FILE
from samsa.storage.log import META, FollowerAppendError, LogConfig, PartitionLog
from samsa.storage.producer_state import ABORT, COMMIT

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=400, index_interval=100)


def open_log(d: Path, name: str = "t-0", clean: bool = True, cfg: LogConfig = CFG) -> PartitionLog:
    return PartitionLog.open(d / name, "t", 0, cfg, clean=clean)


def rec(i: int, n: int = 1) -> list:
    return [(b"k%d" % (i % 3), b"value-%d-%d-" % (i, j) + b"x" * (i % 7) * 5, [], T0 + i)
            for j in range(n)]


def plain(i: int, n: int = 1) -> bytearray:
    return bytearray(encode_batch(rec(i, n), leader_epoch=-1))


def idem(pid: int, seq: int, n: int = 1, txn: bool = False) -> bytearray:
    return bytearray(encode_batch(rec(seq, n), producer_id=pid, producer_epoch=0,
                                  base_sequence=seq, attributes_extra=0x10 if txn else 0,
                                  leader_epoch=-1))


def fill_leader(lg: PartitionLog) -> list[int]:
    """A mixed history over three leader epochs: plain, idempotent and transactional batches,
    a commit and an abort. Returns the base offsets of every batch."""
    bases = []
    for i in range(4):
        bases.append(lg.append(plain(i, 1 + i % 3), T0, leader_epoch=1)[0])
    for s in range(3):
        bases.append(lg.append(idem(7, s * 2, n=2), T0, leader_epoch=1)[0])
    bases.append(lg.append(idem(9, 0, n=2, txn=True), T0, leader_epoch=2)[0])
    bases.append(lg.append(plain(10), T0, leader_epoch=2)[0])
    bases.append(lg.append_marker(9, 0, COMMIT, 3, T0, leader_epoch=2))
    bases.append(lg.append(idem(11, 0, n=3, txn=True), T0, leader_epoch=4)[0])
    bases.append(lg.append_marker(11, 0, ABORT, 3, T0, leader_epoch=4))
    for i in range(12, 16):
        bases.append(lg.append(plain(i, 2), T0, leader_epoch=4)[0])
    return bases


def replicate(leader: PartitionLog, follower: PartitionLog, max_bytes: int = 333) -> int:
    """Fetch from the follower's log end like a replica fetcher: whole batches up to max_bytes
    (often cutting the last one), appended verbatim. Returns the number of fetches."""
    fetches = 0
    while follower.end_offset < leader.end_offset:
        data = leader.read(follower.end_offset, max_bytes)
        assert data
        n = follower.append_as_follower(data)
        assert n > 0 and n <= len(data)
        fetches += 1
        assert fetches < 1000
    return fetches


def segment_files(lg: PartitionLog) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(lg.dir.glob("*.log"))}


def served(lg: PartitionLog, upper: int | None = None) -> list[tuple[int, bytes | None]]:
    """Every record from the log start, CRCs checked."""
    out: list[tuple[int, bytes | None]] = []
    off = lg.log_start_offset
    end = lg.end_offset if upper is None else upper
    while off < end:
        data = lg.read(off, 1 << 20, upper=upper)
        if not data:
            break
        for pos, size in iter_batches(data):
            h = read_header(data, pos)
            assert crc32c.crc32c(bytes(data[pos + ATTR_OFFSET:pos + size])) == h.crc
            for r in decode_batch(data, pos):
                if r.offset >= off:
                    out.append((r.offset, r.value))
            off = max(off, h.last_offset + 1)
    return out


# ---- leader stamping -------------------------------------------------------------------------------
def test_leader_append_stamps_the_epoch_outside_the_crc(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append(plain(0), T0)  # -1: untouched
    lg.append(plain(1), T0, leader_epoch=3)
    lg.append_marker(5, 0, COMMIT, 1, T0, leader_epoch=3)
    lg.append(plain(2), T0, leader_epoch=6)
    data = lg.read(0, 1 << 20)
    heads = [read_header(data, pos) for pos, _ in iter_batches(data)]
    assert [h.leader_epoch for h in heads] == [-1, 3, 3, 6]
    for pos, size in iter_batches(data):
        assert crc32c.crc32c(data[pos + ATTR_OFFSET:pos + size]) == read_header(data, pos).crc
    assert lg.epochs.entries == [(3, 1), (6, 3)]
    assert (lg.dir / EPOCH_FILE).read_text() == "0\n2\n3 1\n6 3\n"
    lg.close()


# ---- append_as_follower ------------------------------------------------------------------------
def test_follower_copy_is_byte_identical(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader")
    fill_leader(leader)
    follower = open_log(tmp_path, "follower")
    assert replicate(leader, follower) > 3
    assert follower.end_offset == leader.end_offset
    assert len(leader.segments) > 2
    assert segment_files(follower) == segment_files(leader)
    assert (follower.dir / EPOCH_FILE).read_bytes() == (leader.dir / EPOCH_FILE).read_bytes()
    assert follower.epochs.entries == [(1, 0), (2, 13), (4, 17)]
    # producer state replayed per batch: the same open transactions, aborts and last sequences
    assert follower.producers.first_unstable_offset() == leader.producers.first_unstable_offset()
    assert follower.producers.aborted == leader.producers.aborted
    assert follower.producers.producers[7].last_seq == 5
    assert follower.last_stable_offset == leader.last_stable_offset == leader.end_offset
    # reads agree, offsets and indexes included
    assert served(follower) == served(leader)
    for off in range(leader.end_offset):
        assert follower.read(off, 100) == leader.read(off, 100)
    leader.close()
    follower.close()
    again = open_log(tmp_path, "follower", clean=False)
    assert served(again) == served(open_log(tmp_path, "leader"))


def test_follower_append_counts_for_the_flush_policy(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader")
    fill_leader(leader)
    follower = open_log(tmp_path, "follower", cfg=LogConfig(segment_bytes=400, flush_messages=5))
    assert not follower.flush_due
    follower.append_as_follower(leader.read(0, 120))  # one or two batches: under 5 records
    follower.append_as_follower(leader.read(follower.end_offset, 1 << 20))
    assert follower.unflushed_messages >= 5 and follower.flush_due
    asyncio.run(follower.flush())
    assert follower.flushed_offset == follower.end_offset and not follower.flush_due


def test_offset_regression_is_refused_and_nothing_appended(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader")
    fill_leader(leader)
    follower = open_log(tmp_path, "follower")
    data = leader.read(0, 600)
    n = follower.append_as_follower(data)
    end, size = follower.end_offset, follower.size_bytes
    with pytest.raises(FollowerAppendError):
        follower.append_as_follower(data)
    # a good batch then a regressing one: all or nothing
    good = leader.read(end, 1 << 20)
    first_size = read_header(good).size
    with pytest.raises(FollowerAppendError):
        follower.append_as_follower(bytes(good[:first_size]) + bytes(data[:n]))
    assert follower.end_offset == end and follower.size_bytes == size


def test_corrupt_batch_is_refused(tmp_path: Path) -> None:
    follower = open_log(tmp_path, "follower")
    b = bytearray(encode_batch(rec(1)))
    b[-1] ^= 0xFF
    with pytest.raises(FollowerAppendError):
        follower.append_as_follower(bytes(b))
    b = bytearray(encode_batch(rec(1)))
    b[16] = 1  # magic
    with pytest.raises(FollowerAppendError):
        follower.append_as_follower(bytes(b))
    assert follower.end_offset == 0 and follower.size_bytes == 0


def test_partial_trailing_batch_is_ignored(tmp_path: Path) -> None:
    follower = open_log(tmp_path, "follower")
    b1, b2 = bytes(encode_batch(rec(1, 2))), bytearray(encode_batch(rec(2)))
    set_base_offset(b2, 2)
    assert follower.append_as_follower(b1 + bytes(b2[:40])) == len(b1)
    assert follower.end_offset == 2
    assert follower.append_as_follower(bytes(b2[:70])) == 0  # a header but not the whole batch
    assert follower.append_as_follower(b"") == 0
    assert follower.append_as_follower(memoryview(bytes(b2))) == len(b2)
    assert [o for o, _ in served(follower)] == [0, 1, 2]


def test_gaps_from_a_compacted_leader_are_kept(tmp_path: Path) -> None:
    follower = open_log(tmp_path, "follower", cfg=LogConfig(segment_bytes=200))
    data = b""
    for base in (0, 5, 6, 20, 31):
        b = bytearray(encode_batch(rec(base), leader_epoch=2))
        set_base_offset(b, base)
        data += bytes(b)
    assert follower.append_as_follower(data) == len(data)
    assert follower.end_offset == 32
    assert [o for o, _ in served(follower)] == [0, 5, 6, 20, 31]
    assert follower.read(10, 1000)[:8] == (20).to_bytes(8, "big")  # a gap reads as what follows
    # a roll lands on the base offset of the batch that starts the segment
    assert all(read_header(s.read(0, 61, True)).base_offset == s.base for s in follower.segments)
    follower.close()
    again = open_log(tmp_path, "follower", clean=False, cfg=LogConfig(segment_bytes=200))
    assert again.end_offset == 32 and [o for o, _ in served(again)] == [0, 5, 6, 20, 31]


# ---- truncation -------------------------------------------------------------------------------------
def test_truncate_then_reappend_from_a_new_leader(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader")
    bases = fill_leader(leader)
    follower = open_log(tmp_path, "follower")
    replicate(leader, follower)
    before = served(follower)
    cut = bases[6]  # inside the third segment or so
    assert len(follower.segments) > 2
    follower.truncate_to(cut)
    assert follower.end_offset == cut
    assert served(follower) == [r for r in before if r[0] < cut]
    assert all(s.base < cut or s is follower.segments[0] for s in follower.segments)
    assert follower.epochs.entries == [(1, 0)]
    # the new leader (epoch 5) has a different history from `cut` on
    new_leader = open_log(tmp_path, "new")
    replicate(leader, new_leader)
    new_leader.truncate_to(cut)
    for i in range(5):
        new_leader.append(plain(100 + i, 2), T0, leader_epoch=5)
    replicate(new_leader, follower)
    assert served(follower) == served(new_leader)
    assert segment_files(follower) == segment_files(new_leader)
    assert follower.epochs.entries == [(1, 0), (5, cut)]
    # indexes and time lookups still line up after a reopen
    follower.close()
    again = open_log(tmp_path, "follower", clean=False)
    assert served(again) == served(new_leader)
    assert again.epochs.entries == [(1, 0), (5, cut)]


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append(plain(0, 3), T0)
    lg.append(plain(1, 3), T0)  # offsets 3..5
    lg.truncate_to(4)
    assert lg.end_offset == 3 and [o for o, _ in served(lg)] == [0, 1, 2]
    lg.truncate_to(99)  # past the end: nothing
    assert lg.end_offset == 3
    assert lg.append(plain(2), T0)[0] == 3


def test_truncate_to_below_log_start_restarts_the_log(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(10):
        lg.append(plain(i), T0, leader_epoch=1)
    lg.delete_records(6)
    lg.truncate_to(2)
    assert lg.log_start_offset == lg.end_offset == 2 and served(lg) == []
    assert lg.epochs.entries == []


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader")
    fill_leader(leader)
    follower = open_log(tmp_path, "follower")
    replicate(leader, follower)
    follower.set_high_watermark(10)
    follower.truncate_fully_and_start_at(1000)
    assert follower.log_start_offset == follower.end_offset == 1000 == follower.high_watermark
    assert follower.epochs.entries == [] and follower.producers.producers == {}
    assert follower.producers.aborted == []
    assert [p.name for p in follower.dir.glob("*.log")] == [f"{1000:020d}.log"]
    assert not list(follower.dir.glob("*.snapshot"))
    b = bytearray(encode_batch(rec(1), leader_epoch=3))
    set_base_offset(b, 1000)
    follower.append_as_follower(bytes(b))
    assert follower.end_offset == 1001 and follower.epochs.entries == [(3, 1000)]
    follower.close()
    again = open_log(tmp_path, "follower", clean=False)
    assert again.log_start_offset == 1000 and [o for o, _ in served(again)] == [1000]
    assert "reset_to" not in json.loads((again.dir / META).read_text())


def test_producer_state_after_truncation(tmp_path: Path) -> None:
    """Idempotent dedup, open transactions (LSO) and aborts are as of the truncation point, also
    when it is below a roll's snapshot."""
    lg = open_log(tmp_path, cfg=LogConfig(segment_bytes=250))
    offs = [lg.append(idem(7, s, n=1), T0, leader_epoch=1)[0] for s in range(4)]  # 0..3
    txn = lg.append(idem(9, 0, n=2, txn=True), T0, leader_epoch=1)[0]             # 4..5
    for s in range(4, 8):
        lg.append(idem(7, s), T0, leader_epoch=1)                                   # 6..9
    lg.append_marker(9, 0, COMMIT, 1, T0, leader_epoch=1)                           # 10
    t2 = lg.append(idem(11, 0, n=1, txn=True), T0, leader_epoch=1)[0]               # 11
    lg.append_marker(11, 0, ABORT, 1, T0, leader_epoch=1)                           # 12
    assert lg.producers.aborted and lg.producers.first_unstable_offset() is None
    snaps = sorted(int(p.name.split(".")[0]) for p in lg.dir.glob("*.snapshot"))
    assert snaps and snaps[-1] > 8  # a snapshot above the cut, which must not be used
    lg.truncate_to(8)
    assert lg.end_offset == 8
    assert not [p for p in lg.dir.glob("*.snapshot") if int(p.name.split(".")[0]) > 8]
    # the transaction is open again (its commit went), the abort is gone
    assert lg.producers.first_unstable_offset() == txn
    assert lg.last_stable_offset == txn
    assert lg.producers.aborted == [] and (lg.dir / "aborted.txnindex").read_bytes() == b""
    # dedup as of offset 8: producer 7's last sequence is 5 (offset 7)
    assert lg.producers.producers[7].last_seq == 5
    assert lg.append(idem(7, 5), T0)[0] == 7  # a retry: its original offset
    assert lg.append(idem(7, 6), T0)[0] == 8  # the next one: appended
    assert 11 not in lg.producers.producers or lg.producers.producers[11].txn_first_offset < 0
    assert t2 > 8 and offs == [0, 1, 2, 3]
    lg.close()
    again = open_log(tmp_path, clean=False, cfg=LogConfig(segment_bytes=250))
    assert again.producers.first_unstable_offset() == txn and again.producers.aborted == []


# ---- high watermark ---------------------------------------------------------------------------------
def test_high_watermark_follows_the_log_end_until_set(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append(plain(0), T0)
    assert lg.high_watermark == lg.end_offset == 1
    lg.append(plain(1), T0)
    assert lg.high_watermark == 2
    assert lg.set_high_watermark(1) is False  # moved down
    assert lg.high_watermark == 1
    lg.append(plain(2), T0)
    assert lg.high_watermark == 1 and lg.last_stable_offset == 1
    assert lg.set_high_watermark(99) is True  # clamped to the log end
    assert lg.high_watermark == 3
    assert lg.set_high_watermark(3) is False
    lg.set_high_watermark(-5)
    assert lg.high_watermark == lg.log_start_offset == 0
    lg.follow_leo_hw()
    assert lg.high_watermark == 3
    lg.append(plain(3), T0)
    assert lg.high_watermark == 4


def test_reads_stop_at_upper_or_the_log_end(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(5):
        lg.append(plain(i), T0)
    lg.set_high_watermark(2)
    assert [o for o, _ in served(lg)] == [0, 1, 2, 3, 4]  # upper=None: a follower reads to LEO
    assert [o for o, _ in served(lg, upper=lg.high_watermark)] == [0, 1]
    assert lg.read(2, 1000, upper=lg.high_watermark) == b""


def test_set_high_watermark_wakes_waiters(tmp_path: Path) -> None:
    async def run() -> None:
        lg = open_log(tmp_path)
        lg.append(plain(0), T0)
        lg.set_high_watermark(0)
        w = asyncio.get_running_loop().create_future()
        lg.waiters.append(w)
        lg.set_high_watermark(0)
        assert not w.done()
        lg.set_high_watermark(1)
        assert w.done()
    asyncio.run(run())


def test_high_watermark_persists_across_close_and_open(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(6):
        lg.append(plain(i), T0)
    lg.close()
    assert "high_watermark" not in json.loads((lg.dir / META).read_text())
    again = open_log(tmp_path, clean=False)
    assert again.high_watermark == 6  # never set: follows the log end
    again.set_high_watermark(4)
    again.close()
    assert json.loads((lg.dir / META).read_text())["high_watermark"] == 4
    third = open_log(tmp_path, clean=False)
    assert third.high_watermark == 4
    third.append(plain(9), T0)
    assert third.high_watermark == 4
    # a stored value past the log end (the tail was lost) is clamped at load
    meta = json.loads((lg.dir / META).read_text())
    third.close()
    meta["high_watermark"] = 500
    (lg.dir / META).write_text(json.dumps(meta))
    assert open_log(tmp_path, clean=False).high_watermark == 7


def test_high_watermark_checkpoint_is_rate_limited(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(3):
        lg.append(plain(i), T0)
    lg.set_high_watermark(2)  # stops following the log end: written at once
    assert json.loads((lg.dir / META).read_text())["high_watermark"] == 2
    assert lg.checkpoint_hw(interval_ms=0) is False  # unchanged
    lg.set_high_watermark(3)
    assert lg.checkpoint_hw(interval_ms=3_600_000) is False  # too soon
    assert lg.checkpoint_hw(interval_ms=0) is True
    assert json.loads((lg.dir / META).read_text())["high_watermark"] == 3


def test_truncation_clamps_hw_and_recovery_point(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(8):
        lg.append(plain(i), T0)
    lg.set_high_watermark(7)
    lg.close()
    lg = open_log(tmp_path)  # clean: the recovery point is the log end
    assert lg.recovery_point == 8
    lg.truncate_to(5)
    assert lg.high_watermark == 5 and lg.recovery_point <= 5 and lg.flushed_offset <= 5
    meta = json.loads((lg.dir / META).read_text())
    assert meta["high_watermark"] == 5 and meta["recovery_point"] <= 5


# ---- crash safety ------------------------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from samsa.storage import log as log_mod
    from samsa.storage import segment as seg_mod
    from samsa.storage.log import LogConfig, PartitionLog

    d, step, op, offset = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])

    def hook(name):
        if name == step:
            print("killed at", name, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    log_mod.swap_hook = seg_mod.truncate_hook = hook
    lg = PartitionLog.open(d, "t", 0, LogConfig(segment_bytes=400, index_interval=100), clean=True)
    if op == "truncate":
        lg.truncate_to(offset)
    else:
        lg.truncate_fully_and_start_at(offset)
    print("killed at end", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # past every step: killed after the truncation
""")

TRUNCATE_STEPS = ["truncate-meta", "truncate-segment-deleted", "segment-indexes-cut",
                  "truncate-segment-cut",
                  "truncate-epochs", "truncate-producers", "end"]
RESET_STEPS = ["reset-intent", "reset-segments-deleted", "reset-rolled", "end"]


def _crash(d: Path, step: str, op: str, offset: int) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-c", CHILD, str(d), step, op, str(offset)], env=env,
                       capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    assert p.stdout.decode().strip() == f"killed at {step}"  # the crash point was reached


@pytest.mark.parametrize("cut_batch", [5, 8])  # inside a segment; inside an open transaction
@pytest.mark.parametrize("step", TRUNCATE_STEPS)
def test_kill_during_truncate_leaves_a_prefix(tmp_path: Path, step: str, cut_batch: int) -> None:
    leader = open_log(tmp_path, "leader")
    bases = fill_leader(leader)
    follower = open_log(tmp_path, "follower")
    replicate(leader, follower)
    follower.set_high_watermark(bases[-2])
    before = served(follower)
    cut = bases[cut_batch]
    assert cut not in follower.bases
    follower.close()
    _crash(follower.dir, step, "truncate", cut)
    lg = open_log(tmp_path, "follower", clean=False)
    after = served(lg)  # CRCs checked
    assert after == before[:len(after)], "not a prefix of the old log"
    assert len(after) >= sum(1 for o, _ in before if o < cut)
    if step == "end":
        assert lg.end_offset == cut
    # the epoch cache, producer state and HW agree with what is there
    assert all(start < lg.end_offset for _e, start in lg.epochs.entries)
    assert lg.epochs.entries == [e for e in leader.epochs.entries if e[1] < lg.end_offset]
    assert lg.high_watermark <= lg.end_offset and lg.recovery_point <= lg.end_offset
    assert all(a.last_offset < lg.end_offset for a in lg.producers.aborted)
    assert (lg.producers.first_unstable_offset() is None) == (lg.end_offset <= bases[7]
                                                               or lg.end_offset > bases[9])
    # and it takes the new leader's data where it ends
    end = lg.end_offset
    b = bytearray(encode_batch(rec(99), leader_epoch=9))
    set_base_offset(b, end)
    assert lg.append_as_follower(bytes(b)) == len(b)
    assert served(lg)[-1][0] == end
    lg.close()
    assert served(open_log(tmp_path, "follower", clean=False))[-1][0] == end


@pytest.mark.parametrize("step", RESET_STEPS)
def test_kill_during_reset_leaves_old_prefix_or_new_log(tmp_path: Path, step: str) -> None:
    leader = open_log(tmp_path, "leader")
    fill_leader(leader)
    follower = open_log(tmp_path, "follower")
    replicate(leader, follower)
    before = served(follower)
    follower.close()
    _crash(follower.dir, step, "reset", 500)
    lg = open_log(tmp_path, "follower", clean=False)
    # the intent is the first thing written: from there on the next load finishes the reset
    assert served(lg) == [] and before
    assert lg.log_start_offset == lg.end_offset == 500
    assert [p.name for p in lg.dir.glob("*.log")] == [f"{500:020d}.log"]
    assert lg.epochs.entries == [] and lg.producers.producers == {}
    assert lg.producers.aborted == [] and not list(lg.dir.glob("*.snapshot"))
    assert "reset_to" not in json.loads((lg.dir / META).read_text())
    b = bytearray(encode_batch(rec(99), leader_epoch=9))
    set_base_offset(b, lg.end_offset)
    assert lg.append_as_follower(bytes(b)) == len(b)


# ---- interplay with the cleaner ------------------------------------------------------------------
def test_a_cleaning_pass_from_before_a_truncation_cannot_swap_in(tmp_path: Path) -> None:
    """The cleaner swaps its output in only for the very segment objects it read: the segment a
    truncation cut is a new object, so output made from its old contents is refused even once
    the segment is rolled and closed again."""
    lg = open_log(tmp_path)
    for i in range(20):
        lg.append(plain(i, 2), T0, leader_epoch=1)
    assert len(lg.segments) > 3
    seen = list(lg.segments)
    cut_seg = seen[1]
    lg.truncate_to(cut_seg.base + 2)  # after its first batch
    assert lg.end_offset == cut_seg.base + 2
    assert lg.active is not cut_seg and lg.active.base == cut_seg.base
    while len(lg.segments) < 3:
        lg.append(plain(50), T0, leader_epoch=2)
    assert lg.segments[1].base == cut_seg.base and lg.segments[1] is not lg.active
    assert lg.replace_segments([cut_seg]) is False
    assert lg.segments[0] is seen[0]  # segments below the cut keep their identity


def test_truncation_clamps_the_cleaner_checkpoint(tmp_path: Path) -> None:
    from samsa.storage.manager import LogManager

    mgr = LogManager([tmp_path])
    mgr.detect_clean()
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=400)
    lg = mgr.create("c", 0, cfg)
    for i in range(10):
        lg.append(plain(i), T0, leader_epoch=1)
    mgr.cleaner._set_checkpoint(lg, 8)
    lg.truncate_to(5)
    assert mgr.cleaner.checkpoint(lg) == 5
    lg.truncate_to(7)  # past the end: nothing moves
    assert mgr.cleaner.checkpoint(lg) == 5
    mgr.shutdown()


def test_a_flush_running_across_a_truncation_does_not_overstate_durability(tmp_path: Path) -> None:
    """A flush that started before a truncation finishes after it: the flushed offset (what the
    next flush skips, what the recovery point may move to) must not pass the new log end, or
    records appended there later would be acknowledged as durable without an fsync."""
    async def run() -> None:
        lg = open_log(tmp_path, cfg=LogConfig(segment_bytes=1 << 20))
        for i in range(10):
            lg.append(plain(i), T0, leader_epoch=1)
        task = asyncio.ensure_future(lg.flush())
        await asyncio.sleep(0)  # the fsync is now running in a worker thread
        assert lg._flush_task is not None
        lg.truncate_to(4)
        await task
        assert lg.flushed_offset <= lg.end_offset == 4
        for i in range(3):
            lg.append(plain(20 + i), T0, leader_epoch=2)
        assert lg.flushed_offset < lg.end_offset
        await lg.flush()
        assert lg.flushed_offset == lg.end_offset == 7
        lg.close()
    asyncio.run(run())


def test_log_start_moves_trim_the_epoch_cache(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    for i in range(12):
        lg.append(plain(i), T0, leader_epoch=1 if i < 4 else 3)
    assert lg.epochs.entries == [(1, 0), (3, 4)]
    lg.delete_records(2)
    assert lg.epochs.entries == [(1, 2), (3, 4)]
    lg.delete_records(6)
    assert lg.epochs.entries == [(3, 6)]
    lg.close()
    assert open_log(tmp_path, clean=False).epochs.entries == [(3, 6)]


# ---- power loss (crashfs model: unsynced writes and directory entries may be lost) ---------------
def test_truncation_and_reappend_survive_any_power_loss(tmp_path: Path) -> None:
    """A follower's log A is made durable, truncated at `cut`, and the new leader's B appended
    and flushed. Every disk state a power loss can leave recovers to A (a prefix of it at least
    up to `cut`) or A[:cut] + a prefix of B: never garbage, never a hole; B whole once flushed.
    (B fits in the active segment: a hole from a roll whose old segment's background fsync had
    not finished is the log's general exposure, as in Kafka, not the truncation's.)"""
    import random

    from samsa.testing.crashfs import FsRecorder, NoSync, _Replay, crash_states

    root = tmp_path / "logs"
    root.mkdir()
    cfg = LogConfig(segment_bytes=400, index_interval=100)
    cut = 9

    async def work(recorder: FsRecorder) -> tuple[list, list]:
        lg = PartitionLog.open(root / "t-0", "t", 0, cfg, clean=True)
        for i in range(16):
            lg.append(plain(i), T0, leader_epoch=1)
        await lg.flush()
        a = served(lg)
        recorder.mark("a-durable")
        recorder.mark("truncating")
        lg.truncate_to(cut)
        recorder.mark("truncated")
        lg.config = LogConfig(segment_bytes=1 << 20, index_interval=100)
        data = b""
        for i in range(8):
            b = bytearray(encode_batch(rec(100 + i), leader_epoch=2))
            set_base_offset(b, cut + i)
            data += bytes(b)
        lg.append_as_follower(data)
        await lg.flush()
        b_recs = served(lg)[cut:]
        recorder.mark("b-durable")
        lg.close(clean=False)
        return a, b_recs

    with FsRecorder(root) as recorder:
        a, b = asyncio.run(work(recorder))
    assert len(a) == 16 and len(b) == 8
    ops = recorder.ops
    marks_at = {op[1]: i for i, op in enumerate(ops) if op[0] == "mark"}
    # every crash point of the truncation itself (three variants each), and a sample of the rest
    replay, rng, dense = _Replay(), random.Random(7), []
    for point in range(marks_at["truncated"] + 1):
        if point > marks_at["truncating"]:
            dense += [replay.state(rng, point, v) for v in ("none", "random", "random", "all")]
        replay.step(ops[point])
    failures: list[str] = []
    states = 0
    for state in [*dense, *crash_states(ops, 150, 20261124)]:
        marks = [m[1] for m in state.marks]
        if "a-durable" not in marks:
            continue
        states += 1
        work_dir = tmp_path / "state"
        shutil.rmtree(work_dir, ignore_errors=True)
        state.disk.materialize(work_dir)
        with NoSync():
            try:
                lg = PartitionLog.open(work_dir / "t-0", "t", 0, cfg, clean=False)
                got = served(lg)
                end = lg.end_offset
                nb = bytearray(encode_batch(rec(999), leader_epoch=3))
                set_base_offset(nb, end)
                lg.append_as_follower(bytes(nb))
                again = served(lg)
                lg.close(clean=False)
            except Exception as e:  # recovery must not fail, nor serve a bad CRC
                failures.append(f"op {state.point} ({state.variant}): {e!r}")
                continue
        what = f"op {state.point} ({state.variant}) marks {marks}"
        ok = got == a[:len(got)] or (got[:cut] == a[:cut] and got[cut:] == b[:len(got) - cut])
        if not ok or len(got) < cut:
            failures.append(f"{what}: served {[o for o, _ in got]} is not a prefix")
        elif "b-durable" in marks and got != a[:cut] + b:
            failures.append(f"{what}: flushed records of the new leader lost")
        elif "truncating" not in marks and len(got) < len(a):
            failures.append(f"{what}: durable records lost before the truncation")
        elif again[:-1] != got or again[-1][0] != end:
            failures.append(f"{what}: append after recovery went wrong")
    assert states > 100
    assert not failures, f"{len(failures)} of {states} states failed:\n" + "\n".join(failures[:8])



@pytest.mark.parametrize("cut", [0, 1, 7, 13, 22, 29, 40])
def test_segment_truncate_matches_a_rebuild_from_its_files(tmp_path: Path, cut: int) -> None:
    """Segment.truncate_to leaves the in-memory state (offset and time index, next offset, size,
    max timestamp) and the index files exactly as a load, and a full scan, of the cut files."""
    from samsa.storage.segment import Segment

    lg = open_log(tmp_path, cfg=LogConfig(segment_bytes=1 << 20, index_interval=150))
    ts = [T0 + (i * 37) % 23 for i in range(30)]  # timestamps that go up and down
    for i in range(30):
        b = bytearray(encode_batch([(b"k", b"v%d" % i * (1 + i % 4), [], ts[i])]))
        lg.append(b, T0)
    seg = lg.active
    seg.truncate_to(cut)
    loaded = Segment(lg.dir, 0, 150)
    assert loaded.load_indexes()
    scanned = Segment(lg.dir, 0, 150)
    scanned.recover(validate=True)
    kept = [t for i, t in enumerate(ts) if i < cut]
    for other in (loaded, scanned):
        assert other.size == seg.size and other.next_offset == seg.next_offset == min(cut, 30)
        assert other.max_timestamp == seg.max_timestamp == max(kept, default=-1)
        if kept:
            assert ts[seg.max_timestamp_offset] == max(kept)
    assert list(loaded.idx_off) == list(seg.idx_off) and list(loaded.idx_pos) == list(seg.idx_pos)
    assert list(loaded.t_ts) == list(seg.t_ts) and list(loaded.t_off) == list(seg.t_off)
    assert seg.first_timestamp == (ts[0] if kept else None)
    for o in range(cut):
        assert seg.position_of(o) == scanned.position_of(o)
    assert seg.position_of(cut) is None
    loaded.close()
    scanned.close()


def test_a_gap_wider_than_32_bit_relative_offsets_starts_a_segment(tmp_path: Path) -> None:
    """Index entries hold offsets relative to their segment in 32 bits: a compacted leader's gap
    of billions of offsets must start a new segment (also from an empty active one), not break
    the index write after the data went in."""
    follower = open_log(tmp_path, "follower")
    far, farther = 3_000_000_000, 9_000_000_000
    data = b""
    for base in (0, 1, far, far + 1):
        b = bytearray(encode_batch(rec(base % 5), leader_epoch=1))
        set_base_offset(b, base)
        data += bytes(b)
    assert follower.append_as_follower(data) == len(data)
    assert follower.end_offset == far + 2
    assert [s.base for s in follower.segments] == [0, far]
    assert [o for o, _ in served(follower)] == [0, 1, far, far + 1]
    follower.truncate_to(far)  # the segment at `far` goes; the active one ends at 2
    assert follower.end_offset == 2
    follower.truncate_fully_and_start_at(5)  # an empty active segment at 5
    b = bytearray(encode_batch(rec(1), leader_epoch=2))
    set_base_offset(b, farther)
    assert follower.append_as_follower(bytes(b)) == len(b)
    assert [s.base for s in follower.segments] == [farther]
    assert [o for o, _ in served(follower)] == [farther]
    follower.close()
    again = open_log(tmp_path, "follower", clean=False)
    assert again.end_offset == farther + 1 and [o for o, _ in served(again)] == [farther]


def test_a_trailing_high_watermark_survives_a_crash_before_its_checkpoint(tmp_path: Path) -> None:
    """The moment the high watermark stops following the log end it is written: a kill -9 before
    the periodic checkpoint must not reload it as the log end (the replication simulator's
    seeds 16 and 23: uncommitted records exposed, then truncated)."""
    lg = open_log(tmp_path)
    for i in range(5):
        lg.append(plain(i))
    assert lg.high_watermark == lg.end_offset == 5
    lg.set_high_watermark(3)  # a leader whose ISR grew: followers' positions move it now
    # no close, no flush, no roll, no checkpoint: reopened as after a crash
    again = open_log(tmp_path, clean=False)
    assert again.end_offset == 5
    assert again.high_watermark == 3
