"""The README's main job, `samsa pipeline` (what `make run` runs): broker, generator, PySpark
streaming job with the samsa source and exactly-once sink, checked walk-through; a second run
resumes from the checkpoint and processes only the new events."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from samsa.testing import free_port

pytest.importorskip("pyspark")
pytestmark = pytest.mark.timeout(600)


def test_samsa_pipeline_runs_and_resumes(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "samsa.cli.main", "pipeline", "--events", "400",
            "--port", str(free_port()), "--data-dir", str(tmp_path / "samsa-data")]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "400 order events in 'pipeline-orders', 400 priced orders" in first.stdout
    assert "0 orders with more than one result" in first.stdout
    assert "per-customer totals equal: yes" in first.stdout
    second = subprocess.run(argv, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "400 new events processed" in second.stdout
    assert "800 order events in 'pipeline-orders', 800 priced orders" in second.stdout
