"""kill -9 of a tiered broker during uploads and during remote deletions (issue 19): afterwards
every acknowledged record is still readable (from the local log or a whole remote segment), no
segment is half visible, and once the broker has cleaned up no object in the store is orphaned.

The broker kills itself (SIGKILL) at a chosen step of the copy or delete protocol
(samsa.storage.remote.manager.KILL_AT_ENV), so every step is hit; a few more kills come from
outside at arbitrary moments."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from samsa.storage.remote.manager import KILL_AT_ENV
from samsa.testing import SamsaBroker
from tests.tiered_util import (
    SEG,
    TIERED_BROKER,
    assert_store_clean,
    broker_records,
    create,
    produce,
    remote_records,
    wait_for,
)

UPLOAD_STEPS = ["copy-started", "log-copying", "copy-uploaded", "copy-finished"]
DELETE_STEPS = ["expire-start-moved", "delete-started", "delete-log-removed", "delete-removed",
                "delete-finished"]


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[SamsaBroker]:
    b = SamsaBroker(overrides=TIERED_BROKER)
    try:
        yield b
    finally:
        monkeypatch.delenv(KILL_AT_ENV, raising=False)
        b.kill()
        b.close()


def dead(b: SamsaBroker) -> bool:
    return b.proc is None or b.proc.poll() is not None


def crash_loop(b: SamsaBroker, monkeypatch: pytest.MonkeyPatch, topic: str,
               plan: list[str], acked: dict[int, bytes], budget_s: float = 20.0) -> int:
    """Start the broker with each kill step of `plan` armed, produce until it kills itself;
    returns how many self-kills happened."""
    kills = 0
    nxt = max(acked, default=-1) + 1
    for spec in plan:
        monkeypatch.setenv(KILL_AT_ENV, spec)
        try:
            b.start()
        except RuntimeError as e:  # killed before it listened: copying what was there
            assert "exited with -9" in str(e), e
            kills += 1
            b.kill()
            continue
        deadline = time.monotonic() + budget_s
        while not dead(b) and time.monotonic() < deadline:
            got = produce(b.bootstrap, topic, 150, start=nxt, stop=lambda: dead(b),
                          budget_s=5)
            acked.update(got)
            nxt += 150
        kills += dead(b)
        b.kill()
    monkeypatch.delenv(KILL_AT_ENV)
    for _ in range(2):  # and from outside, at an arbitrary moment of copying
        b.start()
        got = produce(b.bootstrap, topic, int(random.uniform(100, 400)), start=nxt)
        acked.update(got)
        nxt += 400
        b.kill()
    return kills


def settle(b: SamsaBroker, topic: str) -> None:
    """Clean start: wait until the dangling copies/deletions are cleaned and copying caught up."""
    b.start()

    def clean() -> bool:
        try:
            assert_store_clean(b, topic)
        except AssertionError:
            return False
        return True
    wait_for(clean, 30, "the remote log manager's cleanup")


def all_records(b: SamsaBroker, topic: str) -> tuple[dict[int, bytes | None], int]:
    remote, segs = remote_records(b, topic)
    local = broker_records(b.bootstrap, topic)
    for off, v in local.items():
        if off in remote:
            assert remote[off] == v
    got = {**remote, **local}
    earliest = min(segs[0].start_offset if segs else min(local), min(local))
    # the read path serves the remote tier: a consumer from the earliest offset reads it all
    assert min(local) == earliest and local == {o: v for o, v in got.items() if o >= earliest}
    return got, earliest


@pytest.mark.slow
def test_kill_9_during_uploads(broker: SamsaBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = "crash-upload"
    broker.start()
    create(broker, topic, **{"local.retention.bytes": str(2 * SEG)})
    acked = produce(broker.bootstrap, topic, 300)
    broker.kill()
    plan = [f"{step}:{n}" for n in (1, 3, 2) for step in UPLOAD_STEPS]  # 12 kills
    kills = crash_loop(broker, monkeypatch, topic, plan, acked)
    assert kills >= 10, f"only {kills} kills during uploads"
    settle(broker, topic)
    got, earliest = all_records(broker, topic)
    assert earliest == 0  # nothing was deleted: retention.ms/bytes are unlimited
    missing = [o for o in acked if got.get(o) != acked[o]]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:5]}"
    _, segs = remote_records(broker, topic)
    assert len(segs) >= 10  # the uploads did go on between the crashes
    for a, b in zip(segs, segs[1:], strict=False):
        assert b.start_offset == a.end_offset + 1
    assert broker.log_text().count("left by an interrupted copy") >= 3


@pytest.mark.slow
def test_kill_9_during_deletions(broker: SamsaBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = "crash-delete"
    broker.start()
    # remote retention deletes old segments all the time as records keep coming
    create(broker, topic, **{"local.retention.bytes": str(2 * SEG),
                             "retention.bytes": str(6 * SEG)})
    acked = produce(broker.bootstrap, topic, 600)
    broker.kill()
    plan = [f"{step}:{n}" for n in (1, 2) for step in DELETE_STEPS]  # 10 kills
    kills = crash_loop(broker, monkeypatch, topic, plan, acked)
    assert kills >= 10, f"only {kills} kills during deletions"
    settle(broker, topic)
    got, earliest = all_records(broker, topic)
    assert earliest > 0  # retention did delete
    end = max(acked) + 1
    # from the earliest offset on, nothing is missing: every acknowledged record is there and
    # the offsets are contiguous (a half-deleted segment would leave a hole)
    assert sorted(o for o in got if o >= earliest) == list(range(earliest, max(got) + 1))
    missing = [o for o in acked if o >= earliest and got.get(o) != acked[o]]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:5]}"
    assert max(got) + 1 >= end - 1
    assert broker.log_text().count("left by an interrupted deletion") >= 1
