"""Idempotence and transaction state of a partition: Kafka's sequence/epoch rules, duplicates of
the last five batches, last stable offset, aborted index, snapshots and expiry."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.protocol.records import encode_batch
from samsa.storage.log import LogConfig, PartitionLog
from samsa.storage.producer_state import ProducerStateError

T0 = 1_700_000_000_000


def batch(pid: int, epoch: int, seq: int, n: int = 1, txn: bool = False) -> bytearray:
    return bytearray(encode_batch([(b"k", b"v%d" % i, [], T0) for i in range(n)],
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  attributes_extra=0x10 if txn else 0))


def open_log(d: Path) -> PartitionLog:
    return PartitionLog.open(d / "t-0", "t", 0, LogConfig(), clean=True)


def test_duplicates_of_recent_batches_get_their_original_offset(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    offsets = [lg.append(batch(1, 0, seq * 2, n=2), T0)[0] for seq in range(7)]
    assert offsets == [0, 2, 4, 6, 8, 10, 12]
    end = lg.end_offset
    # a retry of any of the last five batches is acknowledged with its offset, not appended
    for seq in range(2, 7):
        assert lg.append(batch(1, 0, seq * 2, n=2), T0)[0] == offsets[seq]
    assert lg.end_offset == end
    with pytest.raises(ProducerStateError) as e:  # older than the cache: a sequence gap
        lg.append(batch(1, 0, 0, n=2), T0)
    assert e.value.code == 45
    with pytest.raises(ProducerStateError) as e:  # a gap
        lg.append(batch(1, 0, 20), T0)
    assert e.value.code == 45
    assert lg.append(batch(1, 0, 14), T0)[0] == end  # the next sequence is fine


def test_epochs_fence_and_restart_sequences(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append(batch(5, 3, 0), T0)
    with pytest.raises(ProducerStateError) as e:
        lg.append(batch(5, 2, 1), T0)
    assert e.value.code == 47  # INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerStateError) as e:
        lg.append(batch(5, 4, 7), T0)
    assert e.value.code == 45  # a new epoch must start at sequence 0
    lg.append(batch(5, 4, 0), T0)
    lg.append(batch(99, 0, 1234), T0)  # an unknown producer is accepted at any sequence


def test_transactions_move_the_lso_and_index_aborts(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append(batch(-1, -1, -1), T0)  # 0: plain
    lg.append(batch(7, 0, 0, n=2, txn=True), T0)  # 1-2: open transaction
    lg.append(batch(-1, -1, -1), T0)  # 3
    assert lg.last_stable_offset == 1 and lg.high_watermark == 4
    assert lg.read(0, 1 << 20, upper=lg.last_stable_offset)  # only offset 0 is readable
    marker = lg.append_marker(7, 0, 0, 0, T0)  # abort
    assert marker == 4 and lg.last_stable_offset == 5
    assert [(a.producer_id, a.first_offset, a.last_offset)
            for a in lg.producers.aborted_between(0, 5)] == [(7, 1, 4)]
    lg.append(batch(7, 0, 2, txn=True), T0)  # 5: a new transaction
    lg.append_marker(7, 0, 1, 0, T0)  # 6: commit
    assert lg.last_stable_offset == lg.high_watermark == 7
    lg.close(clean=False)
    again = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), clean=False)
    assert again.last_stable_offset == 7
    assert [(a.first_offset, a.last_offset) for a in again.producers.aborted_between(0, 7)] == \
        [(1, 4)]
    with pytest.raises(ProducerStateError):  # the producer's sequences were rebuilt too
        again.append(batch(7, 0, 9), T0)


def test_open_transaction_survives_restart_and_idle_producers_expire(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    lg.append(batch(3, 0, 0, txn=True), T0)
    lg.append(batch(4, 0, 0), T0)
    lg.roll()  # snapshots the producer state
    lg.append(batch(4, 0, 1), T0)
    lg.close(clean=False)
    again = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), clean=False)
    assert again.last_stable_offset == 0  # producer 3's transaction is still open
    assert again.producers.expire(T0 + 10**9, 1000) == 1  # 4 goes; 3 has an open transaction
    assert set(again.producers.producers) == {3}
