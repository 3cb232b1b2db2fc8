"""The leader epoch cache: Kafka's leader-epoch-checkpoint format and LeaderEpochFileCache rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.protocol.records import encode_batch
from samsa.storage.leader_epoch import FILE_NAME, UNDEFINED, LeaderEpochCache
from samsa.storage.log import LogConfig, PartitionLog


def cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache(tmp_path / FILE_NAME)
    for e, o in entries:
        c.assign(e, o)
    return c


# ---- file format ---------------------------------------------------------------------------------
def test_missing_file_is_an_empty_cache(tmp_path: Path) -> None:
    c = cache(tmp_path)
    assert c.entries == [] and c.latest_epoch == -1 and not c.needs_rebuild
    assert not (tmp_path / FILE_NAME).exists()


def test_file_is_kafkas_text_format_and_round_trips(tmp_path: Path) -> None:
    cache(tmp_path, (0, 0), (2, 15), (5, 40))
    assert (tmp_path / FILE_NAME).read_text() == "0\n3\n0 0\n2 15\n5 40\n"
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()
    again = LeaderEpochCache(tmp_path / FILE_NAME)
    assert again.entries == [(0, 0), (2, 15), (5, 40)] and again.latest_epoch == 5


def test_reads_a_file_kafka_wrote(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text("0\n2\n3 0\n7 1200\n")
    assert LeaderEpochCache(tmp_path / FILE_NAME).entries == [(3, 0), (7, 1200)]


@pytest.mark.parametrize("text", [
    "1\n1\n0 0\n",          # unknown version
    "0\n3\n0 0\n1 5\n",     # count does not match
    "0\n1\n0 x\n",          # not a number
    "0\n1\n0 0 0\n",        # three fields
    "0\n2\n4 10\n2 20\n",   # epochs not increasing
    "0\n2\n2 10\n4 5\n",    # offsets decreasing
    "",                     # empty (torn)
    "0\n",                  # truncated before the count
])
def test_malformed_file_asks_for_a_rebuild(tmp_path: Path, text: str) -> None:
    (tmp_path / FILE_NAME).write_text(text)
    c = LeaderEpochCache(tmp_path / FILE_NAME)
    assert c.needs_rebuild and c.entries == []


def test_malformed_file_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    lg = PartitionLog.open(d, "t", 0, LogConfig(segment_bytes=300), clean=True)
    for i, epoch in enumerate([1, 1, 3, 3, 3, 4]):
        lg.append(bytearray(encode_batch([(None, b"v%d" % i * 20, [], 1)])), 1, leader_epoch=epoch)
    assert lg.epochs.entries == [(1, 0), (3, 2), (4, 5)]
    assert len(lg.segments) > 1
    lg.close()
    (d / FILE_NAME).write_text("0\n9\ngarbage")
    again = PartitionLog.open(d, "t", 0, LogConfig(segment_bytes=300), clean=False)
    assert again.epochs.entries == [(1, 0), (3, 2), (4, 5)]
    assert (d / FILE_NAME).read_text() == "0\n3\n1 0\n3 2\n4 5\n"
    again.close()


# ---- assign ----------------------------------------------------------------------------------------
def test_assign_same_epoch_later_offset_is_a_noop(tmp_path: Path) -> None:
    c = cache(tmp_path, (1, 10))
    before = (tmp_path / FILE_NAME).stat().st_mtime_ns
    c.assign(1, 20)
    assert c.entries == [(1, 10)]
    assert (tmp_path / FILE_NAME).stat().st_mtime_ns == before


def test_assign_same_epoch_earlier_offset_moves_its_start(tmp_path: Path) -> None:
    c = cache(tmp_path, (0, 0), (1, 10))
    c.assign(1, 5)
    assert c.entries == [(0, 0), (1, 5)]


def test_assign_older_epoch_drops_conflicting_later_entries(tmp_path: Path) -> None:
    c = cache(tmp_path, (0, 0), (2, 10), (3, 20))
    c.assign(1, 15)  # epochs >= 1 go, and so would any starting at or after 15
    assert c.entries == [(0, 0), (1, 15)]
    (tmp_path / "x").mkdir()
    c2 = cache(tmp_path / "x", (0, 0), (2, 10))
    c2.assign(5, 5)  # a newer epoch at an earlier offset: the later-starting entry goes
    assert c2.entries == [(0, 0), (5, 5)]


def test_assign_rejects_negative(tmp_path: Path) -> None:
    c = cache(tmp_path)
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    with pytest.raises(ValueError):
        c.assign(0, -1)


# ---- endOffsetFor -----------------------------------------------------------------------------------
def test_end_offset_for_kafka_cases(tmp_path: Path) -> None:
    c = cache(tmp_path, (2, 10), (4, 30), (7, 50))
    leo = 80
    assert c.end_offset_for(-1, leo) == UNDEFINED           # undefined epoch
    assert c.end_offset_for(7, leo) == (7, leo)             # the latest: the log end
    assert c.end_offset_for(8, leo) == UNDEFINED            # above every known epoch
    assert c.end_offset_for(2, leo) == (2, 30)              # a known epoch: next one's start
    assert c.end_offset_for(4, leo) == (4, 50)
    assert c.end_offset_for(3, leo) == (2, 30)              # between entries: floor epoch
    assert c.end_offset_for(5, leo) == (4, 50)
    assert c.end_offset_for(6, leo) == (4, 50)
    assert c.end_offset_for(1, leo) == (1, 10)              # below every known: first start
    assert c.end_offset_for(0, leo) == (0, 10)


def test_end_offset_for_empty_cache_is_undefined(tmp_path: Path) -> None:
    c = cache(tmp_path)
    assert c.end_offset_for(0, 10) == UNDEFINED
    assert c.end_offset_for(-1, 10) == UNDEFINED


# ---- truncation -----------------------------------------------------------------------------------
def test_truncate_from_end(tmp_path: Path) -> None:
    c = cache(tmp_path, (1, 0), (2, 10), (3, 20))
    c.truncate_from_end(25)  # nothing starts at or after 25
    assert c.entries == [(1, 0), (2, 10), (3, 20)]
    c.truncate_from_end(20)  # an entry starting exactly there goes
    assert c.entries == [(1, 0), (2, 10)]
    c.truncate_from_end(5)
    assert c.entries == [(1, 0)]
    assert LeaderEpochCache(tmp_path / FILE_NAME).entries == [(1, 0)]
    c.truncate_from_end(0)
    assert c.entries == [] and c.latest_epoch == -1
    assert LeaderEpochCache(tmp_path / FILE_NAME).entries == []


def test_truncate_from_start(tmp_path: Path) -> None:
    c = cache(tmp_path, (1, 0), (2, 10), (3, 20))
    c.truncate_from_start(0)
    assert c.entries == [(1, 0), (2, 10), (3, 20)]
    c.truncate_from_start(12)  # the latest entry at or before 12 moves to 12
    assert c.entries == [(2, 12), (3, 20)]
    c.truncate_from_start(20)  # exclusive: an entry exactly at the start stays
    assert c.entries == [(3, 20)]
    c.truncate_from_start(35)
    assert c.entries == [(3, 35)]
    assert LeaderEpochCache(tmp_path / FILE_NAME).entries == [(3, 35)]
    c.truncate_from_start(1)  # before the first entry: nothing
    assert c.entries == [(3, 35)]


def test_epoch_for_offset(tmp_path: Path) -> None:
    c = cache(tmp_path, (1, 5), (3, 20))
    assert [c.epoch_for_offset(o) for o in (0, 5, 19, 20, 99)] == [-1, 1, 1, 3, 3]


def test_failed_write_leaves_the_entries_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append whose epoch entry cannot be written fails; the retry must try the write again,
    not find the epoch already known in memory (the file would then never hold it)."""
    import errno

    from samsa.storage import fsio

    d = tmp_path / "t-0"
    lg = PartitionLog.open(d, "t", 0, LogConfig(), clean=True)
    lg.append(bytearray(encode_batch([(None, b"a", [], 1)])), 1, leader_epoch=1)
    real = fsio.replace_file

    def full(*a: object, **k: object) -> None:
        raise OSError(errno.ENOSPC, "no space")

    monkeypatch.setattr(fsio, "replace_file", full)
    with pytest.raises(OSError):
        lg.append(bytearray(encode_batch([(None, b"b", [], 1)])), 1, leader_epoch=2)
    assert lg.epochs.entries == [(1, 0)] and lg.end_offset == 1
    monkeypatch.setattr(fsio, "replace_file", real)
    lg.append(bytearray(encode_batch([(None, b"b", [], 1)])), 1, leader_epoch=2)
    assert LeaderEpochCache(d / FILE_NAME).entries == [(1, 0), (2, 1)]
