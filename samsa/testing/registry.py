"""Schema registries for tests: `SamsaRegistry` runs `samsa registry` in a subprocess (kill -9-able);
`InProcessRegistry` runs one on a thread of the test process (fast to start)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from . import free_port


def wait_http(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"registry exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/", timeout=1):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    raise RuntimeError(f"registry at {url} did not answer in {timeout}s")


class SamsaRegistry:
    def __init__(self, bootstrap: str, port: int | None = None, leader_url: str | None = None,
                 extra_args: list[str] | None = None, startup_timeout: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.port = port or free_port()
        self.leader_url = leader_url
        self.extra_args = extra_args or []
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        fd, path = tempfile.mkstemp(prefix="samsa-registry-", suffix=".log")
        os.close(fd)
        self.log_path = Path(path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SamsaRegistry:
        args = [sys.executable, "-m", "samsa.cli.main", "registry", "--bootstrap-server", self.bootstrap,
                "--listen", f"127.0.0.1:{self.port}", *self.extra_args]
        if self.leader_url:
            args += ["--leader-url", self.leader_url]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_http(self.url, self.startup_timeout, self.proc)
        except RuntimeError as e:
            self.kill()
            raise RuntimeError(f"{e}:\n{self.log_path.read_text()[-3000:]}") from None
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> SamsaRegistry:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class InProcessRegistry:
    def __init__(self, bootstrap: str, **config: Any) -> None:
        from samsa.registry.server import RegistryConfig, RegistryServer

        self.port = free_port()
        self.server = RegistryServer(RegistryConfig(bootstrap=bootstrap,
                                                    listener=f"http://127.0.0.1:{self.port}", **config))
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> InProcessRegistry:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(60)
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
