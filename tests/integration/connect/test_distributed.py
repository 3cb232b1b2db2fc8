"""Distributed Connect: three worker processes in one group against a real broker. Connectors
and tasks spread over the workers; a worker killed with kill -9 has its work moved to the others
after scheduled.rebalance.max.delay.ms; a file source -> topic -> file sink round trip survives
worker bounces with nothing lost, and with exactly.once.source.support=enabled the topic holds
every line exactly once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker

DELAY_MS = 3000
PLUGINS = str(Path(__file__).resolve().parents[2] / "connect_plugins")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


def workers(broker: SamsaBroker, tmp_path: Path, group: str, n: int = 3,
            props: dict[str, str] | None = None) -> list[ConnectWorker]:
    extra = {"scheduled.rebalance.max.delay.ms": str(DELAY_MS), **(props or {})}
    return [ConnectWorker(broker.bootstrap, tmp_path, distributed=True, group_id=group,
                          name=f"{group}-w{i}", props=extra) for i in range(n)]


def statuses(w: ConnectWorker) -> dict[str, Any]:
    return dict(w.http.get("/connectors", params={"expand": "status"}).json())


def owners(w: ConnectWorker) -> dict[str, str]:
    """Every connector's and task's worker id, from one worker's view."""
    out = {}
    for name, info in statuses(w).items():
        st = info["status"]
        out[name] = st["connector"]["worker_id"]
        for t in st["tasks"]:
            out[f"{name}-{t['id']}"] = t["worker_id"]
    return out


