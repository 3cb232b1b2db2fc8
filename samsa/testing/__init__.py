"""Run a real Samsa broker for tests: a subprocess on a free port with a temporary data dir.

    from samsa.testing import SamsaBroker
    with SamsaBroker() as b:
        Producer({"bootstrap.servers": b.bootstrap})

Installed as a pytest plugin too: the `samsa_broker` fixture (one broker per test module) and
`samsa_cluster` (a 3-node cluster per test module, samsa.testing.cluster.SamsaCluster).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType


def terminate(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """SIGTERM (a clean stop), then SIGKILL if the process has not exited within `timeout`."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SamsaBroker:
    """A broker process. `kill()` sends SIGKILL (crash); `stop()` SIGTERM (clean); `start()` again
    reuses the same data dir and port."""

    def __init__(self, data_dir: str | Path | None = None, port: int | None = None,
                 overrides: dict[str, str] | None = None, startup_timeout: float = 30.0,
                 nofile: tuple[int, int] | None = None,
                 env: dict[str, str] | None = None) -> None:
        """`nofile`: (soft, hard) RLIMIT_NOFILE for the broker process; `env`: variables added
        to its environment (test hooks such as SAMSA_FAULT_INJECT)."""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-test-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        # the admin HTTP listener (ops-metrics) on its own free port; "" in overrides: off
        if "admin.http.listeners" not in self.overrides:
            self.overrides["admin.http.listeners"] = f"http://127.0.0.1:{free_port()}"
        self.startup_timeout = startup_timeout
        self.nofile = nofile
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str | None:
        """The admin HTTP listener's base URL (/metrics, /health/*, the console); None if off."""
        value = self.overrides.get("admin.http.listeners", "").strip()
        return value.rstrip("/") or None

    def start(self) -> SamsaBroker:
        args = [sys.executable, "-m", "samsa.cli.main", "serve",
                "--listeners", f"PLAINTEXT://127.0.0.1:{self.port}",
                "--log-dirs", str(self.data_dir / "logs")]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        env.update(self.env)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=self._limits if self.nofile else None)
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"samsa broker exited with {self.proc.returncode}:\n"
                                   f"{self.log_path.read_text()[-4000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"samsa broker did not start in {self.startup_timeout}s")

    def _limits(self) -> None:
        import resource

        assert self.nofile is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, self.nofile)

    def kill(self) -> None:
        """SIGKILL: no chance to flush or write the clean-shutdown marker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is not None:
            terminate(self.proc, timeout)
        self.proc = None

    def restart(self, hard: bool = False) -> SamsaBroker:
        self.kill() if hard else self.stop()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self.log_path.unlink(missing_ok=True)
            self._tmp.cleanup()

    def __enter__(self) -> SamsaBroker:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


from .cluster import ClusterNode, SamsaCluster  # noqa: E402 - cluster imports free_port from here

__all__ = ["ClusterNode", "SamsaBroker", "SamsaCluster", "free_port"]
