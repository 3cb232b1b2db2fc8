"""Schema registries for tests: `SamsaRegistry` runs `samsa registry` in a subprocess (kill -9-able);
`InProcessRegistry` runs one on a thread of the test process (fast to start). Both take
Confluent registry settings (`props`: authentication.*, ssl.*, kafkastore.*) and `https=True`
for an https:// listener (its ssl.* settings in props, e.g. `registry_tls_props(tls)`)."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
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
    """Until the registry answers at all (a 401 of a secured one counts; TLS is not checked)."""
    deadline = time.monotonic() + timeout
    ctx = ssl._create_unverified_context() if url.startswith("https:") else None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"registry exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/", timeout=1, context=ctx):
                return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    raise RuntimeError(f"registry at {url} did not answer in {timeout}s")


class SamsaRegistry:
    def __init__(self, bootstrap: str, port: int | None = None, leader_url: str | None = None,
                 extra_args: list[str] | None = None, startup_timeout: float = 30.0,
                 props: dict[str, str] | None = None, https: bool = False) -> None:
        self.bootstrap = bootstrap
        self.props = props or {}
        self.scheme = "https" if https else "http"
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
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self) -> SamsaRegistry:
        args = [sys.executable, "-m", "samsa.cli.main", "registry", "--bootstrap-server", self.bootstrap,
                "--listen", self.url, *self.extra_args]
        if self.props:
            conf = self.log_path.with_suffix(".properties")
            conf.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
            args.insert(4, str(conf))
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
        self.log_path.with_suffix(".properties").unlink(missing_ok=True)

    def __enter__(self) -> SamsaRegistry:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class InProcessRegistry:
    def __init__(self, bootstrap: str, https: bool = False, **config: Any) -> None:
        from samsa.registry.server import RegistryConfig, RegistryServer

        self.port = free_port()
        self.scheme = "https" if https else "http"
        self.server = RegistryServer(RegistryConfig(bootstrap=bootstrap, listener=self.url, **config))
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def __enter__(self) -> InProcessRegistry:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(60)
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def registry_tls_props(tls: Any, client_authentication: str = "NONE") -> dict[str, str]:
    """ssl.* settings of an https:// registry listener with a TlsFiles' server key store
    (samsa.testing.tls), trusting its CA for client certificates."""
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.server_file),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls.ca_file),
            "ssl.client.authentication": client_authentication}


def users_file(path: Path, users: dict[str, tuple[str, str]]) -> Path:
    """A Jetty users file (`name: password,role`) for authentication.method=BASIC."""
    path.write_text("".join(f"{u}: {pw},{role}\n" for u, (pw, role) in users.items()))
    return path
