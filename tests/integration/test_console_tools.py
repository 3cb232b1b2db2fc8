"""`samsa consume` / `samsa produce` / `samsa groups list` as Kafka's console tools behave: the
--property formats of kafka-console-consumer.sh (DefaultMessageFormatter) and
kafka-console-producer.sh (LineMessageReader), --group with committed offsets, Kafka's checks of
option combinations, and kafka-consumer-groups.sh's --list --type --state layout. Each runs the
real `samsa` command against a real broker; records are written or checked with confluent-kafka."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


def cli(*args: str, bs: str, stdin: bytes | None = None,
        timeout: float = 40) -> subprocess.CompletedProcess[bytes]:
    """`samsa ARGS --bootstrap-server BS`, output as bytes; never a traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    r = subprocess.run([sys.executable, "-m", "samsa.cli.main", *args, "--bootstrap-server", bs],
                       input=stdin, capture_output=True, env=env, timeout=timeout)
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    return r


def ok(*args: str, bs: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    r = cli(*args, bs=bs, stdin=stdin)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout!r}\n{r.stderr.decode()}"
    return r


def make_topic(bs: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(15)


def read_all(bs: str, topic: str, n: int) -> list[Any]:
    """The first n records of partition 0, read with confluent-kafka."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[Any] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m)
    finally:
        c.close()
    assert len(out) == n
    return out


def committed(bs: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


# ---- consumer output formats --------------------------------------------------------------------
def test_consume_formatter_properties(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    make_topic(bs, "fmt")
    p = Producer({"bootstrap.servers": bs})
    p.produce("fmt", key=b"k1", value=b"v1", timestamp=1700000000000,
              headers=[("h1", b"x"), ("h2", None)])
    p.produce("fmt", value=b"v2", timestamp=1700000000001)
    p.produce("fmt", key=b"k3", value=None, timestamp=1700000000002, headers=[("h", b"y")])
    assert p.flush(15) == 0
    base = ["fmt", "--from-beginning", "--max-messages", "3", "--timeout", "10"]

    every = ["--property", "print.timestamp=true", "--property", "print.partition=true",
             "--property", "print.offset=true", "--property", "print.headers=true",
             "--property", "print.key=true"]
    r = ok("consume", *base, *every, bs=bs)
    assert r.stdout == (b"CreateTime:1700000000000\tPartition:0\tOffset:0\th1:x,h2:null\tk1\tv1\n"
                        b"CreateTime:1700000000001\tPartition:0\tOffset:1\tNO_HEADERS\tnull\tv2\n"
                        b"CreateTime:1700000000002\tPartition:0\tOffset:2\th:y\tk3\tnull\n")
    assert r.stderr.decode().splitlines()[-1] == "Processed a total of 3 messages"

    # separators, the null literal and print.value=false (booleans: only 'true' is true)
    r = ok("consume", *base, "--property", "print.key=TRUE", "--property", "key.separator= | ",
           "--property", "print.headers=true", "--property", "headers.separator=;",
           "--property", "null.literal=<nil>", "--property", "line.separator=##",
           "--property", "print.offset=yes", bs=bs)
    assert r.stdout == (b"h1:x;h2:<nil> | k1 | v1##NO_HEADERS | <nil> | v2##h:y | k3 | <nil>##")
    r = ok("consume", *base, "--property", "print.key=true", "--property", "print.value=false",
           bs=bs)
    assert r.stdout == b"k1\nnull\nk3\n"

    # the older flags keep working, and mean the same properties
    r = ok("consume", *base, "--print-key", "--print-headers", bs=bs)
    assert r.stdout == b"h1:x,h2:null\tk1\tv1\nNO_HEADERS\tnull\tv2\nh:y\tk3\tnull\n"

    # --partition and --offset together, as Kafka's tool takes them
    r = ok("consume", "--topic", "fmt", "--partition", "0", "--offset", "1", "--max-messages",
           "2", "--timeout", "10", "--property", "print.offset=true", bs=bs)
    assert r.stdout == b"Offset:1\tv2\nOffset:2\tnull\n"
    r = ok("consume", "fmt", "--partition", "0", "--offset", "earliest", "--max-messages", "1",
           "--timeout", "10", bs=bs)
    assert r.stdout == b"v1\n"
    r = ok("consume", "fmt", "--partition", "0", "--offset", "latest", "--timeout", "1", bs=bs)
    assert r.stdout == b""

    # the broker's time on a LogAppendTime topic; --formatter-property is Kafka 4.2's name
    make_topic(bs, "fmt-lat", **{"message.timestamp.type": "LogAppendTime"})
    p.produce("fmt-lat", value=b"v", timestamp=1700000000000)
    assert p.flush(15) == 0
    r = ok("consume", "fmt-lat", "--from-beginning", "--max-messages", "1", "--timeout", "10",
           "--formatter-property", "print.timestamp=true", bs=bs)
    ts = read_all(bs, "fmt-lat", 1)[0].timestamp()[1]
    assert ts > 1700000000000 and r.stdout == b"LogAppendTime:%d\tv\n" % ts


def test_consume_group_commits_and_resumes(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    make_topic(bs, "grp", partitions=2)
    p = Producer({"bootstrap.servers": bs})
    for i in range(6):
        p.produce("grp", value=b"m%d" % i, partition=i % 2)
    assert p.flush(15) == 0

    first = ok("consume", "grp", "--group", "console-g", "--from-beginning", "--max-messages",
               "4", "--timeout", "20", bs=bs).stdout.splitlines()
    assert len(first) == 4
    offsets = committed(bs, "console-g", "grp", 2)
    assert sum(offsets.values()) == 4  # exactly what was printed is committed
    assert all(0 <= o <= 3 for o in offsets.values())

    second = ok("consume", "grp", "--group", "console-g", "--from-beginning", "--timeout", "6",
                bs=bs).stdout.splitlines()
    assert sorted(first + second) == [b"m%d" % i for i in range(6)]
    assert committed(bs, "console-g", "grp", 2) == {0: 3, 1: 3}

    # everything is committed: a third run prints nothing, even with --from-beginning
    r = ok("consume", "grp", "--group", "console-g", "--from-beginning", "--timeout", "4", bs=bs)
    assert r.stdout == b""
    assert r.stderr.decode().splitlines()[-1] == "Processed a total of 0 messages"

    # the group id may also come from --consumer-property group.id
    p.produce("grp", value=b"late", partition=0)
    assert p.flush(15) == 0
    r = ok("consume", "grp", "--consumer-property", "group.id=console-g", "--max-messages", "1",
           "--timeout", "20", bs=bs)
    assert r.stdout == b"late\n"
    assert committed(bs, "console-g", "grp", 2) == {0: 4, 1: 3}


def test_consume_group_commits_on_ctrl_c(broker: SamsaBroker) -> None:
    """Stopped with Ctrl-C (the usual end of an open-ended consume), --group still commits what
    was printed."""
    bs = broker.bootstrap
    make_topic(bs, "grp-int")
    p = Producer({"bootstrap.servers": bs})
    for i in range(5):
        p.produce("grp-int", value=b"m%d" % i)
    assert p.flush(15) == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    proc = subprocess.Popen([sys.executable, "-m", "samsa.cli.main", "consume", "grp-int",
                             "--group", "console-int", "--from-beginning",
                             "--bootstrap-server", bs], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(5)]  # blocks until printed (flushed)
        assert lines == [b"m%d\n" % i for i in range(5)]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err
    assert err.decode().splitlines()[-1] == "Processed a total of 5 messages"
    assert committed(bs, "console-int", "grp-int", 1) == {0: 5}


def test_consume_isolation_level(broker: SamsaBroker) -> None:
    """Kafka's console consumer reads uncommitted by default; --isolation-level read_committed
    skips an aborted transaction."""
    bs = broker.bootstrap
    make_topic(bs, "iso")
    p = Producer({"bootstrap.servers": bs, "transactional.id": "console-iso"})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce("iso", value=b"aborted")
    p.flush(15)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce("iso", value=b"committed")
    p.commit_transaction(15)
    base = ["consume", "iso", "--from-beginning", "--timeout", "3"]
    assert ok(*base, bs=bs).stdout == b"aborted\ncommitted\n"
    r = ok(*base, "--isolation-level", "read_committed", bs=bs)
    assert r.stdout == b"committed\n"


def test_consume_option_combinations(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    make_topic(bs, "combo")
    cases = [
        (["--offset", "0"], "The partition is required when offset is specified."),
        (["--group", "g", "--partition", "0"],
         "Options group and partition cannot be specified together."),
        (["--partition", "0", "--offset", "1", "--from-beginning"],
         "Options from-beginning and offset cannot be specified together."),
        (["--partition", "0", "--offset", "-3"],
         "The provided offset value '-3' is incorrect. Valid values are 'earliest', 'latest', "
         "or a non-negative long."),
        (["--group", "a", "--consumer-property", "group.id=b"],
         "do not match. Detected group ids: 'a', 'b'"),
        (["--from-beginning", "--consumer-property", "auto.offset.reset=latest"],
         "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', please "
         "remove one option"),
        (["--json", "--property", "print.key=true"], "--json"),
        (["--timeout-ms", "1000"], "not allowed with"),
    ]
    for extra, message in cases:
        r = cli("consume", "combo", "--timeout", "1", *extra, bs=bs)
        assert r.returncode == 2, (extra, r.returncode, r.stderr)
        assert message in r.stderr.decode(), (extra, r.stderr)
        assert r.stdout == b""


# ---- producer input formats ---------------------------------------------------------------------
def test_produce_reader_properties(broker: SamsaBroker) -> None:
    bs = broker.bootstrap
    make_topic(bs, "rdr")
    ok("produce", "rdr", "--property", "parse.key=true", "--property", "key.separator=:",
       stdin=b"k1:v1\nk2:v:2\n:empty-key\n", bs=bs)
    ok("produce", "--topic", "rdr", "--property", "parse.key=true", "--property",
       "parse.headers=true", "--property", "headers.delimiter=|", "--property",
       "headers.separator=;", "--property", "headers.key.separator==", "--property",
       "null.marker=NULL", stdin=b"a=1;b=NULL|NULL\tv\nc=3|k\tNULL\nNULL|k2\tplain\n", bs=bs)
    # ignore.error: a line without the separator becomes a value without a key
    ok("produce", "rdr", "--property", "parse.key=true", "--property", "ignore.error=true",
       "--sync", "--compression-codec", stdin=b"no separator here\n", bs=bs)
    got = [(m.key(), m.value(), m.headers()) for m in read_all(bs, "rdr", 7)]
    assert got == [
        (b"k1", b"v1", None), (b"k2", b"v:2", None), (b"", b"empty-key", None),
        (None, b"v", [("a", b"1"), ("b", None)]), (b"k", None, [("c", b"3")]),
        (b"k2", b"plain", None), (None, b"no separator here", None),
    ]

    # Kafka's messages for bad lines: exit 1, the lines before are delivered
    r = cli("produce", "rdr", "--property", "parse.key=true", stdin=b"ok\tline\nbroken\n", bs=bs)
    assert r.returncode == 1
    assert "No key separator found on line number 2: 'broken'" in r.stderr.decode()
    assert "Produced 1 message(s)" in r.stderr.decode()
    r = cli("produce", "rdr", "--property", "parse.headers=true", stdin=b"h1\tv\n", bs=bs)
    assert r.returncode == 1
    assert "No header key separator found in pair 'h1' on line number 1" in r.stderr.decode()
    r = cli("produce", "rdr", "--key-separator", "|", stdin=b"no-bar\n", bs=bs)
    assert "No key separator found on line number 1: 'no-bar'" in r.stderr.decode()

    # clashing separators are refused before anything is sent (Kafka's checks)
    for props, message in ((["headers.delimiter=,"], "headers.delimiter and headers.separator "
                                                     "may not be equal"),
                           (["null.marker=:", "headers.key.separator=:"],
                            "null.marker and headers.key.separator may not be equal")):
        args = [a for prop in props for a in ("--property", prop)]
        r = cli("produce", "rdr", "--property", "parse.headers=true", *args, stdin=b"x\n", bs=bs)
        assert r.returncode == 2 and message in r.stderr.decode(), r.stderr
    r = cli("produce", "rdr", "--key-separator", ":", "--property", "key.separator=|",
            stdin=b"a:b\n", bs=bs)
    assert r.returncode == 2 and "disagree" in r.stderr.decode()
    assert len(read_all(bs, "rdr", 8)) == 8  # only "ok\tline" was added


# ---- groups list --------------------------------------------------------------------------------
def _row(group: str, gtype: str, state: str, width: int) -> str:
    return f"{group.ljust(width)} {gtype.ljust(20)} {state.ljust(20)}"


def test_groups_list_layout() -> None:
    with SamsaBroker(overrides={"group.initial.rebalance.delay.ms": "0"}) as b:
        bs = b.bootstrap
        r = ok("groups", "list", bs=bs)
        assert r.stdout.decode() == _row("GROUP", "TYPE", "STATE", 25) + "\n"
        assert "No consumer groups found." in r.stderr.decode()

        make_topic(bs, "lst")
        p = Producer({"bootstrap.servers": bs})
        p.produce("lst", value=b"x")
        assert p.flush(15) == 0
        long_name = "a-consumer-group-with-a-long-name"  # 33 characters: width 43
        ok("consume", "lst", "--group", long_name, "--from-beginning", "--max-messages", "1",
           "--timeout", "20", bs=bs)
        c = Consumer({"bootstrap.servers": bs, "group.id": "new-protocol",
                      "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        try:
            c.subscribe(["lst"])
            deadline = time.monotonic() + 30
            while not c.assignment() and time.monotonic() < deadline:
                c.poll(0.2)
            assert c.assignment()
            r = ok("groups", "list", bs=bs)
            assert r.stdout.decode().splitlines() == [
                _row("GROUP", "TYPE", "STATE", 43),
                _row(long_name, "Classic", "Empty", 43),
                _row("new-protocol", "Consumer", "Stable", 43),
            ]
            r = ok("groups", "list", "--state", "--type", "classic", bs=bs)
            assert r.stdout.decode().splitlines()[1:] == [_row(long_name, "Classic", "Empty", 43)]
            r = ok("groups", "list", "--state", "Dead", bs=bs)
            assert r.stdout.decode() == _row("GROUP", "TYPE", "STATE", 25) + "\n"
            assert "No consumer groups found matching the filters." in r.stderr.decode()
        finally:
            c.close()
