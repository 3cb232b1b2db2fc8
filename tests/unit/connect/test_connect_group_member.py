"""WorkerGroupMember without a broker: worker configs, what it tells the herder when an
assignment arrives (revocations first, the whole assignment after, rejoins), and revoking
everything when no coordinator can be reached (KAFKA-9184). Against a real broker:
tests/integration/connect/test_connect_group.py."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from samsa.connect.runtime.group.member import MemberConfig, WorkerGroupMember
from samsa.connect.runtime.group.protocol import CONFIG_MISMATCH, Assignment
from samsa.connect.runtime.status import ConnectorTaskId as T
from samsa.connect.runtime.worker_config import WorkerConfig
from samsa.testing import free_port


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def metadata(self) -> tuple[str, int]:
        return "http://me:8083/", 3

    def config_snapshot(self) -> tuple[int, Mapping[str, int]]:
        return 3, {}

    def on_revoked(self, connectors: Sequence[str], tasks: Sequence[T]) -> None:
        self.calls.append(("revoked", (tuple(connectors), tuple(tasks))))

    def on_assigned(self, assignment: Assignment, generation: int) -> None:
        self.calls.append(("assigned", (assignment, generation)))


def test_config_from_worker_properties() -> None:
    wc = WorkerConfig({"group.id": "connect-cluster", "bootstrap.servers": "a:1,b:2",
                       "config.storage.topic": "c", "offset.storage.topic": "o",
                       "status.storage.topic": "s", "session.timeout.ms": "7000",
                       "connect.protocol": "eager", "key.converter": "x",
                       "value.converter": "x"}, distributed=True)
    cfg = MemberConfig.from_worker_config(wc, None)
    assert (cfg.group_id, cfg.session_timeout_ms, cfg.heartbeat_interval_ms) == \
        ("connect-cluster", 7000, 3000)
    assert cfg.servers() == [("a", 1), ("b", 2)]
    assert cfg.connect_protocol == "compatible"  # never eager (docs/compatibility.md)
    cfg = MemberConfig.from_worker_config({"group.id": "connect-cluster",
                                           "bootstrap.servers": "PLAINTEXT://a:9092, b:9093",
                                           "heartbeat.interval.ms": "1000"})
    assert (cfg.session_timeout_ms, cfg.rebalance_timeout_ms, cfg.heartbeat_interval_ms) == \
        (10_000, 60_000, 1000)
    assert cfg.scheduled_rebalance_max_delay_ms == 300_000 and cfg.connect_protocol == "sessioned"
    assert cfg.servers() == [("a", 9092), ("b", 9093)]
    with pytest.raises(ValueError):
        MemberConfig("g", bootstrap_servers="nohostport").servers()


def test_assignments_reach_the_herder_in_order() -> None:
    asyncio.run(_assignments())


async def _assignments() -> None:
    rec = Recorder()
    m = WorkerGroupMember(MemberConfig("g", "127.0.0.1:1"), rec)
    m.member_id, m.generation, m.leader_id = "me", 4, "me"
    first = Assignment(leader="me", leader_url="u", config_offset=3, connectors=("a", "b"),
                       tasks=(T("a", 0), T("b", 0)))
    m._rejoin_needed = False
    m._on_join_complete(first)
    assert rec.calls == [("assigned", (first, 4))]
    assert not m._rejoin_needed and m._rejoin_at is None

    m.generation = 5
    second = Assignment(leader="me", leader_url="u", config_offset=3, tasks=(T("c", 0),),
                        revoked_connectors=("b",), revoked_tasks=(T("a", 0),))
    m._on_join_complete(second)
    kind, (revoked_c, revoked_t) = rec.calls[1]  # type: ignore[misc]
    assert kind == "revoked" and revoked_c == ("b",) and revoked_t == (T("a", 0),)
    kind, (whole, gen) = rec.calls[2]  # type: ignore[misc]
    assert kind == "assigned" and gen == 5
    assert whole.connectors == ("a",) and whole.tasks == (T("b", 0), T("c", 0))
    assert m._rejoin_needed  # after revoking, rejoin so the work can move
    assert m.assignment == whole

    m._rejoin_needed = False
    m._on_join_complete(Assignment(leader="me", leader_url="u", config_offset=3, delay_ms=700))
    assert not m._rejoin_needed and m._rejoin_at is not None  # rejoin when the delay ends
    assert m.assignment is not None and m.assignment.tasks == whole.tasks

    m._rejoin_at = None
    failed = Assignment(error=CONFIG_MISMATCH, leader="me", leader_url="u", config_offset=9)
    m._on_join_complete(failed)
    _, (got, _) = rec.calls[-1]  # type: ignore[misc]
    assert got.failed and got.config_offset == 9
    assert got.tasks == whole.tasks  # a failed round stops nothing
    assert m._rejoin_at is not None


def test_unreachable_coordinator_revokes_everything() -> None:
    asyncio.run(_unreachable())


async def _unreachable() -> None:
    rec = Recorder()
    port = free_port()  # nothing listens there
    m = WorkerGroupMember(MemberConfig("g", f"127.0.0.1:{port}", heartbeat_interval_ms=200,
                                       retry_backoff_ms=20), rec)
    m.assignment = Assignment(leader="x", connectors=("a",), tasks=(T("a", 0),))
    try:
        await asyncio.wait_for(m.poll(0.5), 10)
    finally:
        await m.close()
    assert rec.calls[0] == ("revoked", (("a",), (T("a", 0),)))
    assert m.assignment is None
    assert len([c for c in rec.calls if c[0] == "revoked"]) == 1  # once, not per attempt


def test_own_thread_start_and_stop() -> None:
    """A herder without a loop: start() runs the member on a thread of its own, stop() ends it
    (here with no coordinator to reach, so it is still looking when stopped)."""
    rec = Recorder()
    m = WorkerGroupMember(MemberConfig("g", f"127.0.0.1:{free_port()}",
                                       heartbeat_interval_ms=100, retry_backoff_ms=20), rec)
    runner = m.start()
    assert runner.is_alive()  # type: ignore[union-attr]
    m.request_rejoin()  # from another thread than the member's: must not break anything
    m.stop(timeout_s=10)
    assert not runner.is_alive()  # type: ignore[union-attr]
    assert m.error is None
