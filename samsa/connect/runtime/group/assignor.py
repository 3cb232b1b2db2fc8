"""The incremental cooperative assignor (KIP-415) the group leader runs: which worker runs which
connector and task, moving work in two rounds so that nothing ever runs twice.

A pure function of the members' metadata, the leader's config snapshot and the state the previous
round left (`AssignorState`): the leader's member keeps that state between rounds; a new leader
starts from nothing, as in Kafka.

The rules (Kafka's):
- Work is only given out when nobody runs it: new connectors/tasks, work revoked in an earlier
  round, and lost work (its worker left). A move is a revocation in one round (the worker stops
  it and rejoins) and an assignment in the next.
- Deleted connectors/tasks and anything running on two workers are revoked at once.
- Lost work waits `scheduled.rebalance.max.delay.ms` for its worker to come back; when the delay
  ends it goes to the workers that joined empty meanwhile (the restarted worker), else is spread
  as new work. With the delay 0, or when no member left, it is reassigned at once.
- Load balancing revokes from workers above their fair share (total // workers, one more for
  total % workers of them), connectors and tasks counted separately; two revoking rounds in a
  row back off (40 ms, 1.6 s, 64 s, ... capped at the max delay) to stop rebalance storms.
- When the leader's snapshot is older than a member's config offset, every member gets
  CONFIG_MISMATCH and nothing else: they re-read the config topic and rejoin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..status import ConnectorTaskId
from .protocol import CONFIG_MISMATCH, CONNECT_PROTOCOL_V2, NO_ERROR, Assignment, WorkerState

DEFAULT_MAX_DELAY_MS = 300_000  # scheduled.rebalance.max.delay.ms


@dataclass(frozen=True)
class ConnectorsAndTasks:
    connectors: frozenset[str] = frozenset()
    tasks: frozenset[ConnectorTaskId] = frozenset()

    @staticmethod
    def of(connectors: Iterable[str] = (), tasks: Iterable[ConnectorTaskId] = ()
           ) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(frozenset(connectors), frozenset(tasks))

    def __or__(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(self.connectors | other.connectors, self.tasks | other.tasks)

    def __sub__(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(self.connectors - other.connectors, self.tasks - other.tasks)

    def __and__(self, other: ConnectorsAndTasks) -> ConnectorsAndTasks:
        return ConnectorsAndTasks(self.connectors & other.connectors, self.tasks & other.tasks)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)


EMPTY = ConnectorsAndTasks()
_Items = Callable[["_Load"], list[Any]]


@dataclass(frozen=True)
class AssignorState:
    """What the leader remembers from its previous round."""

    previous_assignment: ConnectorsAndTasks = EMPTY  # all work as the previous round left it
    previous_revocation: ConnectorsAndTasks = EMPTY  # what that round revoked
    previous_members: frozenset[str] = frozenset()
    previous_generation: int = -1
    revoked_in_previous: bool = False
    successive_revoking_rebalances: int = 0
    candidate_workers: tuple[str, ...] = ()  # joined empty while lost work waits
    scheduled_rebalance_ms: int = 0  # when lost work may be reassigned; 0: nothing waits
    delay_ms: int = 0  # the delay the last assignments carried


@dataclass(frozen=True)
class GroupAssignment:
    """One round's result: each member's assignment (what to start and stop), the state for the
    next round, and who runs what once this round's moves are done (the leader's view)."""

    assignments: dict[str, Assignment]
    state: AssignorState
    connector_owners: dict[str, str] = field(default_factory=dict)
    task_owners: dict[ConnectorTaskId, str] = field(default_factory=dict)


def revoking_backoff_ms(attempt: int, max_delay_ms: int) -> int:
    """Kafka's ExponentialBackoff(1, 40, max delay, no jitter) for successive revoking rounds."""
    if max_delay_ms <= 0:
        return 0
    if max_delay_ms <= 1:
        return 1
    exp = min(float(attempt), math.log(max_delay_ms) / math.log(40))
    return int(min(40 ** exp, max_delay_ms))


def configured_work(connectors: Mapping[str, int]) -> ConnectorsAndTasks:
    return ConnectorsAndTasks.of(
        connectors, (ConnectorTaskId(c, i) for c, n in connectors.items() for i in range(n)))


class _Load:
    """One worker's work as the round builds it (lists keep Kafka's revocation order)."""

    def __init__(self, worker: str, connectors: Iterable[str], tasks: Iterable[ConnectorTaskId]
                 ) -> None:
        self.worker = worker
        self.connectors = sorted(set(connectors))
        self.tasks = sorted(set(tasks))

    def remove(self, ct: ConnectorsAndTasks) -> None:
        self.connectors = [c for c in self.connectors if c not in ct.connectors]
        self.tasks = [t for t in self.tasks if t not in ct.tasks]

    def work(self) -> ConnectorsAndTasks:
        return ConnectorsAndTasks.of(self.connectors, self.tasks)

    def empty(self) -> bool:
        return not (self.connectors or self.tasks)


