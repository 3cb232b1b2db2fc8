"""Run a real PostgreSQL server for tests: Debian's binaries, a fresh cluster in a temporary dir, a free
port on 127.0.0.1, `wal_level=logical` (the CDC source needs it), trust authentication for the
`postgres` superuser.

    from samsa.testing.postgres import PostgresServer
    with PostgresServer() as pg:
        psycopg.connect(pg.dsn())

`kill()` crashes the postmaster (SIGKILL), `stop()` shuts it down fast, `start()` restarts it on the
same data dir and port: tests use these for "database down and back". As root, the server runs as
the `postgres` user (initdb refuses to run as root). Also a pytest fixture: `postgres_server`
(one server per test module).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from . import free_port


def postgres_bin_dir() -> Path | None:
    """The newest Debian PostgreSQL server's bin dir, or the one `pg_ctl` on PATH lives in."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit()
                   else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


class PostgresServer:
    """One PostgreSQL cluster (initdb'd on first start) owned by the test that made it."""

    def __init__(self, data_dir: str | Path | None = None, port: int | None = None,
                 settings: dict[str, str] | None = None, startup_timeout: float = 60.0) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL server binaries not found: `make system-deps` installs "
                               "Debian's postgresql package")
        self.bin_dir = bin_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-pg-")
            data_dir = Path(self._tmp.name) / "pgdata"
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.settings = {"wal_level": "logical", "max_replication_slots": "10",
                         "max_wal_senders": "10", "fsync": "off", "synchronous_commit": "on",
                         "full_page_writes": "off", "max_connections": "100",
                         **(settings or {})}
        self.startup_timeout = startup_timeout
        self.user = "postgres"
        self.host = "127.0.0.1"
        self._as_root = os.geteuid() == 0
        self.proc: subprocess.Popen[bytes] | None = None

    # -- process control -------------------------------------------------------------------------

    def _run(self, *args: str, check: bool = True,
             timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        cmd = [str(a) for a in args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=timeout)

    def _initdb(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            # The parent is a root-owned temp dir: let the postgres user create and own its cluster.
            os.chmod(self.data_dir.parent, 0o777)
        self._run(str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-A", "trust", "-U", self.user,
                  "-E", "UTF8", "--no-sync")

    def start(self) -> PostgresServer:
        """Run the postmaster as our own child (not daemonised by pg_ctl), so `kill()` can reap it."""
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        args = [str(self.bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                "-k", str(self.data_dir), "-c", f"listen_addresses={self.host}"]
        for k, v in self.settings.items():
            args += ["-c", f"{k}={v}"]
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         user="postgres" if self._as_root else None,
                                         start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited at start-up:\n{self.log_tail()}")
            r = subprocess.run([str(self.bin_dir / "pg_isready"), "-h", self.host, "-p", str(self.port),
                                "-U", self.user, "-q"], check=False)
            if r.returncode == 0:
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"PostgreSQL did not start in {self.startup_timeout} s:\n{self.log_tail()}")

    def stop(self, mode: str = "fast") -> None:
        """A clean shutdown (SIGINT = fast, SIGQUIT = immediate); no-op when not running."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGQUIT if mode == "immediate" else signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the postmaster (a crash). Its backends exit when they notice; `start()` then
        recovers from the WAL like after a power cut."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.kill()
        self.proc.wait(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self._backends_alive():
            time.sleep(0.1)

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def _backends_alive(self) -> bool:
        """Orphaned backends of a killed postmaster still hold its shared memory."""
        needle = str(self.data_dir).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes()
                state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            except OSError:
                continue
            if needle in cmd and state != "Z":
                return True
        return False

    # -- connection details ----------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq URL (psycopg, psycopg2)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    def jdbc_url(self, dbname: str = "postgres") -> str:
        """The same database as Kafka Connect's JDBC connectors name it."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """CREATE DATABASE `name` (a fresh one per test keeps tests apart); returns its DSN."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.stop("immediate")
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
