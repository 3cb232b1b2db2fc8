"""The README's main job, the seeds' pipeline: Protobuf order events through Samsa's registry, the
Spark driver (a child process) writing windowed revenue exactly once into the warehouse, killed -9
right after its warehouse commit and restarted; and `samsa pipeline` itself (broker + registry + Connect +
Spark) with its driver kill -9'd from outside mid stream, then run again: the second run resumes and
its check passes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing import SamsaBroker, free_port

pytest.importorskip("pyspark")
pytest.importorskip("duckdb")

from samsa.connect.connectors.sql import open_database  # noqa: E402
from samsa.pipeline import events as ev  # noqa: E402
from samsa.pipeline import warehouse as wh  # noqa: E402
from samsa.pipeline.driver import SparkDriver  # noqa: E402

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[SamsaBroker, str]]:
    registry = f"http://127.0.0.1:{free_port()}"
    with SamsaBroker(overrides={"schema.registry.enable": "true",
                                "schema.registry.listeners": registry}) as b:
        deadline = time.monotonic() + 30
        while True:
            try:
                ev.register_schema(registry)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        ev.ensure_topic(b.bootstrap)
        yield b, registry


def _wait(cond: object, timeout: float, what: str, driver: SparkDriver) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(driver.lines) +
                                 driver.log_tail())
        time.sleep(0.2)


def test_driver_crash_after_warehouse_commit_is_not_double_counted(broker: tuple[SamsaBroker, str],
                                                                  tmp_path: Path) -> None:
    """The worst moment for a crash: the driver kills itself (kill -9 of its process group) right
    after batch 1 is committed in the warehouse and before Spark's commit log has it, while events
    are still arriving. The restart re-runs batch 1, which the warehouse skips; afterwards every
    (window, product) total equals the totals computed from the topic, every batch id once."""
    b, registry = broker
    url = f"duckdb:{tmp_path / 'warehouse.duckdb'}"
    before = sum(ev.end_offsets(b.bootstrap).values())
    driver = SparkDriver(b.bootstrap, registry, url, tmp_path, max_per_trigger=1000, trigger_ms=500,
                         extra_args=("--crash-after-commit", "1"))
    driver.start()
    assert driver.wait_streaming(180), driver.log_tail()
    produced: list[ev.Produced] = []
    stop = threading.Event()

    def produce() -> None:  # 200 events a second, 1 simulated minute each, until stopped
        start = ev.resume_point(b.bootstrap)
        for chunk in range(300):
            if stop.is_set():
                return
            produced.append(ev.generate(b.bootstrap, registry, 200, start_ms=start + chunk * ev.MINUTE_MS,
                                        span_ms=ev.MINUTE_MS, seconds=1.0, seed=chunk,
                                        order_prefix=f"kill-{chunk}"))

    gen = threading.Thread(target=produce, daemon=True)
    gen.start()
    rc = driver.wait(180)
    assert rc == -9, f"driver exit {rc}:\n" + "\n".join(driver.lines) + driver.log_tail()
    assert any("crashing (kill -9)" in line for line in driver.lines)
    assert gen.is_alive()  # mid stream
    with open_database(url) as db:
        assert wh.batches_committed(db) == 2  # batches 0 and 1: in the warehouse, not in Spark's log
    stop.set()
    gen.join(30)
    assert not gen.is_alive()

    driver.extra_args = ()  # restart without the fault injection, larger batches
    driver.argv[driver.argv.index("--max-per-trigger") + 1] = "20000"
    driver.lines.clear()
    driver.start()
    ends = ev.end_offsets(b.bootstrap)
    driver.done_file.write_text(json.dumps({f"{ev.TOPIC}/{p}": e for p, e in ends.items()}))
    rc = driver.wait(240)
    assert rc == 0, f"driver exit {rc}:\n" + "\n".join(driver.lines) + driver.log_tail()
    assert any(line.startswith("micro-batch 1:") and "skipped" in line for line in driver.lines), \
        "\n".join(driver.lines)

    events = ev.read_events(b.bootstrap)
    assert len(events) == before + sum(p.count for p in produced)
    expected = ev.window_totals(events)
    with open_database(url) as db:
        got = wh.read_revenue(db)
        batch_ids = [r[0] for r in db.execute(f"SELECT batch_id FROM {wh.BATCHES} ORDER BY batch_id")]
    wrong = {k: (expected.get(k), got.get(k)) for k in expected.keys() | got.keys()
             if expected.get(k) != got.get(k)}
    assert not wrong, f"{len(wrong)} totals differ, e.g. {list(wrong.items())[:3]}"
    assert batch_ids == list(range(len(batch_ids)))  # every batch once, none lost
    assert sum(o for o, _, _ in got.values()) == sum(1 for e in events if e.status != "CANCELLED")


def test_samsa_pipeline_driver_killed_then_rerun(tmp_path: Path) -> None:
    """The main job's path: `samsa pipeline` with its Spark driver kill -9'd (whole process group)
    from outside mid stream; the run fails, the next run resumes (Spark from its checkpoint, the
    sink from its offsets) and its check finds the warehouse equal to every event produced."""
    data = tmp_path / "samsa-data"
    argv = [sys.executable, "-m", "samsa.cli.main", "pipeline", "--events", "3000", "--seconds", "8",
            "--port", str(free_port()), "--data-dir", str(data)]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             cwd=tmp_path)
    out: list[str] = []
    killed = False
    assert first.stdout is not None
    deadline = time.monotonic() + 300
    for line in first.stdout:
        out.append(line)
        if not killed and "spark | micro-batch 1:" in line:
            os.killpg(int((data / "pipeline" / "spark-driver.pid").read_text()), signal.SIGKILL)
            killed = True
        assert time.monotonic() < deadline, "".join(out)
    assert first.wait(60) != 0 and killed, "".join(out)
    assert "the Spark driver exited with -9" in "".join(out), "".join(out)

    second = subprocess.run(argv, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-3000:]
    assert "6000 events in 'order-events'" in second.stdout
    assert "0 differ" in second.stdout
    assert "equals the events' totals: yes" in second.stdout
    assert "holds 6000 rows for 6000 events: 0 duplicates, 0 missing" in second.stdout
    assert "exactly one raw row per event: yes" in second.stdout
