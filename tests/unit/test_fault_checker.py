"""The fault checker catches what it claims to: lost, duplicated and moved values, offsets going
backwards, aborted values read committed, group offset regressions, replicas that differ below the
high watermark. Fed histories by hand (the workload classes, not started)."""

from __future__ import annotations

from pathlib import Path

from samsa.protocol.records import encode_batch
from samsa.testing.workload import (
    GroupCommitter,
    IdempotentProducers,
    PartitionInfo,
    Reader,
    Report,
    Seen,
    TxnWriter,
    check_group,
    check_reader,
    check_replicas,
    check_txn,
    check_values,
    segment_batches,
)


def seen(value: str, partition: int = 0, offset: int = 0, epoch: int = 0, topic: str = "t") -> Seen:
    return Seen(topic, partition, offset, value, epoch)


def producers(acked: dict[str, tuple[int, int]], failed: dict[str, str] | None = None,
              sent: list[str] | None = None) -> IdempotentProducers:
    p = IdempotentProducers("unused:1", "t", tag="v")
    p.acked = dict(acked)
    p.failed = dict(failed or {})
    p.sent = list(sent if sent is not None else [*acked, *(failed or {})])
    return p


def test_values_every_acknowledged_once() -> None:
    p = producers({"v-0-0": (0, 0), "v-0-1": (0, 1)}, sent=["v-0-0", "v-0-1", "v-0-2"])
    r = Report()
    check_values(r, p, [seen("v-0-0", 0, 0), seen("v-0-1", 0, 1), seen("v-0-2", 0, 2)])
    assert r.ok and (r.acknowledged, r.lost, r.duplicates, r.unknown, r.unknown_present) == \
        (2, 0, 0, 1, 1)


def test_values_lost_duplicated_moved_and_refused() -> None:
    p = producers({"v-0-0": (0, 0), "v-0-1": (0, 1), "v-0-2": (1, 0)},
                  failed={"v-1-0": "NOT_ENOUGH_REPLICAS", "v-1-1": "_MSG_TIMED_OUT"})
    final = [seen("v-0-0", 0, 0), seen("v-0-0", 0, 5), seen("v-0-2", 1, 3),
             seen("v-1-0", 2, 0), seen("v-1-1", 2, 1)]
    r = Report()
    check_values(r, p, final)
    assert (r.lost, r.duplicates, r.moved, r.failed_present, r.not_enough_replicas_present) == \
        (1, 1, 2, 2, 1)  # v-0-0's last copy is at 0/5, v-0-2 moved to 1/3
    assert not r.ok


def test_values_unacknowledged_duplicate_is_noted_not_judged() -> None:
    p = producers({"v-0-0": (0, 0)}, failed={"v-1-0": "_MSG_TIMED_OUT"})
    r = Report()
    check_values(r, p, [seen("v-0-0", 0, 0), seen("v-1-0", 0, 1), seen("v-1-0", 0, 2)])
    assert (r.duplicates, r.unacked_duplicates, r.failed_present) == (0, 1, 1)
    assert r.ok and r.notes


def test_reader_offsets_backwards_and_aborted() -> None:
    reader = Reader("unused:1", {"t": 1})
    reader.seen = [seen("a", 0, 0), seen("b", 0, 1), seen("c", 0, 1, epoch=1),
                   seen("x", 1, 7), seen("t-0-0", 1, 8)]
    r = Report()
    check_reader(r, reader, aborted={"t-0-0"})
    assert (r.consumed, r.offset_regressions, r.aborted_seen) == (5, 1, 1)


def test_txn_committed_lost_duplicated_aborted_seen() -> None:
    txn = TxnWriter("unused:1", "tx")
    txn.committed = {"t-0-0", "t-0-1", "t-2-0"}
    txn.aborted = {"t-1-0"}
    r = Report()
    check_txn(r, txn, [seen("t-0-0"), seen("t-0-0", offset=4), seen("t-1-0", offset=5)])
    assert (r.txn_committed_lost, r.txn_duplicates, r.aborted_seen) == (2, 1, 1)
    r2 = Report()
    check_txn(r2, txn, [seen("t-0-0"), seen("t-0-1"), seen("t-2-0")])
    assert r2.ok