def assign(leader: str, members: Mapping[str, WorkerState], config_offset: int,
           connectors: Mapping[str, int], state: AssignorState | None = None, *,
           now_ms: int, max_delay_ms: int = DEFAULT_MAX_DELAY_MS,
           version: int = CONNECT_PROTOCOL_V2, generation: int = -1,
           last_completed_generation: int | None = None) -> GroupAssignment:
    """One round of assignment. `members` maps member ids to their JoinGroup metadata (their
    assignment = everything they run now), `connectors` the leader's snapshot at
    `config_offset` ({name: task count}). `generation` is this round's generation and
    `last_completed_generation` the last one the leader's member completed (a mismatch with the
    state's means the previous round never reached the members: its view is dropped)."""
    if leader not in members:
        raise ValueError(f"leader {leader!r} is not among the members")
    state = state or AssignorState()
    leader_url = members[leader].url
    max_offset = max(m.config_offset for m in members.values())
    if config_offset < max_offset:
        failed = Assignment(error=CONFIG_MISMATCH, leader=leader, leader_url=leader_url,
                            config_offset=max_offset, version=version)
        return GroupAssignment({m: failed for m in members}, state)

    held = {m: ConnectorsAndTasks.of(ws.assignment.connectors, ws.assignment.tasks)
            if ws.assignment is not None else EMPTY for m, ws in members.items()}
    previous = state.previous_assignment
    if last_completed_generation is not None and \
            state.previous_generation != last_completed_generation:
        previous = EMPTY
    configured = configured_work(connectors)
    active = EMPTY
    for ct in held.values():
        active = active | ct
    if state.previous_revocation and state.previous_revocation & active:
        previous = active  # a revocation did not take effect: apply it again

    deleted = (previous | active) - configured
    duplicated = _duplicated(held.values())
    lost = previous - active - deleted
    created = configured - previous - active

    to_revoke: dict[str, ConnectorsAndTasks] = {}
    loads = {m: _Load(m, ct.connectors, ct.tasks) for m, ct in sorted(held.items())}
    for m, ct in held.items():
        gone = ct & (deleted | duplicated)
        if gone:
            to_revoke[m] = gone
            loads[m].remove(gone)

    st = _Round(state, now_ms, max_delay_ms)
    lost_to_reassign = st.handle_lost(lost, loads)

    if st.delay_ms == 0:
        balancing = _balancing_revocations(configured, list(loads.values()))
        if st.revoked_in_previous and balancing:
            st.successive += 1
            st.delay_ms = revoking_backoff_ms(st.successive, max_delay_ms)
            if st.delay_ms:
                st.scheduled_ms = now_ms + st.delay_ms
            else:
                _add_revocations(to_revoke, loads, balancing)
        elif balancing:
            _add_revocations(to_revoke, loads, balancing)
            st.revoked_in_previous = True
        elif st.revoked_in_previous:
            st.revoked_in_previous = False
            st.successive = 0
    else:
        st.revoked_in_previous = False

    to_assign = created | lost_to_reassign
    _spread(loads, sorted(to_assign.connectors), lambda ld: ld.connectors)
    _spread(loads, sorted(to_assign.tasks), lambda ld: ld.tasks)

    assignments: dict[str, Assignment] = {}
    connector_owners: dict[str, str] = {}
    task_owners: dict[ConnectorTaskId, str] = {}
    next_all = EMPTY
    revoked_all = EMPTY
    for m in members:
        load = loads[m]
        revoked = to_revoke.get(m, EMPTY)
        revoked_all = revoked_all | revoked
        next_all = next_all | load.work()
        connector_owners.update((c, m) for c in load.connectors)
        task_owners.update((t, m) for t in load.tasks)
        assignments[m] = Assignment(
            error=NO_ERROR, leader=leader, leader_url=leader_url, config_offset=config_offset,
            connectors=tuple(c for c in load.connectors if c not in held[m].connectors),
            tasks=tuple(t for t in load.tasks if t not in held[m].tasks),
            revoked_connectors=tuple(sorted(revoked.connectors)),
            revoked_tasks=tuple(sorted(revoked.tasks)),
            delay_ms=st.delay_ms, version=version)

    new_state = AssignorState(
        previous_assignment=(next_all - revoked_all) | lost,
        previous_revocation=revoked_all,
        previous_members=frozenset(members),
        previous_generation=generation,
        revoked_in_previous=st.revoked_in_previous,
        successive_revoking_rebalances=st.successive,
        candidate_workers=tuple(st.candidates),
        scheduled_rebalance_ms=st.scheduled_ms,
        delay_ms=st.delay_ms)
    return GroupAssignment(assignments, new_state, connector_owners, task_owners)


