"""The Spark driver of the pipeline as a child process (`python -m samsa.spark.pipeline_job`) in a
session of its own, so a crash can be simulated the way it happens: kill -9 of the driver's whole
process group (the Python driver, its JVM and the Python workers at once)."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


class SparkDriver:
    def __init__(self, bootstrap: str, registry: str, warehouse: str, work_dir: Path, *,
                 max_per_trigger: int = 10_000, trigger_ms: int = 1000,
                 on_line: Callable[[str], None] | None = None, extra_args: tuple[str, ...] = (),
                 registry_props: dict[str, str] | None = None) -> None:
        self.done_file = work_dir / "produced.json"
        self.checkpoint = work_dir / "checkpoint"
        self.log_path = work_dir / "spark-driver.log"
        self.pid_path = work_dir / "spark-driver.pid"  # its process group, for a kill -9 from outside
        self.argv = [sys.executable, "-m", "samsa.spark.pipeline_job", "--bootstrap", bootstrap,
                     "--registry", registry, "--warehouse", warehouse,
                     "--checkpoint", str(self.checkpoint), "--done-file", str(self.done_file),
                     "--max-per-trigger", str(max_per_trigger), "--trigger-ms", str(trigger_ms)]
        for k, v in (registry_props or {}).items():  # registry credentials / TLS, Confluent names
            self.argv += ["--registry-property", f"{k}={v}"]
        self.extra_args = extra_args  # e.g. the job's fault injection, for tests
        self.on_line = on_line
        self.lines: collections.deque[str] = collections.deque(maxlen=200)
        self.proc: subprocess.Popen[str] | None = None
        self._started = threading.Event()
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        self._started.clear()
        log = open(self.log_path, "a")  # noqa: SIM115 - the child's stderr (Spark's log)
        try:
            self.proc = subprocess.Popen([*self.argv, *self.extra_args], stdout=subprocess.PIPE, stderr=log,
                                         stdin=subprocess.DEVNULL, text=True, errors="replace",
                                         start_new_session=True)
        finally:
            log.close()
        self.pid_path.write_text(f"{self.proc.pid}\n")
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if line.startswith("streaming query "):
                self._started.set()
            if self.on_line is not None:
                self.on_line(line)

    def wait_streaming(self, timeout: float) -> bool:
        """Until the streaming query has started (False if the driver exited or time ran out)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._started.wait(0.2):
                return True
            if self.proc is None or self.proc.poll() is not None:
                return False
        return False

    def batches_done(self) -> int:
        return sum(1 for line in list(self.lines) if line.startswith("micro-batch "))

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if still running after `timeout` seconds."""
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._reader is not None:
            self._reader.join(5)
        return rc

    def kill(self) -> None:
        """kill -9 of the driver's process group: a crash, nothing is flushed or stopped."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)
        if self._reader is not None:
            self._reader.join(5)

    def log_tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""
