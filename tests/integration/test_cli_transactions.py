"""`samsa transactions` (list, describe, describe-producers, abort) run as subprocesses against a real
broker, with a real transactional confluent-kafka producer in the test process holding a transaction
open; what abort did is checked independently with read_committed / read_uncommitted consumers and
by the fenced producer's own commit."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.cli.main import main
from samsa.testing import SamsaBroker, free_port

pytestmark = pytest.mark.timeout(60)

TOPIC = "txn-orders"
TID = "orders-app"  # left Ongoing, then aborted by the CLI
DONE_TID = "billing-app"  # one committed transaction
TIMEOUT_MS = 45000
PLAIN = {0: 3, 1: 2}  # non-transactional messages per partition, written first
OPEN = {0: 4, 1: 5}  # messages of TID's open transaction
BROKER_BUG = ("brokers that cannot answer DescribeTransactions for an id without a start time "
              "(Samsa before the codec fix) make the CLI warn and fall back to ListTransactions")


class Scenario:
    def __init__(self, broker: SamsaBroker) -> None:
        self.bs = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": self.bs})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
        plain = Producer({"bootstrap.servers": self.bs, "linger.ms": 5})
        for p, n in PLAIN.items():
            for i in range(n):
                plain.produce(TOPIC, value=b"plain-%d-%d" % (p, i), partition=p)
        assert plain.flush(15) == 0

        done = self.transactional(DONE_TID)
        done.begin_transaction()
        done.produce(TOPIC, value=b"billing-1-0", partition=1)
        done.commit_transaction(15)
        self.done = done

        self.producer = self.transactional(TID)
        self.began_ms = int(time.time() * 1000)
        self.producer.begin_transaction()
        for p, n in OPEN.items():
            for i in range(n):
                self.producer.produce(TOPIC, value=b"open-%d-%d" % (p, i), partition=p)
        assert self.producer.flush(15) == 0  # written, transaction left open

    def transactional(self, tid: str) -> Producer:
        p = Producer({"bootstrap.servers": self.bs, "transactional.id": tid,
                      "transaction.timeout.ms": TIMEOUT_MS, "linger.ms": 5, "log_level": 0})
        p.init_transactions(15)
        return p


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker() as b:
        yield b


@pytest.fixture(scope="module")
def scenario(broker: SamsaBroker) -> Iterator[Scenario]:
    s = Scenario(broker)
    yield s
    for p in (s.producer, s.done):  # before the broker stops
        with contextlib.suppress(KafkaException):  # the fenced one raises its fatal error
            p.purge()
            p.flush(5)


# ---- helpers ------------------------------------------------------------------------------------
class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(*args: str, bootstrap: str | None = None, subprocess_: bool = False) -> Result:
    """Run `samsa transactions ARGS` (with --bootstrap-server if given), in this process (fast;
    not thread-safe) or as a subprocess; never expect a traceback."""
    argv = ["transactions", *args]
    if bootstrap is not None:
        argv += ["--bootstrap-server", bootstrap]
    if subprocess_:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        r = subprocess.run([sys.executable, "-m", "samsa.cli.main", *argv], capture_output=True,
                           text=True, env=env, timeout=40)
        assert "Traceback" not in r.stderr, r.stderr
        return Result(r.returncode, r.stdout, r.stderr)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse usage errors
            code = int(e.code or 0)
    return Result(code, out.getvalue(), err.getvalue())


def ok(*args: str, bootstrap: str, subprocess_: bool = False) -> Result:
    r = cli(*args, bootstrap=bootstrap, subprocess_=subprocess_)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r


def table(stdout: str) -> list[dict[str, str]]:
    lines = stdout.splitlines()
    if not lines:
        return []
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]


def listed(bs: str, *args: str) -> dict[str, tuple[str, str]]:
    """transactional id -> (producer id, state) from `samsa transactions list`."""
    rows = table(ok("list", *args, bootstrap=bs).stdout)
    assert all(list(r) == ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"] for r in rows)
    return {r["TRANSACTIONAL-ID"]: (r["PRODUCER-ID"], r["STATE"]) for r in rows}


def producers(bs: str, partition: int) -> dict[int, dict[str, Any]]:
    out = json.loads(ok("describe-producers", "--topic", TOPIC, "--partition", str(partition),
                        "--json", bootstrap=bs).stdout)
    return {p["producer_id"]: p for p in out}


def read_all(bs: str, isolation: str) -> list[bytes]:
    """Every value of both partitions, read to the end (EOF) with the given isolation level."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"check-{isolation}", "enable.partition.eof": True,
                  "isolation.level": isolation, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p in PLAIN])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 20
        while at_end != set(PLAIN):
            assert time.monotonic() < deadline, f"no EOF on {set(PLAIN) - at_end}"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition() or 0)
            else:
                values.append(m.value() or b"")
        return values
    finally:
        c.close()


