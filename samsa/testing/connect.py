"""Run real Connect worker processes for tests: `samsa connect standalone|distributed` on a free
REST port, with helpers to drive the REST API and wait for states.

    with SamsaBroker() as b, ConnectWorker(b.bootstrap, tmp_path) as w:
        w.create("src", {...}); w.wait_running("src")
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from . import free_port, terminate


class ConnectWorker:
    """One worker process. `kill()` is SIGKILL (a crash); `stop()` SIGTERM; `start()` again reuses
    the same port and files."""

    def __init__(self, bootstrap: str, work_dir: Path, *, distributed: bool = False,
                 group_id: str = "connect-cluster", props: dict[str, str] | None = None,
                 connector_files: list[Path] | None = None, port: int | None = None,
                 name: str = "worker", startup_timeout: float = 60.0,
                 https: bool = False, verify: Any = True,
                 cert: tuple[str, str] | None = None) -> None:
        """`https`: the REST listener is https:// (its listeners.https.ssl.* come in `props`);
        `verify` (a CA file or an SSLContext) and `cert` (client certificate, key) are what this
        helper's own REST client uses."""
        self.bootstrap = bootstrap
        self.scheme = "https" if https else "http"
        self.dir = Path(work_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.distributed = distributed
        self.port = port or free_port()
        self.name = name
        self.connector_files = list(connector_files or [])
        self.startup_timeout = startup_timeout
        base = {"bootstrap.servers": bootstrap,
                "listeners": f"{self.scheme}://127.0.0.1:{self.port}",
                "offset.flush.interval.ms": "1000",
                # a killed worker's sink consumers leave their groups after 6 s, not 45 s
                "consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "1000",
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
        if distributed:
            base.update({"group.id": group_id, "config.storage.topic": f"{group_id}-configs",
                         "offset.storage.topic": f"{group_id}-offsets",
                         "status.storage.topic": f"{group_id}-status",
                         "config.storage.replication.factor": "-1",
                         "offset.storage.replication.factor": "-1",
                         "status.storage.replication.factor": "-1",
                         "offset.storage.partitions": "5", "status.storage.partitions": "2",
                         "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000",
                         "scheduled.rebalance.max.delay.ms": "3000"})
        else:
            base["offset.storage.file.filename"] = str(self.dir / f"{name}.offsets")
        base.update(props or {})
        self.props = base
        self.properties_path = self.dir / f"{name}.properties"
        self.log_path = self.dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        if isinstance(verify, str | Path):  # httpx wants an SSLContext (and the cert in it)
            ctx = ssl.create_default_context(cafile=str(verify))
            if cert is not None:
                ctx.load_cert_chain(*cert)
            verify = ctx
        self.http = httpx.Client(base_url=self.url, timeout=30.0, verify=verify)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self) -> ConnectWorker:
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        mode = "distributed" if self.distributed else "standalone"
        args = [sys.executable, "-m", "samsa.cli.main", "connect", mode, str(self.properties_path)]
        if not self.distributed:
            args += [str(p) for p in self.connector_files]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"connect worker exited with {self.proc.returncode}:\n"
                                   f"{self.log_path.read_text()[-4000:]}")
            try:
                if self.http.get("/", timeout=1.0).status_code == 200 and self._ready():
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"connect worker not ready in {self.startup_timeout}s:\n"
                           f"{self.log_path.read_text()[-4000:]}")

    def _ready(self) -> bool:
        """The herder answers (the REST server starts before it) and, distributed, has joined
        the group (KIP-1017's /health)."""
        try:
            return self.http.get("/health", timeout=12.0).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGCONT)  # a paused worker must see the SIGTERM
            terminate(self.proc, 30)

    def pause(self) -> None:
        """SIGSTOP: the worker stops heartbeating but keeps its connections (a zombie-to-be)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> ConnectWorker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        self.http.close()

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""

    # ---- REST helpers ---------------------------------------------------------------------------
    def create(self, name: str, config: dict[str, Any]) -> httpx.Response:
        return self.http.post("/connectors", json={"name": name, "config": config})

    def status(self, name: str) -> dict[str, Any]:
        resp = self.http.get(f"/connectors/{name}/status")
        resp.raise_for_status()
        return dict(resp.json())

    def wait_state(self, name: str, state: str = "RUNNING", tasks: int | None = None,
                   timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the connector and (at least `tasks`, default all) its tasks are in `state`."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                resp = self.http.get(f"/connectors/{name}/status", timeout=5.0)
                last = resp.json() if resp.status_code == 200 else resp.text
                if resp.status_code == 200:
                    st = last
                    task_states = [t["state"] for t in st["tasks"]]
                    want = len(task_states) if tasks is None else tasks
                    if st["connector"]["state"] == state and want <= len(task_states) and \
                            sum(s == state for s in task_states) >= want and (want or tasks == 0):
                        return dict(st)
            except (httpx.HTTPError, json.JSONDecodeError, KeyError) as e:
                last = repr(e)
            time.sleep(0.2)
        raise TimeoutError(f"{name} not {state} in {timeout}s: {last}\n{self.log_tail()}")
