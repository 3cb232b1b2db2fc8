"""`samsa groups` (list, describe, delete, reset-offsets) run as subprocesses against a real broker,
with real confluent-kafka consumers in the test process creating the groups, and committed offsets
checked independently through Consumer.committed()."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker, free_port

pytestmark = pytest.mark.timeout(60)

TOPIC = "grp-orders"
COUNTS = {0: 10, 1: 20, 2: 30}  # messages per partition
COMMITTED = {0: 4, 1: 20, 2: 7}  # what the consumer commits
# message i of every partition has timestamp BASE + i seconds
BASE = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
BASE_MS = int(BASE.timestamp()) * 1000


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0"}) as b:
        make_topic(b.bootstrap, TOPIC)
        yield b


# ---- helpers ------------------------------------------------------------------------------------
def cli(*args: str, bootstrap: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `samsa groups ARGS` (with --bootstrap-server if given); never expect a traceback."""
    argv = [sys.executable, "-m", "samsa.cli.main", "groups", *args]
    if bootstrap is not None:
        argv += ["--bootstrap-server", bootstrap]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def ok(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    r = cli(*args, bootstrap=bootstrap)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r


def make_topic(bs: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, len(COUNTS), 1)])[topic].result(15)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for part, n in COUNTS.items():
        for i in range(n):
            p.produce(topic, value=b"%d-%d" % (part, i), partition=part, timestamp=BASE_MS + i * 1000)
    assert p.flush(20) == 0


def consumer(bs: str, group: str, protocol: str = "classic") -> Consumer:
    conf: dict[str, Any] = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "client.id": f"test-{group}",
                            "group.protocol": protocol}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    return Consumer(conf)


def consume_commit_close(bs: str, group: str, commit: dict[int, int] = COMMITTED) -> None:
    """A real member of `group`: subscribe, read the topic, commit `commit`, leave (group Empty)."""
    c = consumer(bs, group)
    c.subscribe([TOPIC])
    seen: set[tuple[int, int]] = set()
    want = min(sum(COUNTS.values()), sum(commit.values()))
    deadline = time.monotonic() + 20
    while len(seen) < want and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen.add((m.partition() or 0, m.offset() or 0))
    assert len(seen) >= want, f"consumed only {len(seen)} of {want}"
    c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in commit.items()], asynchronous=False)
    c.close()
    # close() does not wait for the LeaveGroup answer: be sure the group is Empty before going on
    wait_for(lambda: group_state(bs, group) == ConsumerGroupState.EMPTY)


def group_state(bs: str, group: str) -> ConsumerGroupState:
    """The group's state straight from the broker (DescribeGroups), not through the CLI."""
    admin = AdminClient({"bootstrap.servers": bs})
    try:
        return admin.describe_consumer_groups([group])[group].result(10).state
    except KafkaException:
        return ConsumerGroupState.DEAD


def committed(bs: str, group: str) -> dict[int, int]:
    """The group's committed offsets as a consumer sees them (-1001 = none)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(TOPIC, p) for p in COUNTS], timeout=15)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def describe_rows(stdout: str) -> list[dict[str, str]]:
    """The per-partition table of `samsa groups describe GROUP` (text output), parsed."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP") and "TOPIC" in line)
    header = lines[start].split()
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(dict(zip(header, line.split(), strict=True)))
    return rows


def describe_json(bs: str, *args: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(ok("describe", *args, "--json", bootstrap=bs).stdout)
    return out


def plan(stdout: str) -> dict[int, int]:
    """NEW-OFFSET by partition from the reset-offsets table."""
    lines = stdout.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], stdout
    return {int(f[2]): int(f[3]) for f in (line.split() for line in lines[1:])}


def listed(bs: str, *args: str) -> dict[str, str]:
    """group -> state from `samsa groups list`."""
    lines = ok("list", *args, bootstrap=bs).stdout.splitlines()
    if not lines:
        return {}
    assert lines[0].split() == ["GROUP", "TYPE", "STATE"]
    return {f[0]: f[2] for f in (line.split() for line in lines[1:])}


class ActiveMember:
    """A consumer subscribed and polling in a thread (its group stays Stable) until stop()."""

    def __init__(self, bs: str, group: str, protocol: str = "classic") -> None:
        self.consumer = consumer(bs, group, protocol)
        self.assigned = threading.Event()
        self.done = threading.Event()
        self.consumer.subscribe([TOPIC], on_assign=lambda c, ps: self.assigned.set())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            self.consumer.poll(0.1)
        self.consumer.close()

    def stop(self) -> None:
        self.done.set()
        self.thread.join(15)


