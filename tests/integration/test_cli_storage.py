"""`samsa storage random-uuid|format|info` as a user runs them: messages and exit codes of
kafka-storage.sh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from samsa.cluster import meta_properties as mp


def storage(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAMSA_")}
    return subprocess.run([sys.executable, "-m", "samsa.cli.main", "storage", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def props(path: Path, **kv: str) -> str:
    path.write_text("".join(f"{k.replace('_', '.')}={v}\n" for k, v in kv.items()))
    return str(path)


def test_random_uuid() -> None:
    out = storage("random-uuid")
    assert out.returncode == 0
    text = out.stdout.strip()
    assert len(text) == 22
    mp.parse_uuid(text)
    assert storage("random-uuid").stdout.strip() != text


def test_format_then_info(tmp_path: Path) -> None:
    a, b, m = tmp_path / "a", tmp_path / "b", tmp_path / "meta"
    conf = props(tmp_path / "server.properties", node_id="3", log_dirs=f"{a},{b}",
                 metadata_log_dir=str(m))
    cluster = storage("random-uuid").stdout.strip()

    out = storage("format", "-t", cluster, "-c", conf)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"Formatting metadata directory {m}.",
                                       f"Formatting data directory {a}.",
                                       f"Formatting data directory {b}."]
    metas = [mp.read(d) for d in (a, b, m)]
    assert all(x is not None and (x.cluster_id, x.node_id, x.version) == (cluster, 3, 1)
               for x in metas)
    assert len({x.directory_id for x in metas if x is not None}) == 3  # one id per directory
    # no metadata records: the first active controller writes them
    assert sorted(p.name for p in m.iterdir()) == ["meta.properties"]

    again = storage("format", "--cluster-id", cluster, "--config", conf)
    assert again.returncode == 1
    assert again.stderr.strip() == (f"Log directory {m} is already formatted. Use "
                                    f"--ignore-formatted to ignore this directory and format the "
                                    f"others.")
    ignored = storage("format", "-t", cluster, "-c", conf, "--ignore-formatted")
    assert ignored.returncode == 0
    assert ignored.stdout.strip() == "All of the log directories are already formatted."

    info = storage("info", "-c", conf)
    assert info.returncode == 0, info.stdout
    assert f"Found log directories:\n  {m}\n  {a}\n  {b}\n" in info.stdout
    assert f"Found metadata: {{cluster.id={cluster}, directory.id=" in info.stdout

    # a disk added later: --ignore-formatted formats just that one
    c = tmp_path / "c"
    conf = props(tmp_path / "server.properties", node_id="3", log_dirs=f"{a},{b},{c}",
                 metadata_log_dir=str(m))
    info = storage("info", "-c", conf)
    assert info.returncode == 1
    assert f"Found problem:\n  {c} does not exist\n" in info.stdout
    added = storage("format", "-t", cluster, "-c", conf, "-g")
    assert added.returncode == 0 and added.stdout.strip() == f"Formatting data directory {c}."
    assert storage("info", "-c", conf).returncode == 0


def test_format_refusals(tmp_path: Path) -> None:
    d = tmp_path / "data"
    conf = props(tmp_path / "s.properties", node_id="1", log_dirs=str(d))
    bad = storage("format", "-t", "invalid", "-c", conf)
    assert bad.returncode == 1
    assert bad.stderr.strip() == ("Cluster ID string invalid does not appear to be a valid UUID: "
                                  "Input string `invalid` decoded as 5 bytes, which is not equal "
                                  "to the expected 16 bytes of a base64-encoded UUID")
    assert not d.exists()  # nothing written

    cluster = mp.random_uuid()
    not_voter = props(tmp_path / "v.properties", node_id="4", log_dirs=str(d),
                      controller_quorum_voters="1@127.0.0.1:9093",
                      listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")
    out = storage("format", "-t", cluster, "-c", not_voter)
    assert out.returncode == 1
    assert "the node id 4 must be included in the set of voters" in out.stderr
    no_ctrl_listener = props(tmp_path / "l.properties", node_id="1", log_dirs=str(d),
                             controller_quorum_voters="1@127.0.0.1:9093")
    out = storage("format", "-t", cluster, "-c", no_ctrl_listener)
    assert out.returncode == 1
    assert "controller.listener.names must contain at least one value appearing" in out.stderr
    out = storage("format", "-t", cluster, "-c", str(tmp_path / "missing.properties"))
    assert out.returncode == 1 and "Unable to read config file" in out.stderr
    standalone = props(tmp_path / "st.properties", node_id="1", log_dirs=str(d),
                       controller_quorum_voters="1@127.0.0.1:9093",
                       listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")
    out = storage("format", "-t", cluster, "-c", standalone, "--standalone")
    assert out.returncode == 1 and "--standalone with static voters" in out.stderr
    assert not d.exists()

    mp.write(d, mp.MetaProperties(mp.random_uuid(), 1, mp.random_uuid()))
    out = storage("format", "-t", cluster, "-c", conf, "--ignore-formatted")
    assert out.returncode == 1 and "is formatted for cluster" in out.stderr


def test_info_unformatted(tmp_path: Path) -> None:
    d = tmp_path / "data"
    d.mkdir()
    out = storage("info", "-c", props(tmp_path / "s.properties", log_dirs=str(d)))
    assert out.returncode == 1
    assert out.stdout == f"Found log directory:\n  {d}\n\nFound problem:\n  {d} is not formatted.\n\n"
