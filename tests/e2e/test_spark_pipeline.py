"""The README's main job, the seeds' pipeline: Protobuf order events through Samsa's registry, the
Spark driver (a child process) writing windowed revenue exactly once into the warehouse, killed -9
mid stream and restarted; and `samsa pipeline` itself (broker + registry + Connect + Spark) run
twice: the second run resumes."""

from __future__ import annotations

import json
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


def test_driver_kill9_mid_stream_totals_exact(broker: tuple[SamsaBroker, str], tmp_path: Path) -> None:
    """Crash 1: the driver kills itself (kill -9 of its process group) right after batch 1 is
    committed in the warehouse and before Spark's commit log has it: the restart re-runs batch 1,
    which the warehouse skips (the restart's first batch). Crash 2: kill -9 from outside while
    events are still arriving. Afterwards every (window, product) total equals the totals
    computed from the topic, and every batch id is in the warehouse once."""
    b, registry = broker
    url = f"duckdb:{tmp_path / 'warehouse.duckdb'}"
    before = sum(ev.end_offsets(b.bootstrap).values())
    t0 = time.monotonic()
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
    print(f"crash 1 after {time.monotonic() - t0:.0f} s")
    assert rc == -9, f"driver exit {rc}:\n" + "\n".join(driver.lines) + driver.log_tail()
    assert any("crashing (kill -9)" in line for line in driver.lines)
    with open_database(url) as db:
        assert wh.batches_committed(db) == 2  # batches 0 and 1: in the warehouse, not in Spark's log

    driver.extra_args = ()  # restart without the fault injection, larger batches
    driver.argv[driver.argv.index("--max-per-trigger") + 1] = "20000"
    driver.lines.clear()
    driver.start()
    _wait(lambda: driver.batches_done() >= 2, 180, "2 batches after the first restart", driver)
    assert any(line.startswith("micro-batch 1:") and "skipped" in line for line in driver.lines), \
        "\n".join(driver.lines)
    assert gen.is_alive()
    print(f"crash 2 after {time.monotonic() - t0:.0f} s")
    driver.kill()  # crash 2, from outside, events still arriving

    stop.set()
    gen.join(30)
    assert not gen.is_alive()
    driver.lines.clear()
    driver.start()
    ends = ev.end_offsets(b.bootstrap)
    driver.done_file.write_text(json.dumps({f"{ev.TOPIC}/{p}": e for p, e in ends.items()}))
    rc = driver.wait(240)
    assert rc == 0, f"driver exit {rc}:\n" + "\n".join(driver.lines) + driver.log_tail()

    print(f"done after {time.monotonic() - t0:.0f} s")
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


def test_samsa_pipeline_runs_and_resumes(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "samsa.cli.main", "pipeline", "--events", "3000", "--seconds", "3",
            "--port", str(free_port()), "--data-dir", str(tmp_path / "samsa-data")]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-3000:]
    assert "3000 events in 'order-events'" in first.stdout
    assert "equals the events' totals: yes" in first.stdout
    assert "exactly one raw row per event: yes" in first.stdout
    second = subprocess.run(argv, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-3000:]
    assert "6000 events in 'order-events'" in second.stdout
    assert "equals the events' totals: yes" in second.stdout
    assert "exactly one raw row per event: yes" in second.stdout