# ---- tests (in order: the open transaction is aborted in test_abort) --------------------------------
def test_list_shows_the_open_transaction(scenario: Scenario) -> None:
    bs = scenario.bs
    all_ = listed(bs)
    ongoing = listed(bs, "--state", "Ongoing")
    finished = listed(bs, "--state", "completecommit,Empty", "CompleteAbort")
    js = json.loads(ok("list", "--json", bootstrap=bs, subprocess_=True).stdout)
    assert all_[TID][1] == "Ongoing"
    assert all_[DONE_TID][1] == "CompleteCommit"
    assert all_[TID][0] != all_[DONE_TID][0]
    assert ongoing == {TID: all_[TID]}
    assert finished == {DONE_TID: all_[DONE_TID]}
    assert {"transactional_id": TID, "coordinator_id": 1, "producer_id": int(all_[TID][0]),
            "state": "Ongoing"} in js


def test_describe_shows_partitions(scenario: Scenario) -> None:
    bs = scenario.bs
    rows = table(ok("describe", TID, bootstrap=bs).stdout)
    assert len(rows) == 1
    row = rows[0]
    assert row["TRANSACTIONAL-ID"] == TID
    assert row["STATE"] == "Ongoing"
    assert row["EPOCH"] == "0"
    assert row["TIMEOUT-MS"] == str(TIMEOUT_MS)
    assert row["PARTITIONS"] == f"{TOPIC}-0,{TOPIC}-1"
    assert row["START-TIME"].endswith("Z")

    d = json.loads(ok("describe", TID, "--json", bootstrap=bs).stdout)
    assert d["producer_id"] == int(listed(bs)[TID][0]) == int(row["PRODUCER-ID"])
    assert d["partitions"] == [{"topic": TOPIC, "partition": 0}, {"topic": TOPIC, "partition": 1}]
    assert d["state"] == "Ongoing" and d["producer_epoch"] == 0 and d["timeout_ms"] == TIMEOUT_MS
    # the coordinator stamps the start when the first partition is added (at the first produce)
    assert scenario.began_ms - 1000 <= d["start_time_ms"] <= int(time.time() * 1000)
    assert d["duration_ms"] >= 0


def test_describe_producers_shows_the_open_transaction(scenario: Scenario) -> None:
    bs = scenario.bs
    ids = listed(bs)
    pid, done_pid = int(ids[TID][0]), int(ids[DONE_TID][0])
    p0, p1 = producers(bs, 0), producers(bs, 1)
    # the open transaction starts after the plain messages (partition 0) or after the committed
    # transaction's record and its COMMIT marker (partition 1)
    assert p0[pid]["current_txn_start_offset"] == PLAIN[0]
    assert p1[pid]["current_txn_start_offset"] == PLAIN[1] + 2
    assert p0[pid]["producer_epoch"] == 0
    assert p0[pid]["last_sequence"] == OPEN[0] - 1
    assert p1[pid]["last_sequence"] == OPEN[1] - 1
    assert scenario.began_ms - 1000 <= p0[pid]["last_timestamp_ms"] <= int(time.time() * 1000)
    assert p1[done_pid]["current_txn_start_offset"] == -1  # committed: nothing open
    assert done_pid not in p0

    rows = table(ok("describe-producers", "--topic", TOPIC, "--partition", "0", bootstrap=bs).stdout)
    assert rows == [{"PRODUCER-ID": str(pid), "EPOCH": "0", "LAST-SEQUENCE": str(OPEN[0] - 1),
                     "LAST-TIMESTAMP": rows[0]["LAST-TIMESTAMP"], "COORDINATOR-EPOCH": "-",
                     "CURRENT-TXN-START-OFFSET": str(PLAIN[0])}]


