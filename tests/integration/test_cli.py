"""The `samsa` client commands (topics, produce, consume, demo), run as subprocesses against a real
broker, checking what they print and what actually happened on the broker."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from samsa.testing import SamsaBroker, free_port

pytestmark = pytest.mark.timeout(60)


def cli(*args: str, bootstrap: str | None = None, stdin: bytes | None = None,
        env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `samsa ARGS` (with --bootstrap-server if given); never expect a traceback."""
    argv = [sys.executable, "-m", "samsa.cli.main", *args]
    if bootstrap is not None:
        argv += ["--bootstrap-server", bootstrap]
    base = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    base.update(env or {})
    r = subprocess.run(argv, input=stdin, capture_output=True, env=base, cwd=cwd,
                       timeout=timeout)
    out = subprocess.CompletedProcess(r.args, r.returncode,
                                      r.stdout.decode("utf-8", errors="replace"),
                                      r.stderr.decode("utf-8", errors="replace"))
    assert "Traceback" not in out.stderr, out.stderr
    return out


def ok(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    r = cli(*args, **kw)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r


def describe(bs: str, topic: str) -> tuple[dict[str, str], dict[str, str], list[dict[str, str]]]:
    """`samsa topics describe TOPIC` parsed: (topic fields, configs, partition rows)."""
    lines = ok("topics", "describe", topic, bootstrap=bs).stdout.splitlines()
    head = dict(f.split(": ", 1) for f in lines[0].split("\t"))
    configs = dict(c.split("=", 1) for c in head["Configs"].split(",") if c)
    rows = [dict(f.split(": ", 1) for f in line.strip().split("\t")) for line in lines[1:]]
    return head, configs, rows


def consume_json(bs: str, topic: str, *extra: str, idle: float = 5) -> list[dict[str, Any]]:
    r = ok("consume", topic, "--json", "--timeout", str(idle), *extra, bootstrap=bs)
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_create_list_describe(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    r = ok("topics", "create", "cli-orders", "--partitions", "3", "--replication-factor", "1",
           "--config", "retention.ms=123456", "--config", "cleanup.policy=compact", bootstrap=bs)
    assert "Created topic cli-orders" in r.stdout
    assert "cli-orders" in ok("topics", "list", bootstrap=bs).stdout.split()

    head, configs, rows = describe(bs, "cli-orders")
    assert head["Topic"] == "cli-orders"
    assert head["PartitionCount"] == "3" and head["ReplicationFactor"] == "1"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", head["TopicId"])
    assert configs == {"retention.ms": "123456", "cleanup.policy": "compact"}
    assert [row["Partition"] for row in rows] == ["0", "1", "2"]
    for row in rows:
        assert row["Leader"] == "1" and row["Replicas"] == "1" and row["Isr"] == "1"
        assert row["LogStartOffset"] == "0" and row["HighWatermark"] == "0"

    # all topics when no name is given
    r = ok("topics", "describe", bootstrap=bs)
    assert "Topic: cli-orders\t" in r.stdout


def test_create_existing_topic(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    ok("topics", "create", "cli-dup", bootstrap=bs)
    r = cli("topics", "create", "cli-dup", bootstrap=bs)
    assert r.returncode == 1
    assert "already exists" in r.stderr
    r = ok("topics", "create", "cli-dup", "--partitions", "5", "--if-not-exists", bootstrap=bs)
    assert describe(bs, "cli-dup")[0]["PartitionCount"] == "1"  # untouched


def test_alter_configs_and_partitions(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    ok("topics", "create", "cli-alter", "--partitions", "2", "--config", "retention.ms=5000",
       bootstrap=bs)
    r = ok("topics", "alter", "cli-alter", "--partitions", "4", "--config", "segment.ms=60000",
           "--config", "retention.ms=7000", bootstrap=bs)
    assert "Altered topic cli-alter" in r.stdout
    head, configs, rows = describe(bs, "cli-alter")
    assert head["PartitionCount"] == "4" and len(rows) == 4
    assert configs == {"retention.ms": "7000", "segment.ms": "60000"}

    ok("topics", "alter", "cli-alter", "--delete-config", "retention.ms", bootstrap=bs)
    assert describe(bs, "cli-alter")[1] == {"segment.ms": "60000"}

    r = cli("topics", "alter", "cli-alter", "--partitions", "1", bootstrap=bs)
    assert r.returncode == 1 and "partitions" in r.stderr
    r = cli("topics", "alter", "cli-alter", bootstrap=bs)
    assert r.returncode == 2 and "nothing to alter" in r.stderr


def test_bad_config_value_shows_broker_message(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    r = cli("topics", "create", "cli-badcfg", "--config", "retention.ms=abc", bootstrap=bs)
    assert r.returncode == 1
    assert "Invalid value 'abc' for configuration retention.ms" in r.stderr
    assert "cli-badcfg" not in ok("topics", "list", bootstrap=bs).stdout.split()

    ok("topics", "create", "cli-badcfg2", bootstrap=bs)
    r = cli("topics", "alter", "cli-badcfg2", "--config", "cleanup.policy=sometimes",
            bootstrap=bs)
    assert r.returncode == 1
    assert "Invalid value 'sometimes' for configuration cleanup.policy" in r.stderr
    r = cli("topics", "alter", "cli-badcfg2", "--config", "no.such.config=1", bootstrap=bs)
    assert r.returncode == 1 and "no.such.config" in r.stderr
    assert describe(bs, "cli-badcfg2")[1] == {}


def test_usage_errors_exit_2(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    r = cli("topics", "create", "cli-usage", "--config", "retention.ms", bootstrap=bs)
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr
    r = cli("consume", "cli-usage", "--from-timestamp", "yesterday", bootstrap=bs)
    assert r.returncode == 2 and "--from-timestamp" in r.stderr
    r = cli("produce", "cli-usage", "--property", "no.such.property=1", stdin=b"x\n",
            bootstrap=bs)
    assert r.returncode == 2 and "no.such.property" in r.stderr


def test_produce_then_consume_roundtrip(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    ok("topics", "create", "cli-roundtrip", "--partitions", "3", bootstrap=bs)
    n = 60
    sent = [(f"user-{i % 7}", f"event {i} \u00e9\u2603") for i in range(n)]
    data = "".join(f"{k}|{v}\n" for k, v in sent).encode()
    r = ok("produce", "cli-roundtrip", "--key-separator", "|", "--header", "source=test",
           "--header", "kind=a=b", "--acks", "all", "--compression", "lz4", stdin=data,
           bootstrap=bs)
    assert f"Produced {n} message(s)" in r.stderr

    msgs = consume_json(bs, "cli-roundtrip", "--from-beginning", "--max-messages", str(n))
    assert len(msgs) == n
    by_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in msgs:
        assert m["topic"] == "cli-roundtrip"
        assert m["headers"] == [{"key": "source", "value": "test"},
                                {"key": "kind", "value": "a=b"}]
        assert m["timestamp_type"] == "CreateTime" and m["timestamp"] > 0
        by_partition[m["partition"]].append(m)
    assert sorted((m["key"], m["value"]) for m in msgs) == sorted(sent)
    key_partition: dict[str, int] = {}
    for p, rows in by_partition.items():
        # offsets 0..n-1 without gaps, in the order the lines were produced
        assert [m["offset"] for m in rows] == list(range(len(rows)))
        order = [sent.index((m["key"], m["value"])) for m in rows]
        assert order == sorted(order)
        for m in rows:
            assert key_partition.setdefault(m["key"], p) == p  # a key stays in one partition

    # describe reports the high watermarks that the consume saw
    _, _, rows = describe(bs, "cli-roundtrip")
    assert {int(r["Partition"]): int(r["HighWatermark"]) for r in rows} == \
        {p: len(by_partition.get(p, [])) for p in range(3)}

    # --max-messages stops early; plain text output with key and headers
    r = ok("consume", "cli-roundtrip", "--from-beginning", "--max-messages", "2",
           "--print-key", "--print-headers", "--timeout", "5", bootstrap=bs)
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    headers, key, value = lines[0].split("\t")
    assert headers == "source:test,kind:a=b" and (key, value) in sent
    assert "Processed a total of 2 messages" in r.stderr


def test_produce_delivery_failure(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    ok("topics", "create", "cli-small", "--config", "max.message.bytes=300", bootstrap=bs)
    r = cli("produce", "cli-small", stdin=b"x" * 2000 + b"\n", bootstrap=bs)
    assert r.returncode == 1
    assert "not delivered" in r.stderr and "too large" in r.stderr.lower()
    assert "Produced 0 message(s)" in r.stderr


def test_partition_and_offset_options(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    ok("topics", "create", "cli-part", "--partitions", "2", bootstrap=bs)
    ok("produce", "cli-part", "--partition", "1", stdin=b"a\nb\nc\nd\n", bootstrap=bs)
    ok("produce", "cli-part", "--partition", "0", stdin=b"zero\n", bootstrap=bs)
    msgs = consume_json(bs, "cli-part", "--partition", "1", "--offset", "2", idle=2)
    assert [(m["partition"], m["offset"], m["value"]) for m in msgs] == [(1, 2, "c"), (1, 3, "d")]
    assert all(m["key"] is None and m["headers"] == [] for m in msgs)

    r = cli("consume", "cli-part", "--partition", "1", "--offset", "99", "--timeout", "2",
            bootstrap=bs)
    assert r.returncode == 1 and "out of range" in r.stderr
    r = cli("consume", "cli-part", "--partition", "5", "--timeout", "2", bootstrap=bs)
    assert r.returncode == 1 and "no partition 5" in r.stderr
    r = cli("produce", "cli-part", "--partition", "5", stdin=b"x\n", bootstrap=bs)
    assert r.returncode == 1 and "no partition 5" in r.stderr

    # the default start is the end of the log: nothing old is printed
    r = ok("consume", "cli-part", "--timeout", "1", bootstrap=bs)
    assert r.stdout == ""


def test_binary_values_are_base64(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    ok("topics", "create", "cli-binary", bootstrap=bs)
    ok("produce", "cli-binary", "--key-separator", "\t", stdin=b"k\xff\t\x00\xfe\xffok\n",
       bootstrap=bs)
    (m,) = consume_json(bs, "cli-binary", "--from-beginning", "--max-messages", "1")
    assert m["value_base64"] == "AP7/b2s=" and m["value"] == "\x00\ufffd\ufffdok"
    assert m["key_base64"] == "a/8=" and m["key"] == "k\ufffd"


def test_consume_from_timestamp(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    ok("topics", "create", "cli-time", "--partitions", "2", bootstrap=bs)
    ok("produce", "cli-time", stdin=b"old-1\nold-2\nold-3\n", bootstrap=bs)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    ok("produce", "cli-time", stdin=b"new-1\nnew-2\n", bootstrap=bs)

    msgs = consume_json(bs, "cli-time", "--from-timestamp", str(cut), idle=2)
    assert sorted(m["value"] for m in msgs) == ["new-1", "new-2"]
    assert all(m["timestamp"] >= cut for m in msgs)

    iso = datetime.fromtimestamp(cut / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
    msgs = consume_json(bs, "cli-time", "--from-timestamp", iso, idle=2)
    assert sorted(m["value"] for m in msgs) == ["new-1", "new-2"]

    # a time after every message: start at the end, print nothing
    msgs = consume_json(bs, "cli-time", "--from-timestamp", str(cut + 3_600_000), idle=1)
    assert msgs == []


def test_unknown_topic(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    for args in (["consume", "cli-nope", "--timeout", "2"], ["topics", "describe", "cli-nope"],
                 ["topics", "alter", "cli-nope", "--partitions", "3"],
                 ["topics", "delete", "cli-nope"]):
        r = cli(*args, bootstrap=bs)
        assert r.returncode == 1, args
        assert "unknown topic 'cli-nope'" in r.stderr, (args, r.stderr)
    ok("topics", "delete", "cli-nope", "--if-exists", bootstrap=bs)
    assert "cli-nope" not in ok("topics", "list", bootstrap=bs).stdout.split()


def test_delete_topic(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    ok("topics", "create", "cli-gone", bootstrap=bs)
    ok("produce", "cli-gone", stdin=b"x\n", bootstrap=bs)
    assert "Deleted topic cli-gone" in ok("topics", "delete", "cli-gone", bootstrap=bs).stdout
    assert "cli-gone" not in ok("topics", "list", bootstrap=bs).stdout.split()


def test_produce_unknown_topic(samsa_broker: SamsaBroker) -> None:
    with SamsaBroker(overrides={"auto.create.topics.enable": "false"}) as b:
        r = cli("produce", "cli-missing", stdin=b"x\n", bootstrap=b.bootstrap)
        assert r.returncode == 1
        assert "unknown topic 'cli-missing'" in r.stderr
    # with auto.create.topics.enable=true (the default) the topic appears, as with Kafka
    bs = samsa_broker.bootstrap
    ok("produce", "cli-auto", stdin=b"x\n", bootstrap=bs)
    msgs = consume_json(bs, "cli-auto", "--from-beginning", "--max-messages", "1")
    assert [m["value"] for m in msgs] == ["x"]


def test_bootstrap_from_environment(samsa_broker: SamsaBroker) -> None:
    ok("topics", "create", "cli-env", env={"SAMSA_BOOTSTRAP_SERVER": samsa_broker.bootstrap})
    r = ok("topics", "list", env={"SAMSA_BOOTSTRAP_SERVER": samsa_broker.bootstrap})
    assert "cli-env" in r.stdout.split()


def test_unreachable_broker() -> None:
    port = free_port()  # nothing listens here
    bs = f"127.0.0.1:{port}"
    commands = [["topics", "list"], ["topics", "create", "x"], ["produce", "x"],
                ["consume", "x", "--timeout", "1"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    procs = [subprocess.Popen([sys.executable, "-m", "samsa.cli.main", *c,
                               "--bootstrap-server", bs], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for c in commands]
    for c, p in zip(commands, procs, strict=True):
        _, err = p.communicate(b"hello\n", timeout=30)  # a hang fails here
        text = err.decode()
        assert p.returncode == 1, (c, text)
        assert f"cannot reach broker at {bs}" in text, (c, text)
        assert "Traceback" not in text


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.timeout(90)
def test_demo(tmp_path: Path) -> None:
    r = ok("demo", cwd=tmp_path, timeout=80)
    out = r.stdout
    m = re.search(r"Up at 127\.0\.0\.1:(\d+)", out)
    assert m, out
    port = int(m.group(1))
    assert port == 9092 or "port 9092 is busy" in out
    assert "Created topic 'demo' with 3 partitions" in out
    assert "All 1000 acknowledged" in out
    assert "Read 1000 messages" in out
    assert "Every key, value and header matches" in out
    counts = [int(x) for x in re.findall(r"partition \d:\s+(\d+) messages", out)]
    assert len(counts) == 3 and sum(counts) == 1000
    assert "Stopped cleanly" in out
    assert sorted(p.name for p in (tmp_path / "samsa-data").iterdir() if p.name.startswith("demo")
                  ) == ["demo-0", "demo-1", "demo-2"]
    assert _port_free(port)  # the broker is gone

    # a second run reuses the data: the topic exists and new messages are appended
    r = ok("demo", "--messages", "30", cwd=tmp_path, timeout=80)
    assert "already exists from an earlier run" in r.stdout
    assert "Read 30 messages" in r.stdout and "Stopped cleanly" in r.stdout
    assert re.search(r"offsets \d+\.\.\d+", r.stdout)
    assert "offsets 0.." not in r.stdout