def test_group_regressions() -> None:
    g = GroupCommitter("unused:1", "t")
    g.events[0] = [("commit", 10, -1), ("fetch", 10, 10), ("commit", 20, -1), ("fetch", 15, 20),
                   ("commit", 18, -1)]
    g.events[1] = [("commit", 5, -1), ("fetch", 5, 5), ("commit", 5, -1)]
    r = Report()
    check_group(r, g)
    assert (r.group_events, r.group_regressions) == (8, 2)


def write_segment(d: Path, batches: list[bytes]) -> None:
    d.mkdir(parents=True)
    (d / f"{0:020d}.log").write_bytes(b"".join(batches))


def batch(base: int, values: list[bytes], epoch: int = 0) -> bytes:
    return encode_batch([(None, v, [], 1_700_000_000_000) for v in values], base_offset=base,
                        leader_epoch=epoch)


def test_replicas_identical_up_to_hw(tmp_path: Path) -> None:
    b0, b1, b2 = batch(0, [b"a", b"b"]), batch(2, [b"c"]), batch(3, [b"d"])
    write_segment(tmp_path / "n1" / "t-0", [b0, b1, b2])
    write_segment(tmp_path / "n2" / "t-0", [b0, b1])  # behind past the HW: not compared
    write_segment(tmp_path / "n3" / "t-0", [b0, batch(2, [b"c"], epoch=1)])
    assert segment_batches(tmp_path / "n1" / "t-0", 3) == b0 + b1
    dirs = {1: tmp_path / "n1", 2: tmp_path / "n2", 3: tmp_path / "n3"}
    r = Report()
    check_replicas(r, dirs, "t", {0: PartitionInfo(1, 0, (1, 2, 3), (1, 2))}, {0: 3})
    assert r.ok and r.partitions_compared == 1
    r = Report()  # node 3 in the ISR with a batch of another leader epoch below the HW
    check_replicas(r, dirs, "t", {0: PartitionInfo(1, 0, (1, 2, 3), (1, 2, 3))}, {0: 3})
    assert r.replica_mismatches == 1 and not r.ok


def test_torn_tail_ends_the_scan(tmp_path: Path) -> None:
    b0 = batch(0, [b"a"])
    write_segment(tmp_path / "t-0", [b0, batch(1, [b"b"])[:20]])
    assert segment_batches(tmp_path / "t-0", 10) == b0


def test_duplicates_under_a_bumped_epoch_are_told_apart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A value written twice by one producer id under two producer epochs is the client's
    re-send after an epoch bump (librdkafka#4953), counted apart; twice under one epoch is the
    broker's idempotence failing, and fails the run."""
    from samsa.protocol.batch import set_base_offset
    from samsa.protocol.records import encode_batch
    from samsa.testing.workload import _epoch_bumped, batch_producer

    def write(topic: str, epochs: list[int]) -> None:
        d = tmp_path / "n1" / f"{topic}-0"
        d.mkdir(parents=True)
        data = bytearray()
        for i, epoch in enumerate(epochs):
            b = bytearray(encode_batch([(None, b"v", [], 0)], producer_id=7,
                                       producer_epoch=epoch, base_sequence=0))
            set_base_offset(b, i)
            data += b
        (d / "00000000000000000000.log").write_bytes(bytes(data))

    write("bumped", [0, 1])
    write("same", [0, 0])
    dirs = {1: tmp_path / "n1"}
    assert batch_producer(dirs[1] / "bumped-0", 1) == (7, 1)
    assert _epoch_bumped([(0, 0), (0, 1)], "bumped", dirs)
    assert not _epoch_bumped([(0, 0), (0, 1)], "same", dirs)
    assert not _epoch_bumped([(0, 0), (0, 1)], "absent", dirs)