def test_abort(scenario: Scenario) -> None:
    bs = scenario.bs
    pid = int(listed(bs)[TID][0])
    # before: a read_uncommitted consumer sees the open transaction's messages
    uncommitted = read_all(bs, "read_uncommitted")
    assert sum(v.startswith(b"open-") for v in uncommitted) == sum(OPEN.values())

    r = ok("abort", "--transactional-id", TID, bootstrap=bs, subprocess_=True)
    assert f"Aborted the transaction of {TID!r}: producer id {pid}" in r.stdout
    assert "state Ongoing -> Empty" in r.stdout
    assert f"Aborted partitions: {TOPIC}-0,{TOPIC}-1" in r.stdout
    assert "fenced" in r.stdout

    assert listed(bs)[TID] == (str(pid), "Empty")
    d = json.loads(ok("describe", TID, "--json", bootstrap=bs).stdout)
    assert d["state"] == "Empty" and d["partitions"] == []
    if d["producer_epoch"] is not None:  # None: the ListTransactions fallback (see BROKER_BUG)
        assert d["producer_epoch"] >= 1
    for p in PLAIN:
        entry = producers(bs, p)[pid]
        assert entry["current_txn_start_offset"] == -1
        assert entry["producer_epoch"] >= 1  # the ABORT marker carries the bumped epoch

    # read_committed: the plain messages and the committed transaction, nothing of the aborted one
    committed = read_all(bs, "read_committed")
    assert sorted(committed) == sorted([b"plain-%d-%d" % (p, i) for p, n in PLAIN.items()
                                        for i in range(n)] + [b"billing-1-0"])

    # the producer that opened the transaction is fenced
    with pytest.raises(KafkaException) as exc:
        scenario.producer.commit_transaction(15)
    err = exc.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                          KafkaError.INVALID_PRODUCER_EPOCH), err
    assert err.fatal()


def test_abort_needs_an_ongoing_transaction(scenario: Scenario) -> None:
    bs = scenario.bs
    before = listed(bs)
    with ThreadPoolExecutor(2) as pool:
        again, done = pool.map(lambda t: cli("abort", "--transactional-id", t, bootstrap=bs,
                                             subprocess_=True),
                               [TID, DONE_TID])
    assert again.returncode == 1
    assert f"transactional id {TID!r} has no ongoing transaction (state Empty); nothing to abort" \
        in again.stderr
    assert done.returncode == 1
    assert "(state CompleteCommit)" in done.stderr
    assert listed(bs) == before  # nothing was fenced


def test_unknown_transactional_id(scenario: Scenario) -> None:
    bs = scenario.bs
    with ThreadPoolExecutor(2) as pool:
        desc, ab = pool.map(lambda a: cli(*a, bootstrap=bs, subprocess_=True),
                            [("describe", "no-such-app"), ("abort", "--transactional-id", "no-such-app")])
    for r in (desc, ab):
        assert r.returncode == 1
        assert "error: unknown transactional id 'no-such-app' (see `samsa transactions list`)" in r.stderr
        assert r.stdout == ""
    assert "no-such-app" not in listed(bs)  # abort did not create it


def test_errors(scenario: Scenario) -> None:
    bs = scenario.bs
    dead = f"127.0.0.1:{free_port()}"
    cases: list[tuple[tuple[str, ...], str | None, int, str]] = [
        (("list",), dead, 1, f"samsa transactions list: error: cannot reach broker at {dead}"),
        (("describe", TID), dead, 1, f"cannot reach broker at {dead}"),
        (("describe-producers", "--topic", "nope", "--partition", "0"), bs, 1,
         "error: unknown topic 'nope'"),
        (("describe-producers", "--topic", TOPIC, "--partition", "7"), bs, 1,
         f"error: unknown partition 7 of topic {TOPIC!r} (it has 2 partitions)"),
        (("describe-producers", "--topic", TOPIC), bs, 2, "the following arguments are required: "
                                                          "--partition"),
        (("list", "--state", "Running"), bs, 2, "unknown transaction state 'Running'"),
        (("abort",), bs, 2, "--transactional-id"),
    ]
    # the first two as subprocesses (in parallel), the rest in this process
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda c: cli(*c[0], bootstrap=c[1], subprocess_=True), cases[:2]))
    results += [cli(*c[0], bootstrap=c[1]) for c in cases[2:]]
    for (args, _, code, text), r in zip(cases, results, strict=True):
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert text in r.stderr, (args, r.stderr)


def test_describe_of_an_empty_transactional_id_needs_no_fallback(scenario: Scenario) -> None:
    p = scenario.transactional("fresh-app")  # initialized, no transaction yet: state Empty
    try:
        r = ok("describe", "fresh-app", "--json", bootstrap=scenario.bs)
        assert "warning" not in r.stderr, r.stderr
        d = json.loads(r.stdout)
        assert d["state"] == "Empty" and d["producer_epoch"] == 0 and d["start_time_ms"] == -1
    finally:
        p.flush(5)