def wait_all_running(w: ConnectWorker, names: list[str], tasks: int, exclude: str | None = None,
                     timeout: float = 90.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            st = statuses(w)
            last = st
            ok = all(n in st and st[n]["status"]["connector"]["state"] == "RUNNING"
                     and len(st[n]["status"]["tasks"]) == tasks
                     and all(t["state"] == "RUNNING" for t in st[n]["status"]["tasks"])
                     for n in names)
            if ok:
                own = owners(w)
                if exclude is None or exclude not in own.values():
                    return own
        except Exception as e:  # a worker answering 409/500 during a rebalance
            last = repr(e)
        time.sleep(0.3)
    raise TimeoutError(f"not all running in {timeout}s: {last}\n{w.log_tail()}")


@pytest.mark.slow
def test_work_spreads_and_moves_after_kill9(broker: SamsaBroker, tmp_path: Path) -> None:
    ws = workers(broker, tmp_path, "spread")
    for w in ws:
        w.start()
    try:
        names = [f"verifiable-{i}" for i in range(3)]
        for i, n in enumerate(names):
            r = ws[i].create(n, {"connector.class": "VerifiableSource", "topic": f"vs-{i}",
                                 "throughput": "50", "tasks.max": "2",
                                 "file": str(tmp_path / f"{n}.jsonl")})
            assert r.status_code == 201, r.text
        own = wait_all_running(ws[0], names, tasks=2)
        assert len(set(own.values())) == 3, f"work not spread over 3 workers: {own}"
        victim = ws[1]
        victim_id = victim.url.split("://")[1]
        assert victim_id in own.values()
        victim.kill()
        t0 = time.monotonic()
        own = wait_all_running(ws[0], names, tasks=2, exclude=victim_id)
        moved_after = time.monotonic() - t0
        assert set(own.values()) <= {ws[0].url.split("://")[1], ws[2].url.split("://")[1]}
        print(f"work of the killed worker running elsewhere {moved_after:.1f}s after kill -9 "
              f"(session.timeout.ms 6000 + scheduled.rebalance.max.delay.ms {DELAY_MS})")
        # a worker that comes back gets a share again
        victim.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and victim_id not in owners(ws[0]).values():
            time.sleep(0.3)
        assert victim_id in owners(ws[0]).values()
    finally:
        for w in ws:
            w.stop()


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[str]:
    """Every committed value of the topic (read_committed), read to the end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    md = c.list_topics(topic, timeout=10)
    parts = list(md.topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out: list[str] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(eof) < len(parts) and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is not None:
                if m.error().code() == m.error()._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            out.append(m.value().decode())
    c.close()
    return out


@pytest.mark.slow
def test_round_trip_100k_lines_through_bounces_exactly_once(broker: SamsaBroker,
                                                             tmp_path: Path) -> None:
    src, out, topic = tmp_path / "in.txt", tmp_path / "out.txt", "eos-lines"
    total, chunks = 100_000, 10
    ws = workers(broker, tmp_path, "eos", props={"exactly.once.source.support": "enabled",
                                                 "offset.flush.interval.ms": "500"})
    for w in ws:
        w.start()
    try:
        src.touch()
        r = ws[0].create("eos-source", {"connector.class": "FileStreamSource", "topic": topic,
                                        "file": str(src), "exactly.once.support": "required",
                                        "batch.size": "500"})
        assert r.status_code == 201, r.text
        r = ws[0].create("eos-sink", {"connector.class": "FileStreamSink", "topics": topic,
                                      "file": str(out), "consumer.override.isolation.level":
                                      "read_committed"})
        assert r.status_code == 201, r.text
        wait_all_running(ws[0], ["eos-source", "eos-sink"], tasks=1)
        per = total // chunks
        bounces = 0
        for k in range(chunks):
            with src.open("a") as f:
                f.write("".join(f"line-{i}\n" for i in range(k * per, (k + 1) * per)))
            if k % 3 == 1:  # kill -9 whichever worker runs the source task, then restart it
                own = owners(ws[0] if ws[0].alive() else ws[2])
                runner = own.get("eos-source-0")
                victim = next(w for w in ws if w.url.endswith(str(runner)))
                time.sleep(0.5)
                victim.kill()
                bounces += 1
                survivor = next(w for w in ws if w.alive())
                wait_all_running(survivor, ["eos-source", "eos-sink"], tasks=1,
                                 exclude=str(runner), timeout=120)
                victim.start()
            time.sleep(0.3)
        assert bounces == 3
        want = {f"line-{i}" for i in range(total)}
        deadline = time.monotonic() + 180
        got_file: list[str] = []
        while time.monotonic() < deadline:
            got_file = out.read_text().splitlines() if out.exists() else []
            if want <= set(got_file):
                break
            time.sleep(1)
        in_topic = read_topic(broker.bootstrap, topic)
    finally:
        for w in ws:
            w.stop()
    counts = Counter(in_topic)
    missing = want - set(counts)
    dups = {v: n for v, n in counts.items() if n > 1}
    assert not missing, f"{len(missing)} lines never reached the topic, e.g. {sorted(missing)[:5]}"
    assert not dups, f"{len(dups)} lines in the topic more than once, e.g. {list(dups.items())[:5]}"
    assert len(in_topic) == total
    assert want <= set(got_file), f"{len(want - set(got_file))} lines never reached the file"


@pytest.mark.slow
def test_connector_defined_transaction_boundaries(broker: SamsaBroker, tmp_path: Path) -> None:
    """transaction.boundary=connector: the task commits after even batches and aborts after odd
    ones; a read_committed reader sees exactly the even batches."""
    topic = "boundaries"
    ws = workers(broker, tmp_path, "txnb", n=1,
                 props={"exactly.once.source.support": "enabled", "plugin.path": PLUGINS})
    for w in ws:
        w.start()
    try:
        r = ws[0].create("boundary", {"connector.class": "BoundarySourceConnector",
                                      "topic": topic, "batches": "20",
                                      "transaction.boundary": "connector",
                                      "exactly.once.support": "required"})
        assert r.status_code == 201, r.text
        wait_all_running(ws[0], ["boundary"], tasks=1)
        want = {f"b{b}-{i}" for b in range(0, 20, 2) for i in range(3)}
        deadline = time.monotonic() + 60
        got: list[str] = []
        while time.monotonic() < deadline:
            got = read_topic(broker.bootstrap, topic, timeout=10)
            if len(got) >= len(want):
                break
            time.sleep(0.5)
    finally:
        for w in ws:
            w.stop()
    assert sorted(got) == sorted(want)


@pytest.mark.slow
def test_pause_stop_alter_offsets_resume_and_restart(broker: SamsaBroker, tmp_path: Path) -> None:
    """The life cycle across two workers: pause and resume, KIP-745 restart, KIP-875 stop ->
    offsets rewound -> resume re-reads the file from the rewound position."""
    src, topic = tmp_path / "life.txt", "life-lines"
    src.write_text("".join(f"life-{i}\n" for i in range(50)))
    ws = workers(broker, tmp_path, "life", n=2)
    for w in ws:
        w.start()
    try:
        a, b = ws
        assert a.create("life", {"connector.class": "FileStreamSource", "topic": topic,
                                 "file": str(src)}).status_code == 201
        wait_all_running(a, ["life"], tasks=1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(read_topic(broker.bootstrap, topic, 5)) < 50:
            time.sleep(0.3)
        assert b.http.put("/connectors/life/pause").status_code == 202
        b.wait_state("life", "PAUSED")
        assert a.http.put("/connectors/life/resume").status_code == 202
        a.wait_state("life", "RUNNING")
        r = b.http.post("/connectors/life/restart", params={"includeTasks": "true"})
        assert r.status_code == 202 and r.json()["connector"]["state"] == "RESTARTING"
        a.wait_state("life", "RUNNING")
        # offsets can only change once the connector is STOPPED
        assert a.http.patch("/connectors/life/offsets", json={"offsets": [
            {"partition": {"filename": str(src)}, "offset": {"position": 0}}]}).status_code == 400
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            offs = b.http.get("/connectors/life/offsets").json().get("offsets")
            if offs and offs[0]["offset"]["position"] == src.stat().st_size:
                break
            time.sleep(0.5)
        assert offs[0]["offset"]["position"] == src.stat().st_size
        assert b.http.put("/connectors/life/stop").status_code == 204
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st = a.status("life")
            if st["connector"]["state"] == "STOPPED" and not st["tasks"]:
                break
            time.sleep(0.3)
        assert st["connector"]["state"] == "STOPPED" and st["tasks"] == []
        r = b.http.patch("/connectors/life/offsets", json={"offsets": [
            {"partition": {"filename": str(src)}, "offset": {"position": 0}}]})
        assert r.status_code == 200, r.text
        assert a.http.get("/connectors/life/offsets").json()["offsets"][0]["offset"] == \
            {"position": 0}
        assert a.http.put("/connectors/life/resume").status_code == 202
        deadline = time.monotonic() + 60
        values: list[str] = []
        while time.monotonic() < deadline:
            values = read_topic(broker.bootstrap, topic, 5)
            if len(values) >= 100:
                break
            time.sleep(0.5)
        assert Counter(values) == Counter({f"life-{i}": 2 for i in range(50)})
        # deleted: gone from both workers, its statuses end in tombstones
        assert b.http.delete("/connectors/life").status_code == 204
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (a.http.get("/connectors").json() or
                                               latest_status(broker.bootstrap, "life-status",
                                                             b"status-connector-life")):
            time.sleep(0.3)
        assert a.http.get("/connectors").json() == [] == b.http.get("/connectors").json()
        assert a.http.get("/connectors/life/status").status_code == 404
        assert latest_status(broker.bootstrap, "life-status", b"status-connector-life") is None
        assert latest_status(broker.bootstrap, "life-status", b"status-task-life-0") is None
    finally:
        for w in ws:
            w.stop()


def latest_status(bootstrap: str, topic: str, key: bytes) -> bytes | None:
    """The last value written under `key` in the status topic (None: a tombstone or nothing)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"st-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    md = c.list_topics(topic, timeout=10)
    parts = list(md.topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    last: bytes | None = None
    eof: set[int] = set()
    deadline = time.monotonic() + 15
    while len(eof) < len(parts) and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            if m.error() is not None:
                eof.add(m.partition())
            elif m.key() == key:
                last = m.value()
    c.close()
    return last


@pytest.mark.slow
def test_zombie_source_task_is_fenced(broker: SamsaBroker, tmp_path: Path) -> None:
    """SIGSTOP the worker running an exactly-once source task past the session timeout: the task
    restarts on another worker (its transactional id fences the old producer); after SIGCONT the
    zombie writes nothing more and its failure report does not overwrite the new owner's status.
    The topic holds every line exactly once."""
    src, topic = tmp_path / "zombie.txt", "zombie-lines"
    total = 20_000
    ws = workers(broker, tmp_path, "zombie", n=2,
                 props={"exactly.once.source.support": "enabled"})
    for w in ws:
        w.start()
    try:
        src.write_text("".join(f"z-{i}\n" for i in range(total // 2)))
        assert ws[0].create("zsrc", {"connector.class": "FileStreamSource", "topic": topic,
                                     "file": str(src), "batch.size": "200",
                                     "exactly.once.support": "required"}).status_code == 201
        own = wait_all_running(ws[0], ["zsrc"], tasks=1)
        runner_id = own["zsrc-0"]
        zombie = next(w for w in ws if w.url.endswith(runner_id))
        other = next(w for w in ws if w is not zombie)
        zombie.pause()
        with src.open("a") as f:  # written while the zombie is frozen
            f.write("".join(f"z-{i}\n" for i in range(total // 2, total)))
        wait_all_running(other, ["zsrc"], tasks=1, exclude=runner_id, timeout=120)
        zombie.resume()
        deadline = time.monotonic() + 90
        got: list[str] = []
        while time.monotonic() < deadline:
            got = read_topic(broker.bootstrap, topic, 10)
            if len(got) >= total:
                break
            time.sleep(1)
        time.sleep(3)  # anything the zombie could still write would show up now
        got = read_topic(broker.bootstrap, topic, 10)
        # the returning worker may take the task back in a balancing round: wait for it to settle
        deadline = time.monotonic() + 60
        st = other.status("zsrc")
        while time.monotonic() < deadline and st["tasks"][0]["state"] != "RUNNING":
            time.sleep(0.5)
            st = other.status("zsrc")
    finally:
        for w in ws:
            w.stop()
    counts = Counter(got)
    assert set(counts) == {f"z-{i}" for i in range(total)}
    assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]
    # RUNNING wherever it runs now (the returning worker may get it back in a later balancing
    # round): never the zombie's FAILED written over the new owner's report
    assert st["tasks"][0]["state"] == "RUNNING", st