class _Round:
    """The mutable part of the state while a round runs."""

    def __init__(self, state: AssignorState, now_ms: int, max_delay_ms: int) -> None:
        self.prev = state
        self.now = now_ms
        self.max_delay = max_delay_ms
        self.delay_ms = state.delay_ms
        self.scheduled_ms = state.scheduled_rebalance_ms
        self.candidates = list(state.candidate_workers)
        self.revoked_in_previous = state.revoked_in_previous
        self.successive = state.successive_revoking_rebalances

    def reset_delay(self) -> None:
        self.candidates = []
        self.scheduled_ms = 0
        self.delay_ms = 0

    def handle_lost(self, lost: ConnectorsAndTasks, loads: dict[str, _Load]
                    ) -> ConnectorsAndTasks:
        """Lost work to hand out now as if new; puts work on returning workers itself."""
        if not lost and not self.revoked_in_previous:
            self.reset_delay()
            return EMPTY
        if self.scheduled_ms <= 0 and set(loads) >= self.prev.previous_members:
            return lost  # nobody left: the work was lost by members missing an assignment
        if self.max_delay == 0:
            return lost
        if self.scheduled_ms > 0 and self.now >= self.scheduled_ms:
            candidates = [loads[w] for w in self.candidates if w in loads]
            out = EMPTY
            if candidates:
                for i, c in enumerate(sorted(lost.connectors)):
                    candidates[i % len(candidates)].connectors.append(c)
                for i, t in enumerate(sorted(lost.tasks)):
                    candidates[i % len(candidates)].tasks.append(t)
            else:
                out = lost
            self.reset_delay()
            self.revoked_in_previous = False
            return out
        for w, load in loads.items():
            if load.empty() and w not in self.candidates:
                self.candidates.append(w)
        if self.now < self.scheduled_ms:
            self.delay_ms = min(self.scheduled_ms - self.now, self.max_delay)
        else:
            self.delay_ms = self.max_delay
        self.scheduled_ms = self.now + self.delay_ms
        return EMPTY


def _duplicated(held: Iterable[ConnectorsAndTasks]) -> ConnectorsAndTasks:
    seen_c: set[str] = set()
    seen_t: set[ConnectorTaskId] = set()
    dup_c: set[str] = set()
    dup_t: set[ConnectorTaskId] = set()
    for ct in held:
        dup_c |= seen_c & ct.connectors
        dup_t |= seen_t & ct.tasks
        seen_c |= ct.connectors
        seen_t |= ct.tasks
    return ConnectorsAndTasks.of(dup_c, dup_t)


def _add_revocations(to_revoke: dict[str, ConnectorsAndTasks], loads: dict[str, _Load],
                     revocations: dict[str, ConnectorsAndTasks]) -> None:
    for m, ct in revocations.items():
        to_revoke[m] = to_revoke.get(m, EMPTY) | ct
        loads[m].remove(ct)


def _balancing_revocations(configured: ConnectorsAndTasks, loads: list[_Load]
                           ) -> dict[str, ConnectorsAndTasks]:
    """What to take from workers above their fair share (Kafka's
    performLoadBalancingRevocations): nothing when all are empty or nothing is configured."""
    if not loads or all(ld.empty() for ld in loads) or not configured:
        return {}
    conn = _over_share(len(configured.connectors), loads, lambda ld: ld.connectors)
    tasks = _over_share(len(configured.tasks), loads, lambda ld: ld.tasks)
    out: dict[str, ConnectorsAndTasks] = {}
    for w in sorted(set(conn) | set(tasks)):
        out[w] = ConnectorsAndTasks.of(conn.get(w, ()), tasks.get(w, ()))
    return out


def _over_share(total: int, loads: list[_Load], items: _Items) -> dict[str, list[Any]]:
    n = len(loads)
    floor, extras = divmod(total, n)
    sizes = [len(items(ld)) for ld in loads]
    at_floor = sum(1 for s in sizes if s == floor)
    at_extra = sum(1 for s in sizes if s == floor + 1)
    if at_extra == extras and at_floor + at_extra == n:
        return {}
    out: dict[str, list[Any]] = {}
    given_extra = 0
    for ld in loads:
        size = len(items(ld))
        if size <= floor:
            continue
        if given_extra < extras:
            given_extra += 1
            if size == floor + 1:
                continue
            cap = floor + 1
        else:
            cap = floor
        out[ld.worker] = list(items(ld)[:size - cap])
    return out


def _spread(loads: dict[str, _Load], new: list[Any], items: _Items) -> None:
    """Give each new item to the least-loaded worker (ties: lowest member id)."""
    if not loads:
        return
    for item in new:
        target = min(loads.values(), key=lambda ld: (len(items(ld)), ld.worker))
        items(target).append(item)