def wait_for(cond: Any, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


# ---- tests --------------------------------------------------------------------------------------
def test_list_and_describe_empty_group(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    consume_commit_close(bs, "g-describe")

    assert listed(bs)["g-describe"] == "Empty"
    assert "g-describe" in listed(bs, "--state", "stable,empty")
    assert "g-describe" not in listed(bs, "--state", "Stable", "PreparingRebalance")
    js = json.loads(ok("list", "--json", bootstrap=bs).stdout)
    assert {"group": "g-describe", "state": "Empty", "type": "Classic"} in js

    r = ok("describe", "g-describe", bootstrap=bs)
    assert "Consumer group 'g-describe' has no active members." in r.stdout
    assert re.search(rf"State: Empty\tCoordinator: 127\.0\.0\.1:{broker.port} \(1\)", r.stdout)
    rows = describe_rows(r.stdout)
    assert [(r["TOPIC"], r["PARTITION"]) for r in rows] == [(TOPIC, "0"), (TOPIC, "1"), (TOPIC, "2")]
    for row in rows:
        p = int(row["PARTITION"])
        assert row["GROUP"] == "g-describe"
        assert int(row["CURRENT-OFFSET"]) == COMMITTED[p]
        assert int(row["LOG-END-OFFSET"]) == COUNTS[p]
        assert int(row["LAG"]) == COUNTS[p] - COMMITTED[p]
        assert row["CONSUMER-ID"] == row["HOST"] == row["CLIENT-ID"] == "-"

    js = describe_json(bs, "g-describe")
    assert js == [{"group": "g-describe", "topic": TOPIC, "partition": p, "current_offset": COMMITTED[p],
                   "log_end_offset": COUNTS[p], "lag": COUNTS[p] - COMMITTED[p], "consumer_id": None,
                   "host": None, "client_id": None} for p in sorted(COUNTS)]
    assert [(x["lag"], type(x["lag"])) for x in js] == [(6, int), (0, int), (23, int)]

    state = describe_json(bs, "g-describe", "--state")
    assert state == [{"group": "g-describe", "coordinator": bs, "coordinator_id": 1,
                      "assignment_strategy": None, "state": "Empty", "type": "Classic", "members": 0}]
    assert describe_json(bs, "g-describe", "--members") == []


def test_active_group_refuses_reset_and_delete(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    consume_commit_close(bs, "g-active")
    member = ActiveMember(bs, "g-active")
    try:
        assert member.assigned.wait(20), "consumer got no assignment"
        wait_for(lambda: group_state(bs, "g-active") == ConsumerGroupState.STABLE)

        # describe shows the member on every partition, offsets as committed
        js = describe_json(bs, "g-active")
        assert {x["partition"]: x["current_offset"] for x in js} == COMMITTED
        assert {x["client_id"] for x in js} == {"test-g-active"}
        assert len({x["consumer_id"] for x in js}) == 1 and js[0]["consumer_id"]
        assert js[0]["host"] == "/127.0.0.1"
        members = describe_json(bs, "g-active", "--members")
        assert len(members) == 1 and members[0]["partitions"] == len(COUNTS)
        r = ok("describe", "g-active", "--members", "--verbose", bootstrap=bs)
        assert f"{TOPIC}(0,1,2)" in r.stdout

        refusal = ("Assignments can only be reset if the group 'g-active' is inactive, "
                   "but the current state is Stable.")
        for mode in ("--execute", "--dry-run"):
            r = cli("reset-offsets", "g-active", "--all-topics", "--to-earliest", mode, bootstrap=bs)
            assert r.returncode == 1, r
            assert refusal in r.stderr
            assert r.stdout == ""

        r = cli("delete", "g-active", bootstrap=bs)
        assert r.returncode == 1
        assert "Group 'g-active' could not be deleted due to: The group is not empty." in r.stderr
        assert "NON_EMPTY_GROUP" in r.stderr
        assert "g-active" in listed(bs)
    finally:
        member.stop()

    assert committed(bs, "g-active") == COMMITTED  # nothing was reset
    wait_for(lambda: group_state(bs, "g-active") == ConsumerGroupState.EMPTY)
    r = ok("delete", "g-active", bootstrap=bs)
    assert "Deletion of requested consumer groups ('g-active') was successful." in r.stdout
    assert "g-active" not in listed(bs)
    assert committed(bs, "g-active") == dict.fromkeys(COUNTS, -1001)  # offsets went with it


def test_kip848_consumer_group(broker: SamsaBroker) -> None:
    """A group of the new consumer protocol (group.protocol=consumer) is listed, described and
    protected from resets like a classic one."""
    bs = broker.bootstrap
    member = ActiveMember(bs, "g-848", protocol="consumer")
    try:
        assert member.assigned.wait(20), "consumer got no assignment"
        wait_for(lambda: group_state(bs, "g-848") == ConsumerGroupState.STABLE)
        assert [x["partitions"] for x in describe_json(bs, "g-848", "--members")] == [len(COUNTS)]
        js = json.loads(ok("list", "--json", bootstrap=bs).stdout)
        assert {"group": "g-848", "state": "Stable", "type": "Consumer"} in js
        rows = describe_json(bs, "g-848")
        assert [x["partition"] for x in rows] == sorted(COUNTS)
        assert {x["client_id"] for x in rows} == {"test-g-848"}
        r = cli("reset-offsets", "g-848", "--topic", TOPIC, "--to-earliest", "--execute", bootstrap=bs)
        assert r.returncode == 1
        assert "Assignments can only be reset if the group 'g-848' is inactive" in r.stderr
    finally:
        member.stop()


def test_kip848_active_group_cannot_be_deleted(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    member = ActiveMember(bs, "g-848-del", protocol="consumer")
    try:
        assert member.assigned.wait(20), "consumer got no assignment"
        r = cli("delete", "g-848-del", bootstrap=bs)
        assert r.returncode == 1 and "NON_EMPTY_GROUP" in r.stderr, r
    finally:
        member.stop()


def test_reset_dry_run_changes_nothing(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    consume_commit_close(bs, "g-dry")
    cases: list[tuple[list[str], dict[int, int]]] = [
        (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
        (["--to-latest"], COUNTS),
        (["--to-offset", "15"], {0: 10, 1: 15, 2: 15}),  # clamped to the log end of partition 0
        (["--shift-by", "-5"], {0: 0, 1: 15, 2: 2}),  # clamped to the log start
        (["--shift-by", "5"], {0: 9, 1: 20, 2: 12}),
        (["--to-datetime", "2024-05-01T12:00:05.000"], {0: 5, 1: 5, 2: 5}),
        (["--to-datetime", "2024-05-01T14:00:03.000+02:00"], {0: 3, 1: 3, 2: 3}),
        (["--to-datetime", "2024-05-01T12:00:15.000"], {0: 10, 1: 15, 2: 15}),  # none: log end
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(
            lambda target: ok("reset-offsets", "g-dry", "--all-topics", *target, "--dry-run", bootstrap=bs),
            [target for target, _ in cases]))
    for (target, expected), r in zip(cases, results, strict=True):
        assert plan(r.stdout) == expected, (target, r.stdout)
        assert "WARN" not in r.stderr
    # without --execute or --dry-run: still a dry run, with Kafka's warning
    r = ok("reset-offsets", "g-dry", "--topic", TOPIC, "--to-earliest", bootstrap=bs)
    assert plan(r.stdout) == {0: 0, 1: 0, 2: 0}
    assert "No action will be performed as the --execute option is missing" in r.stderr
    r = ok("reset-offsets", "g-dry", "--topic", f"{TOPIC}:1", "--to-earliest", "--json", bootstrap=bs)
    assert json.loads(r.stdout) == [{"group": "g-dry", "topic": TOPIC, "partition": 1, "new_offset": 0}]

    assert committed(bs, "g-dry") == COMMITTED
    assert {x["partition"]: x["current_offset"] for x in describe_json(bs, "g-dry")} == COMMITTED


def test_reset_execute(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    consume_commit_close(bs, "g-exec")
    steps: list[tuple[list[str], dict[int, int]]] = [
        (["--all-topics", "--to-earliest"], {0: 0, 1: 0, 2: 0}),
        (["--all-topics", "--to-offset", "15"], {0: 10, 1: 15, 2: 15}),
        (["--all-topics", "--shift-by", "-12"], {0: 0, 1: 3, 2: 3}),
        (["--all-topics", "--shift-by", "8"], {0: 8, 1: 11, 2: 11}),
        (["--topic", TOPIC, "--to-datetime", "2024-05-01T12:00:06.000Z"], {0: 6, 1: 6, 2: 6}),
        (["--topic", TOPIC, "--to-latest"], COUNTS),
    ]
    for args, expected in steps:
        r = ok("reset-offsets", "g-exec", *args, "--execute", bootstrap=bs)
        assert plan(r.stdout) == expected, (args, r.stdout)
        assert committed(bs, "g-exec") == expected, args

    # only the partitions named
    r = ok("reset-offsets", "g-exec", "--topic", f"{TOPIC}:0,2", "--to-offset", "1", "--execute",
           bootstrap=bs)
    assert plan(r.stdout) == {0: 1, 2: 1}
    assert committed(bs, "g-exec") == {0: 1, 1: 20, 2: 1}
    rows = describe_json(bs, "g-exec")
    assert [(x["current_offset"], x["log_end_offset"], x["lag"]) for x in rows] == \
        [(1, 10, 9), (20, 20, 0), (1, 30, 29)]

    # a consumer joining afterwards starts where the reset put it
    c = consumer(bs, "g-exec")
    c.subscribe([TOPIC])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 20
    while len(first) < 2 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            first.setdefault(m.partition() or 0, m.offset() or 0)
    c.close()
    assert first == {0: 1, 2: 1}


def test_reset_errors(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    consume_commit_close(bs, "g-err", commit={0: 2, 1: 2})
    r = cli("reset-offsets", "g-err", "--topic", "no-such-topic", "--to-earliest", bootstrap=bs)
    assert r.returncode == 1 and "unknown topic 'no-such-topic'" in r.stderr
    r = cli("reset-offsets", "g-err", "--topic", f"{TOPIC}:7", "--to-earliest", bootstrap=bs)
    assert r.returncode == 1 and "has no partition 7" in r.stderr
    r = cli("reset-offsets", "g-err", "--topic", TOPIC, "--shift-by", "1", bootstrap=bs)
    assert r.returncode == 1
    assert f"Cannot shift offset for partition {TOPIC}-2 since there is no current committed offset" \
        in r.stderr
    # usage errors: exit 2
    usage = (["--topic", TOPIC],  # no target
             ["--to-earliest"],  # no scope
             ["--topic", TOPIC, "--to-earliest", "--to-latest"],
             ["--topic", TOPIC, "--to-earliest", "--dry-run", "--execute"],
             ["--topic", f"{TOPIC}:x", "--to-earliest"],
             ["--topic", TOPIC, "--to-datetime", "yesterday"])
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda bad: cli("reset-offsets", "g-err", *bad, bootstrap=bs), usage))
    for bad, r in zip(usage, results, strict=True):
        assert r.returncode == 2, (bad, r)
        assert "usage: samsa groups reset-offsets" in r.stderr
    assert committed(bs, "g-err") == {0: 2, 1: 2, 2: -1001}


def test_unknown_group_and_unreachable_broker(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    r = cli("describe", "no-such-group", bootstrap=bs)
    assert r.returncode == 1
    assert "samsa groups describe: error: Consumer group 'no-such-group' does not exist." in r.stderr
    r = cli("delete", "no-such-group", bootstrap=bs)
    assert r.returncode == 1 and "The group id does not exist" in r.stderr
    r = cli("list", "--state", "Sleepy", bootstrap=bs)
    assert r.returncode == 2 and "unknown group state 'Sleepy'" in r.stderr
    r = cli("describe", bootstrap=bs)
    assert r.returncode == 2

    # nothing listening: each command gives up after the connection timeout (run side by side)
    dead = f"127.0.0.1:{free_port()}"
    commands = (["list"], ["describe", "g"], ["delete", "g"],
                ["reset-offsets", "g", "--all-topics", "--to-earliest"])
    with ThreadPoolExecutor(len(commands)) as pool:
        results = list(pool.map(lambda args: cli(*args, bootstrap=dead), commands))
    for args, r in zip(commands, results, strict=True):
        assert r.returncode == 1, (args, r)
        assert f"cannot reach broker at {dead}" in r.stderr


def test_describe_survives_broker_kill() -> None:
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0"}) as b:
        make_topic(b.bootstrap, TOPIC)
        consume_commit_close(b.bootstrap, "g-crash")
        before = describe_json(b.bootstrap, "g-crash")
        assert [(x["current_offset"], x["log_end_offset"], x["lag"]) for x in before] == \
            [(COMMITTED[p], COUNTS[p], COUNTS[p] - COMMITTED[p]) for p in sorted(COUNTS)]
        b.kill()
        b.start()
        assert describe_json(b.bootstrap, "g-crash") == before
        assert listed(b.bootstrap) == {"g-crash": "Empty"}
