"""Progress of long CLI work (issue 18 item 4): `samsa produce` from a large file and
`samsa groups reset-offsets --execute` show a bar on a terminal and plain lines otherwise."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker

LINES = 20000


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    env.update(extra)
    return env


def _big_file(tmp_path: Path) -> Path:
    path = tmp_path / "big.txt"
    path.write_text("".join(f"line {i} {'x' * 40}\n" for i in range(LINES)))
    return path


def test_produce_from_a_file_prints_plain_progress_lines(samsa_broker: SamsaBroker,
                                                          tmp_path: Path) -> None:
    path = _big_file(tmp_path)
    with open(path, "rb") as stdin:
        r = subprocess.run([sys.executable, "-m", "samsa.cli.main", "produce", "progress-plain",
                            "--bootstrap-server", samsa_broker.bootstrap], stdin=stdin,
                           capture_output=True, env=_env(SAMSA_PROGRESS_INTERVAL="0"), timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("producing to progress-plain: ")]
    assert len(lines) >= LINES // 1024  # one per 1024 input lines, and the last state
    assert "\r" not in err
    assert "/" in lines[0] and "KiB" in lines[0] and "%" in lines[0]
    assert " 100% " in lines[-1] + " " and f"{LINES:,} acknowledged" in lines[-1]
    assert f"Produced {LINES} message(s)" in err


def test_produce_shows_a_bar_on_a_terminal(samsa_broker: SamsaBroker, tmp_path: Path) -> None:
    path = _big_file(tmp_path)
    master, slave = pty.openpty()
    try:
        with open(path, "rb") as stdin:
            proc = subprocess.Popen([sys.executable, "-m", "samsa.cli.main", "produce",
                                     "progress-tty", "--bootstrap-server",
                                     samsa_broker.bootstrap],
                                    stdin=stdin, stdout=subprocess.DEVNULL, stderr=slave,
                                    env=_env(COLUMNS="200"))  # a bar line fits whole
        os.close(slave)
        slave = -1
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(120) == 0
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    text = out.decode(errors="replace")
    assert "\rproducing to progress-tty [" in text
    assert "100%" in text and "#" * 24 in text
    assert f"Produced {LINES} message(s)" in text


def test_reset_offsets_reports_progress(samsa_broker: SamsaBroker) -> None:
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    admin.create_topics([NewTopic("progress-reset", 3, 1)])["progress-reset"].result(15)
    r = subprocess.run([sys.executable, "-m", "samsa.cli.main", "groups", "reset-offsets",
                        "progress-g", "--topic", "progress-reset", "--to-earliest",
                        "--execute", "--bootstrap-server", samsa_broker.bootstrap],
                       capture_output=True, env=_env(SAMSA_PROGRESS_INTERVAL="0"), timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "resetting offsets of progress-g: 3/3 partitions  100%" in err
