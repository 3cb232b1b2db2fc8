"""Consumer-group benchmark: Samsa vs Tansu, side by side.

    .venv/bin/python bench/groups.py [--quick] [--out FILE]

Runs, one broker at a time on 127.0.0.1 (Samsa first, then Tansu):

1. rebalance times of a classic-protocol group of confluent-kafka consumers, each member in its own
   process (multiprocessing, spawn) reporting its on_assign/on_revoke callbacks with a
   CLOCK_MONOTONIC timestamp over a pipe. Per repetition, on a fresh group and a 6-partition topic:
   a. 3 members subscribe at the same moment -> all three own 2 partitions (first rebalance,
      dominated by group.initial.rebalance.delay.ms);
   b. one member closes cleanly (LeaveGroup) -> both survivors own 3 partitions;
   c. a new member joins the 2-member group -> all three own 2 partitions again;
   d. one member is killed with SIGKILL -> both survivors own 3 partitions (bounded by the session
      timeout, session.timeout.ms=6000);
2. OffsetCommit throughput of one subscribed consumer (assigned 6 partitions) committing explicit
   offsets for its 6 partitions in a loop: synchronous commits, then asynchronous commits (at most
   ASYNC_WINDOW outstanding) ended by waiting for every commit callback and one final sync commit.

Both brokers run with default settings (Samsa: group.initial.rebalance.delay.ms=3000, Kafka's
default; Tansu has no such setting). Results go to stdout and to --out (default
bench/results/groups-latest.md). Every wait is bounded; failures are reported in table cells.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import multiprocessing.connection
import os
import random
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from common import (
    QUIET,
    ROOT,
    BrokerProcess,
    SamsaProcess,
    TansuProcess,
    create_topic,
    delete_topic,
    ensure_alive,
    finish_broker,
    fmt_num,
    log,
    machine_info,
    ratio,
    short_error,
    write_report,
)
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

DEFAULT_OUT = ROOT / "bench" / "results" / "groups-latest.md"

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
INITIAL_DELAY_MS = 3000  # Samsa's group.initial.rebalance.delay.ms (Kafka default), not overridden

FULL_REPS = 5
QUICK_REPS = 2
FULL_COMMIT_SECONDS = 10.0
QUICK_COMMIT_SECONDS = 3.0
ASYNC_WINDOW = 1000  # outstanding async commits at most

READY_TIMEOUT = 60.0       # member process spawned and its consumer created
STABLE_TIMEOUT = 60.0      # fresh group stable (initial delay included)
REBALANCE_TIMEOUT = 30.0   # leave / join
KILL_TIMEOUT = SESSION_TIMEOUT_MS / 1000 + 30.0
SETTLE_S = 1.0             # a stable assignment must stay unchanged this long
DRAIN_TIMEOUT = 60.0       # async commit callbacks
MEMBER_LIFETIME = 900.0    # a member process exits by itself after this long

Scenario = str
FIRST = "first"
LEAVE = "leave"
CLOSE_CALL = "close_call"
JOIN = "join"
KILL = "kill"
KILL_DETECT = "kill_detect"
KILL_REBALANCE = "kill_rebalance"
SCENARIOS: list[tuple[Scenario, str]] = [
    (FIRST, "fresh 3-member group → all own 2 partitions (first rebalance)"),
    (LEAVE, "member closes (LeaveGroup) → both survivors own 3"),
    (CLOSE_CALL, "↳ the leaving member's close() call"),
    (JOIN, "new member joins the 2-member group → all own 2"),
    (KILL, f"member SIGKILLed → both survivors own 3 (session.timeout.ms={SESSION_TIMEOUT_MS})"),
    (KILL_DETECT, "↳ kill → first survivor on_revoke (failure detection)"),
    (KILL_REBALANCE, "↳ first survivor on_revoke → last on_assign"),
]


# --------------------------------------------------------------------------------------------
# Member process (spawned; talks to the parent over one duplex pipe)


def member_main(idx: int, bootstrap: str, group: str, topic: str, conn: Connection) -> None:
    """Events sent: (kind, CLOCK_MONOTONIC seconds, payload). Commands received: "go", "close"."""
    parent = os.getppid()

    def emit(kind: str, payload: Any = None) -> None:
        conn.send((kind, time.monotonic(), payload))

    try:
        c = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": f"bench-member-{idx}",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "error_cb": lambda err: emit("error", str(err)), **QUIET,
        })
    except Exception as e:  # noqa: BLE001 - reported to the parent
        emit("error", short_error(e))
        return

    def on_assign(_c: Consumer, parts: list[TopicPartition]) -> None:
        emit("assign", sorted(p.partition for p in parts))

    def on_revoke(_c: Consumer, parts: list[TopicPartition]) -> None:
        emit("revoke", sorted(p.partition for p in parts))

    def on_lost(_c: Consumer, parts: list[TopicPartition]) -> None:
        emit("lost", sorted(p.partition for p in parts))

    emit("ready")
    deadline = time.monotonic() + MEMBER_LIFETIME
    try:
        if not conn.poll(READY_TIMEOUT * 2) or conn.recv() != "go":
            return
        emit("subscribe")
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        while time.monotonic() < deadline and os.getppid() == parent:
            m = c.poll(0.05)
            if m is not None and m.error() is not None:
                emit("error", str(m.error()))
            if conn.poll(0):
                if conn.recv() == "close":
                    emit("closing")
                    c.close()
                    emit("closed")
                    return
    except (EOFError, BrokenPipeError, OSError):
        pass  # parent gone
    finally:
        try:
            c.close()
        except RuntimeError:
            pass  # already closed


# --------------------------------------------------------------------------------------------
# Parent side


@dataclass
class Member:
    idx: int
    proc: BaseProcess
    conn: Connection
    owned: set[int] | None = None
    assign_t: float = 0.0          # time of the last on_assign
    revoke_ts: list[float] = field(default_factory=list)
    assigns: int = 0
    ready: bool = False
    alive: bool = True
    closing_t: float | None = None
    closed_t: float | None = None


class Fleet:
    """The member processes of one group, and their assignment as reported by their callbacks."""

    def __init__(self, bootstrap: str, group: str, topic: str, errors: list[str]) -> None:
        self.ctx = multiprocessing.get_context("spawn")
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.members: dict[int, Member] = {}
        self.errors = errors  # shared per broker
        self._next = 0

    def spawn(self, n: int) -> list[Member]:
        new = []
        for _ in range(n):
            ours, theirs = self.ctx.Pipe(duplex=True)
            idx = self._next
            self._next += 1
            proc = self.ctx.Process(target=member_main, name=f"member-{idx}", daemon=True,
                                    args=(idx, self.bootstrap, self.group, self.topic, theirs))
            proc.start()
            theirs.close()
            m = self.members[idx] = Member(idx, proc, ours)
            new.append(m)
        self.wait_for(lambda: all(m.ready for m in new), READY_TIMEOUT, "members ready")
        return new

    def go(self, members: list[Member]) -> float:
        t0 = time.monotonic()
        for m in members:
            m.conn.send("go")
        return t0

    def pump(self, timeout: float) -> None:
        conns = {m.conn: m for m in self.members.values() if m.alive}
        if not conns:
            time.sleep(timeout)
            return
        for conn in multiprocessing.connection.wait(list(conns), timeout):
            m = conns[conn]  # type: ignore[index]
            try:
                while m.conn.poll(0):
                    self._handle(m, m.conn.recv())
            except (EOFError, OSError):
                m.alive = False

    def _handle(self, m: Member, event: tuple[str, float, Any]) -> None:
        kind, t, payload = event
        if kind == "ready":
            m.ready = True
        elif kind == "assign":
            m.owned = (m.owned or set()) | set(payload)
            m.assign_t = t
            m.assigns += 1
        elif kind in ("revoke", "lost"):
            m.owned = (m.owned or set()) - set(payload)
            m.revoke_ts.append(t)
        elif kind == "closing":
            m.closing_t = t
        elif kind == "closed":
            m.closed_t = t
        elif kind == "error":
            if len(self.errors) < 200:
                self.errors.append(f"member {m.idx}: {payload}")

    def describe(self) -> str:
        return "; ".join(f"m{m.idx}{'' if m.alive else '(dead)'}: "
                         f"{sorted(m.owned) if m.owned is not None else '-'}"
                         for m in self.members.values())

    def wait_for(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not reached after {timeout:.0f}s "
                                   f"[{self.describe()}]")
            if not any(m.alive for m in self.members.values()):
                raise RuntimeError(f"{what}: all member processes exited [{self.describe()}]")
            self.pump(0.05)

    def balanced(self, members: list[Member], each: int, after: float) -> bool:
        """Every member owns `each` partitions, assigned after `after`, together all of them."""
        owned: set[int] = set()
        for m in members:
            if m.owned is None or len(m.owned) != each or m.assign_t <= after:
                return False
            owned |= m.owned
        return owned == set(range(PARTITIONS))

    def settle(self, members: list[Member], each: int, after: float, what: str) -> float:
        """Wait until balanced and unchanged for SETTLE_S; the time of the last on_assign."""
        deadline = time.monotonic() + STABLE_TIMEOUT
        while True:
            self.wait_for(lambda: self.balanced(members, each, after),
                          max(1.0, deadline - time.monotonic()), what)
            t_done = max(m.assign_t for m in members)
            events = sum(m.assigns + len(m.revoke_ts) for m in members)
            settle_end = time.monotonic() + SETTLE_S
            while time.monotonic() < settle_end:
                self.pump(0.05)
            if sum(m.assigns + len(m.revoke_ts) for m in members) == events:
                return t_done
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: assignment kept changing [{self.describe()}]")

    def close(self, m: Member, timeout: float = 15.0) -> None:
        if m.alive and m.proc.is_alive():
            try:
                m.conn.send("close")
            except OSError:
                pass
        m.proc.join(timeout)
        if m.proc.is_alive():
            m.proc.kill()  # this process's own child, by pid
            m.proc.join(5)
        m.alive = False

    def jitter(self, rng: random.Random) -> None:
        """Wait a random part of a heartbeat interval, pumping events: the members' heartbeats
        run in phase after a rebalance, so acting a fixed time after one would always hit the
        same point of the heartbeat cycle."""
        end = time.monotonic() + rng.uniform(0, HEARTBEAT_INTERVAL_MS / 1000)
        while time.monotonic() < end:
            self.pump(min(0.01, max(0.0, end - time.monotonic())))

    def kill(self, m: Member) -> float:
        assert m.proc.pid is not None
        t0 = time.monotonic()
        os.kill(m.proc.pid, signal.SIGKILL)
        m.proc.join(5)
        return t0

    def shutdown(self) -> None:
        for m in self.members.values():
            try:
                self.close(m, timeout=10.0)
            except Exception:  # noqa: BLE001 - best effort
                pass
            m.conn.close()


def rebalance_rep(bootstrap: str, topic: str, group: str,
                  results: dict[Scenario, list[float | str]], errors: list[str]) -> None:
    """One repetition of scenarios a-d: seconds appended to results; after a failure the failing
    scenario gets the error text and every later one a "skipped" entry."""
    fleet = Fleet(bootstrap, group, topic, errors)
    rng = random.Random(group)
    order = [s for s, _ in SCENARIOS]
    scenario = FIRST
    try:
        a, b, c = fleet.spawn(3)
        t0 = fleet.go([a, b, c])
        t_done = fleet.settle([a, b, c], 2, t0, "3 fresh members own 2 each")
        results[FIRST].append(t_done - t0)
        first_assigns = [m.assigns for m in (a, b, c)]

        scenario = LEAVE
        fleet.jitter(rng)
        c.conn.send("close")
        fleet.wait_for(lambda: c.closing_t is not None, 10, "leaving member starts close()")
        assert c.closing_t is not None
        t0 = c.closing_t
        t_done = fleet.settle([a, b], 3, t0, "survivors own 3 each after LeaveGroup")
        results[LEAVE].append(t_done - t0)

        scenario = CLOSE_CALL
        fleet.wait_for(lambda: c.closed_t is not None, 15, "leaving member's close() returns")
        assert c.closed_t is not None
        results[CLOSE_CALL].append(c.closed_t - t0)
        fleet.close(c)

        scenario = JOIN
        (d,) = fleet.spawn(1)
        t0 = fleet.go([d])
        t_done = fleet.settle([a, b, d], 2, t0, "joining member: all own 2 each")
        results[JOIN].append(t_done - t0)

        scenario = KILL
        fleet.jitter(rng)
        t0 = fleet.kill(d)
        t_done = fleet.settle([a, b], 3, t0, "survivors own 3 each after SIGKILL")
        revokes = [t for m in (a, b) for t in m.revoke_ts if t > t0]
        if not revokes:
            raise RuntimeError("survivors were reassigned without an on_revoke callback")
        results[KILL].append(t_done - t0)
        results[KILL_DETECT].append(min(revokes) - t0)
        results[KILL_REBALANCE].append(t_done - min(revokes))
        log(f"  {group}: first {results[FIRST][-1] * 1000:,.0f} ms (assign callbacks "
            f"{first_assigns}), leave {results[LEAVE][-1] * 1000:,.0f} ms, "
            f"join {results[JOIN][-1] * 1000:,.0f} ms, kill {results[KILL][-1] * 1000:,.0f} ms")
    except Exception as e:  # noqa: BLE001 - into the table
        msg = short_error(e)
        log(f"  {group}: {scenario} failed: {msg}")
        results[scenario].append(msg)
        for later in order[order.index(scenario) + 1:]:
            results[later].append(f"skipped ({scenario} failed)")
    finally:
        fleet.shutdown()


# --------------------------------------------------------------------------------------------
# OffsetCommit throughput


@dataclass
class CommitResult:
    commits: int
    seconds: float
    cpu_s: float

    @property
    def per_s(self) -> float:
        return self.commits / self.seconds

    @property
    def cpu_ms_per_1000(self) -> float:
        return self.cpu_s * 1000 / (self.commits / 1000)


def assigned_consumer(bootstrap: str, group: str, topic: str,
                      extra: dict[str, Any] | None = None) -> tuple[Consumer, list[int]]:
    """A subscribed consumer that owns every partition of the topic."""
    owned: list[int] = []

    def on_assign(_c: Consumer, parts: list[TopicPartition]) -> None:
        owned[:] = sorted(p.partition for p in parts)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "session.timeout.ms": SESSION_TIMEOUT_MS,
                  "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS, "enable.auto.commit": False,
                  **QUIET, **(extra or {})})
    try:
        c.subscribe([topic], on_assign=on_assign)
        deadline = time.monotonic() + STABLE_TIMEOUT
        while len(owned) != PARTITIONS:
            if time.monotonic() > deadline:
                raise TimeoutError(f"commit consumer not assigned all partitions after "
                                   f"{STABLE_TIMEOUT:.0f}s (owns {owned})")
            m = c.poll(0.1)
            err = m.error() if m is not None else None
            if err is not None and err.fatal():
                raise KafkaException(err)
        return c, list(owned)
    except BaseException:
        c.close()
        raise


def check_committed(parts: list[TopicPartition] | None) -> None:
    for tp in parts or []:
        if tp.error is not None:
            raise KafkaException(tp.error)


def commit_sync(broker: BrokerProcess, topic: str, group: str, seconds: float) -> CommitResult:
    c, owned = assigned_consumer(broker.bootstrap, group, topic)
    try:
        n = 0
        cpu0 = broker.cpu_seconds()
        start = time.perf_counter()
        end = start + seconds
        while time.perf_counter() < end:
            n += 1
            check_committed(c.commit(offsets=[TopicPartition(topic, p, n) for p in owned],
                                     asynchronous=False))
            if n % 100 == 0:
                c.poll(0)
        elapsed = time.perf_counter() - start
        cpu = broker.cpu_seconds() - cpu0
        verify_committed(c, topic, owned, n)
        return CommitResult(n, elapsed, cpu)
    finally:
        c.close()


def commit_async(broker: BrokerProcess, topic: str, group: str, seconds: float) -> CommitResult:
    done = [0]
    errors: list[str] = []

    def on_commit(err: KafkaError | None, parts: list[TopicPartition]) -> None:
        done[0] += 1
        if err is not None:
            errors.append(str(err))
        else:
            for tp in parts:
                if tp.error is not None:
                    errors.append(str(tp.error))
                    break

    c, owned = assigned_consumer(broker.bootstrap, group, topic, {"on_commit": on_commit})
    try:
        while c.poll(0.1) is not None:  # serve anything pending before the timed region
            pass
        done[0] = 0
        n = 0
        cpu0 = broker.cpu_seconds()
        start = time.perf_counter()
        end = start + seconds
        while time.perf_counter() < end:
            if n - done[0] >= ASYNC_WINDOW:
                c.poll(0.001)
                continue
            n += 1
            c.commit(offsets=[TopicPartition(topic, p, n) for p in owned], asynchronous=True)
            if n % 50 == 0:
                c.poll(0)
            if errors:
                break
        drain_end = time.monotonic() + DRAIN_TIMEOUT
        while done[0] < n and not errors:
            if time.monotonic() > drain_end:
                raise TimeoutError(f"async commits: {done[0]}/{n} callbacks after "
                                   f"{DRAIN_TIMEOUT:.0f}s")
            c.poll(0.01)
        if errors:
            raise RuntimeError(f"async commit errors ({len(errors)}), first: {errors[0]}")
        n += 1  # the final synchronous commit (flush) counts too
        check_committed(c.commit(offsets=[TopicPartition(topic, p, n) for p in owned],
                                 asynchronous=False))
        elapsed = time.perf_counter() - start
        cpu = broker.cpu_seconds() - cpu0
        verify_committed(c, topic, owned, n)
        return CommitResult(n, elapsed, cpu)
    finally:
        c.close()


def verify_committed(c: Consumer, topic: str, owned: list[int], expected: int) -> None:
    got = c.committed([TopicPartition(topic, p) for p in owned], timeout=10)
    wrong = [(tp.partition, tp.offset) for tp in got if tp.offset != expected]
    if wrong:
        raise RuntimeError(f"OffsetFetch after the run: expected offset {expected}, got {wrong}")


# --------------------------------------------------------------------------------------------
# Driver


@dataclass
class GroupResults:
    name: str
    version: str = ""
    start_error: str | None = None
    rebalance: dict[Scenario, list[float | str]] = field(
        default_factory=lambda: {s: [] for s, _ in SCENARIOS})
    commits: dict[str, CommitResult | str] = field(default_factory=dict)
    member_errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def run_broker(factory: Callable[[Path], BrokerProcess], reps: int, commit_seconds: float,
               run_id: str) -> GroupResults:
    workdir = Path(tempfile.mkdtemp(prefix="samsa-bench-groups-"))
    broker = factory(workdir)
    res = GroupResults(broker.name, version=broker.version())
    t_start = time.monotonic()
    admin: AdminClient | None = None
    try:
        try:
            broker.start()
        except Exception as e:  # noqa: BLE001 - reported in every cell
            res.start_error = f"{broker.name} failed to start: {short_error(e)}"
            log(res.start_error)
            return res
        pid = broker.proc.pid if broker.proc else "?"
        log(f"{broker.name} up at {broker.bootstrap} (pid {pid})")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})

        topic = f"bench-groups-{run_id}"
        try:
            create_topic(admin, topic, PARTITIONS)
            for rep in range(reps):
                ensure_alive(broker, res.notes)
                log(f"{broker.name} rebalance repetition {rep + 1}/{reps}")
                rebalance_rep(broker.bootstrap, topic, f"bench-rebalance-{run_id}-{rep}",
                              res.rebalance, res.member_errors)
        except Exception as e:  # noqa: BLE001
            msg = f"setup: {short_error(e)}"
            log(f"{broker.name} rebalance: {msg}")
            for s, _ in SCENARIOS:
                res.rebalance[s].append(msg)

        topic = f"bench-commits-{run_id}"
        try:
            ensure_alive(broker, res.notes)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
            create_topic(admin, topic, PARTITIONS)
        except Exception as e:  # noqa: BLE001
            res.commits["sync"] = res.commits["async"] = f"setup: {short_error(e)}"
        else:
            for mode, fn in (("sync", commit_sync), ("async", commit_async)):
                try:
                    ensure_alive(broker, res.notes)
                    r = fn(broker, topic, f"bench-commit-{mode}-{run_id}", commit_seconds)
                    res.commits[mode] = r
                    log(f"{broker.name} {mode} commits: {r.per_s:,.0f}/s "
                        f"({r.commits:,} in {r.seconds:.1f} s, broker CPU {r.cpu_s:.1f} s)")
                except Exception as e:  # noqa: BLE001
                    res.commits[mode] = short_error(e)
                    log(f"{broker.name} {mode} commits failed: {res.commits[mode]}")
                    traceback.print_exc()
        for t in (f"bench-groups-{run_id}", topic):
            note = delete_topic(admin, t) if admin is not None else None
            if note:
                res.notes.append(f"{broker.name}: {note}")
        if not broker.alive():
            res.notes.append(f"{broker.name} was not running at the end of its run")
    finally:
        admin = None
        finish_broker(broker, res.notes, workdir)
        res.wall_s = time.monotonic() - t_start
    return res


# --------------------------------------------------------------------------------------------
# Report


def summary(values: list[float | str]) -> tuple[float | None, float | None, str]:
    """(median s, max s, annotation) of the successful runs; annotation has failures."""
    ok = [v for v in values if isinstance(v, float)]
    bad = [v for v in values if isinstance(v, str)]
    if not ok:
        return None, None, f"error: {bad[0]}" if bad else "not run"
    note = f" ({len(ok)}/{len(values)} ok)" if bad else ""
    return statistics.median(ok), max(ok), note


def ratio_fine(a: float | None, b: float | None) -> str:
    """Samsa/Tansu with enough digits for ratios far below 1."""
    if a is None or b is None or b == 0:
        return "—"
    r = a / b
    return f"{r:.3f}×" if r < 0.1 else f"{r:.2f}×"


def ms(x: float) -> str:
    return f"{x * 1000:,.0f}"


def render(samsa: GroupResults, tansu: GroupResults, args: argparse.Namespace, reps: int,
           commit_seconds: float, started: dt.datetime, wall_s: float) -> str:
    out: list[str] = []
    mode = "quick" if args.quick else "full"
    out.append(f"# Samsa vs Tansu consumer-group benchmark ({mode})")
    out.append("")
    out.append(f"Run {started:%Y-%m-%d %H:%M:%S} UTC, {wall_s:.0f} s total "
               f"(Samsa {samsa.wall_s:.0f} s, Tansu {tansu.wall_s:.0f} s).")
    out.append("")
    out.append("## Setup")
    out.append("")
    out.extend(machine_info())
    out.append(f"- Samsa: {samsa.version}; default settings (group.initial.rebalance.delay.ms="
               f"{INITIAL_DELAY_MS}, Kafka's default), disk log in a temp dir")
    out.append(f"- Tansu: {tansu.version}; `--storage-engine memory://tansu/`; it has no "
               "initial-rebalance-delay setting")
    out.append(f"- Group members: confluent-kafka consumers, one process each (multiprocessing "
               f"spawn), classic protocol, default assignor (range,roundrobin: eager), "
               f"session.timeout.ms={SESSION_TIMEOUT_MS}, "
               f"heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS} (survivors learn of a rebalance "
               "from a heartbeat response, so this bounds leave/join detection), "
               f"{PARTITIONS}-partition topic (empty), poll(50 ms) loop.")
    out.append("- Times come from on_assign/on_revoke callbacks stamped with CLOCK_MONOTONIC "
               "in the member processes; a state counts once it has held unchanged for "
               f"{SETTLE_S:.0f} s. Brokers run one at a time on 127.0.0.1.")
    for r in (samsa, tansu):
        if r.start_error:
            out.append(f"- **{r.start_error}**")
    out.append("")

    out.append("## Rebalance time")
    out.append("")
    out.append(f"Milliseconds, median and max over {reps} repetitions (fresh group each); lower "
               "is better. Ratio = Samsa median / Tansu median (<1 means Samsa faster). "
               "First rebalance starts when all three members subscribe at once; leave starts "
               "when the leaving member calls close(); join when the new member subscribes; "
               "kill when SIGKILL is sent.")
    out.append("")
    out.append("| scenario | Samsa median | Samsa max | Tansu median | Tansu max | Samsa/Tansu |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for s, label in SCENARIOS:
        row = [label]
        meds: list[float | None] = []
        for r in (samsa, tansu):
            if r.start_error:
                row += [f"{r.name} not run (see Setup)", ""]
                meds.append(None)
                continue
            med, top, note = summary(r.rebalance[s])
            if med is None or top is None:
                row += [note, ""]
            else:
                row += [ms(med) + note, ms(top)]
            meds.append(med)
        row.append(ratio_fine(meds[0], meds[1]))
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.append("Reading the numbers:")
    out.append("")
    out.append(f"- First rebalance: Samsa waits group.initial.rebalance.delay.ms={INITIAL_DELAY_MS} "
               "for an empty group and, as Kafka's InitialDelayedJoin does, waits once more "
               "when members arrived during the first delay, hence ≈2× the delay here.")
    out.append(f"- Leave/join: survivors learn of a rebalance on their next heartbeat (≤ "
               f"heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}); the close and the kill are "
               "placed at a random point of the heartbeat cycle.")
    out.append(f"- Kill: the broker can only notice after session.timeout.ms={SESSION_TIMEOUT_MS} "
               "without a heartbeat from the victim, plus up to one survivor heartbeat "
               "interval; the last row is the rebalance proper after that.")
    out.append("- Tansu 0.6.0, seen in librdkafka `debug=cgrp` logs while writing this "
               "benchmark (not measured by it): every JoinGroup is answered ≈3 s after it "
               "arrives, in every rebalance, not only for an empty group, and a follower's "
               "SyncGroup sometimes waits up to ≈1 s more. That is the ≈3-4 s floor of its "
               "leave/join/kill rows.")
    out.append("")
    out.append("Per-run values (ms):")
    out.append("")
    for r in (samsa, tansu):
        if r.start_error:
            continue
        for s, label in SCENARIOS:
            vals = [ms(v) if isinstance(v, float) else f"error: {v}" for v in r.rebalance[s]]
            out.append(f"- {r.name}, {label}: {', '.join(vals) or 'none'}")
    out.append("")

    out.append("## OffsetCommit throughput")
    out.append("")
    out.append(f"One subscribed consumer owning all {PARTITIONS} partitions commits explicit "
               f"offsets for its {PARTITIONS} partitions (one OffsetCommit request each) for "
               f"{commit_seconds:.0f} s: `commit(offsets=..., asynchronous=False)` in a loop; "
               f"then `asynchronous=True` with at most {ASYNC_WINDOW} outstanding, the time "
               "including waiting for every commit callback and one final synchronous commit. "
               "Afterwards OffsetFetch must return the last offset. Broker CPU = utime+stime "
               "from /proc over the timed region. Ratio = Samsa / Tansu (>1 means Samsa faster).")
    out.append("")
    out.append("| mode | Samsa commits/s | Tansu commits/s | Samsa/Tansu "
               "| broker CPU ms per 1,000 commits (Samsa / Tansu) | commits (Samsa / Tansu) |")
    out.append("|---|---:|---:|---:|---|---|")
    for mode in ("sync", "async"):
        row = [mode]
        rates: list[float | None] = []
        cpu: list[str] = []
        counts: list[str] = []
        for r in (samsa, tansu):
            v = (f"{r.name} not run (see Setup)" if r.start_error
                 else r.commits.get(mode, "not run"))
            if isinstance(v, CommitResult):
                row.append(fmt_num(v.per_s))
                rates.append(v.per_s)
                cpu.append(f"{v.cpu_ms_per_1000:.0f}")
                counts.append(f"{v.commits:,}")
            else:
                row.append(f"error: {v}")
                rates.append(None)
                cpu.append("—")
                counts.append("—")
        row.append(ratio(rates[0], rates[1]))
        row.append(" / ".join(cpu))
        row.append(" / ".join(counts))
        out.append("| " + " | ".join(row) + " |")
    out.append("")

    notes = samsa.notes + tansu.notes
    for r in (samsa, tansu):
        if r.member_errors:
            uniq = list(dict.fromkeys(e.split(": ", 1)[1] for e in r.member_errors))
            notes.append(f"{r.name}: {len(r.member_errors)} client error callback(s) in members, "
                         f"distinct: {'; '.join(u[:200] for u in uniq[:5])}")
    if notes:
        out.append("## Notes")
        out.append("")
        out.extend(f"- {n}" for n in notes)
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Samsa vs Tansu consumer-group benchmark")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_REPS} repetitions, "
                    f"{QUICK_COMMIT_SECONDS:.0f} s commit loops")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    ap.add_argument("--only", choices=("samsa", "tansu"), help="run one broker only (debugging)")
    ap.add_argument("--reps", type=int, help="rebalance repetitions (overrides --quick)")
    ap.add_argument("--commit-seconds", type=float, help="commit loop length (overrides --quick)")
    args = ap.parse_args(argv)

    reps = args.reps or (QUICK_REPS if args.quick else FULL_REPS)
    commit_seconds = args.commit_seconds or (QUICK_COMMIT_SECONDS if args.quick
                                             else FULL_COMMIT_SECONDS)
    started = dt.datetime.now(dt.UTC)
    run_id = f"{int(time.time())}"
    t0 = time.monotonic()
    results: dict[str, GroupResults] = {}
    for name, factory in (("samsa", SamsaProcess), ("tansu", TansuProcess)):
        if args.only and args.only != name:
            results[name] = GroupResults(name, start_error=f"{name} not run (--only)")
            continue
        log(f"=== {name} ===")
        try:
            results[name] = run_broker(factory, reps, commit_seconds, run_id)
        except Exception as e:  # noqa: BLE001 - never lose the other broker's results
            traceback.print_exc()
            results[name] = GroupResults(name, start_error=f"{name} run aborted: "
                                                           f"{short_error(e)}")
    report = render(results["samsa"], results["tansu"], args, reps, commit_seconds, started,
                    time.monotonic() - t0)
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
