"""The leader's replica bookkeeping (samsa/cluster/replication/leader.py): high watermark over the
maximal ISR, Kafka's caught-up clock, ISR expansion and shrink decisions."""

from __future__ import annotations

from samsa.cluster.replication.leader import LeaderState

LAG = 30_000


def elected(isr: tuple[int, ...] = (1, 2, 3), leo: int = 10, now: int = 0) -> LeaderState:
    return LeaderState.elected(1, (1, 2, 3), isr, leader_epoch=5, partition_epoch=7, leo=leo,
                               now_ms=now)


def test_high_watermark_waits_for_every_isr_member_to_fetch() -> None:
    st = elected()
    assert st.high_watermark(20) is None  # followers' positions unknown in this epoch
    st.on_fetch(2, 15, 100, leader_leo=20, now_ms=1)
    assert st.high_watermark(20) is None
    st.on_fetch(3, 12, 100, leader_leo=20, now_ms=1)
    assert st.high_watermark(20) == 12
    st.on_fetch(3, 20, 100, leader_leo=20, now_ms=2)
    assert st.high_watermark(20) == 15


def test_out_of_sync_replica_does_not_hold_the_high_watermark() -> None:
    st = elected(isr=(1, 2))
    st.on_fetch(2, 18, 100, leader_leo=20, now_ms=1)
    st.on_fetch(3, 3, 100, leader_leo=20, now_ms=1)
    assert st.high_watermark(20) == 18


def test_sole_leader_high_watermark_is_its_log_end() -> None:
    st = elected(isr=(1,))
    assert st.high_watermark(42) == 42


def test_expansion_needs_high_watermark_and_epoch_start() -> None:
    st = elected(isr=(1, 2), leo=10)
    st.on_fetch(2, 30, 100, leader_leo=30, now_ms=1)
    st.on_fetch(3, 9, 100, leader_leo=30, now_ms=1)
    assert st.expansion(hw=30, eligible={1, 2, 3}) is None  # 3 is below the HW
    st.on_fetch(3, 30, 101, leader_leo=30, now_ms=2)
    assert st.expansion(hw=30, eligible={1, 2}) is None  # 3 is fenced
    change = st.expansion(hw=30, eligible={1, 2, 3})
    assert change is not None and change.isr == (1, 2, 3) and change.epochs == (-1, 100, 101)
    assert change.partition_epoch == 7 and change.leader_epoch == 5
    # one change in flight at a time; meanwhile the maximal ISR counts replica 3
    assert st.expansion(hw=30, eligible={1, 2, 3}) is None
    assert st.maximal_isr() == (1, 2, 3)


def test_expansion_below_epoch_start_is_refused() -> None:
    st = elected(isr=(1, 2), leo=50)  # the leader's epoch starts at 50
    st.on_fetch(2, 40, 100, leader_leo=50, now_ms=1)
    st.on_fetch(3, 45, 100, leader_leo=50, now_ms=1)
    assert st.expansion(hw=40, eligible={1, 2, 3}) is None


def test_shrink_after_lag_time_without_catching_up() -> None:
    st = elected(now=0)
    st.on_fetch(2, 10, 100, leader_leo=10, now_ms=1_000)  # caught up at 1 s
    st.on_fetch(3, 10, 100, leader_leo=10, now_ms=1_000)
    # both keep fetching; 2 keeps up, 3 stalls at 10 while the leader grows
    for t in range(2_000, 40_000, 1_000):
        st.on_fetch(2, 10 + t // 1000, 100, leader_leo=10 + t // 1000, now_ms=t)
        st.on_fetch(3, 10, 100, leader_leo=10 + t // 1000, now_ms=t)
    assert st.shrink(20_000, LAG, leader_leo=49) is None  # not yet 30 s
    change = st.shrink(39_000, LAG, leader_leo=49)
    assert change is not None and change.isr == (1, 2)


def test_follower_that_keeps_up_with_previous_leo_stays() -> None:
    """Kafka: a fetch that reaches the leader's LEO of the previous fetch counts as caught up at
    the previous fetch's time, so a follower always one fetch behind a busy leader stays."""
    st = elected(isr=(1, 2))
    leo = 10
    for t in range(1_000, 100_000, 500):
        prev = leo
        leo += 5
        st.on_fetch(2, prev, 100, leader_leo=leo, now_ms=t)
    assert st.shrink(100_000, LAG, leader_leo=leo) is None


def test_change_done_and_image_update() -> None:
    st = elected(isr=(1, 2))
    st.on_fetch(3, 10, 100, leader_leo=10, now_ms=1)
    st.on_fetch(2, 10, 100, leader_leo=10, now_ms=1)
    change = st.expansion(hw=10, eligible={1, 2, 3})
    assert change is not None
    st.change_done(change, (1, 2, 3), 8)
    assert st.isr == (1, 2, 3) and st.partition_epoch == 8 and st.pending is None
    # an older image update never rolls the state back
    st.update((1, 2, 3), (1, 2), 7, now_ms=2)
    assert st.isr == (1, 2, 3)
    st.update((1, 2, 3), (1, 3), 9, now_ms=2)
    assert st.isr == (1, 3) and st.partition_epoch == 9


def test_rejected_change_clears_pending() -> None:
    st = elected(isr=(1, 2))
    st.on_fetch(3, 10, 100, leader_leo=10, now_ms=1)
    st.on_fetch(2, 10, 100, leader_leo=10, now_ms=1)
    change = st.expansion(hw=10, eligible={1, 2, 3})
    assert change is not None
    st.change_done(change, None, -1)
    assert st.pending is None and st.isr == (1, 2)


def test_late_answer_to_an_older_change_is_ignored() -> None:
    """An answer to a change the image already superseded must not clear the pending one (the
    simulator's seed 7222: it let the HW run over a shrunk ISR)."""
    st = elected(isr=(1, 2))
    st.on_fetch(3, 10, 100, leader_leo=10, now_ms=1)
    st.on_fetch(2, 10, 100, leader_leo=10, now_ms=1)
    old = st.expansion(hw=10, eligible={1, 2, 3})
    assert old is not None
    st.update((1, 2, 3), (1, 2), 8, now_ms=2)  # the image moved on: old dropped
    new = st.expansion(hw=10, eligible={1, 2, 3})
    assert new is not None and new is not old
    st.change_done(old, None, -1)
    assert st.pending is new and st.maximal_isr() == (1, 2, 3)
