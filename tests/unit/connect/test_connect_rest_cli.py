"""`samsa connect connectors ...` against a real REST listener over the in-memory herder: output,
the worker's message on errors (exit 1) and usage errors (exit 2)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from connect_rest_fixtures import SINK, SOURCE, MemoryHerder, make_plugins, serving

from samsa.cli.connect_client import add_connectors_parser, create_request
from samsa.connect.rest import ConnectRestApp
from samsa.connect.runtime.status import TargetState


def run_cli(url: str, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="samsa connect")
    add_connectors_parser(parser.add_subparsers(dest="connect_command", required=True))
    args = parser.parse_args(["connectors", *argv[:1], "--url", url, *argv[1:]] if argv else
                             ["connectors"])
    return int(args.func(args))


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryHerder, str]]:
    herder = MemoryHerder(make_plugins(tmp_path_factory.mktemp("cliplugins")))
    with serving(ConnectRestApp(herder)) as (server,):
        yield herder, server.url


@pytest.fixture
def fresh(worker: tuple[MemoryHerder, str]) -> Iterator[tuple[MemoryHerder, str]]:
    herder, url = worker
    herder.conns.clear()
    yield herder, url
    herder.conns.clear()


def test_create_from_properties_and_json(fresh: tuple[MemoryHerder, str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    herder, url = fresh
    props = tmp_path / "src.properties"
    props.write_text(f"# a source\nname=props-src\nconnector.class={SOURCE}\ntopic = t1\ntasks.max:2\n")
    assert run_cli(url, "create", str(props)) == 0
    assert "Created connector props-src (source)" in capsys.readouterr().out
    assert herder.conns["props-src"].config == {"name": "props-src", "connector.class": SOURCE,
                                                "topic": "t1", "tasks.max": "2"}

    js = tmp_path / "sink.json"
    js.write_text(json.dumps({"name": "json-sink", "config": {"connector.class": SINK, "file": "/x"}}))
    assert run_cli(url, "create", str(js), "--initial-state", "paused") == 0
    assert herder.conns["json-sink"].target is TargetState.PAUSED

    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"connector.class": SINK}))
    assert run_cli(url, "create", str(flat), "--name", "flat") == 0
    assert "flat" in herder.conns

    capsys.readouterr()
    assert run_cli(url, "list") == 0
    assert capsys.readouterr().out.split() == ["flat", "json-sink", "props-src"]
    assert run_cli(url, "list", "--expand", "status") == 0
    expanded = json.loads(capsys.readouterr().out)
    assert expanded["json-sink"]["status"]["connector"]["state"] == "PAUSED"


def test_errors_print_the_workers_message(fresh: tuple[MemoryHerder, str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _, url = fresh
    assert run_cli(url, "status", "ghost") == 1
    err = capsys.readouterr().err
    assert err.strip() == "samsa connect connectors status: error: Connector ghost not found"
    js = tmp_path / "c.json"
    js.write_text(json.dumps({"name": "dup", "config": {"connector.class": SINK}}))
    assert run_cli(url, "create", str(js)) == 0
    assert run_cli(url, "create", str(js)) == 1
    assert "Connector dup already exists" in capsys.readouterr().err
    assert run_cli("http://127.0.0.1:1", "list") == 1
    assert "cannot reach the Connect worker at http://127.0.0.1:1" in capsys.readouterr().err


def test_usage_errors_exit_2(fresh: tuple[MemoryHerder, str], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    _, url = fresh
    assert run_cli(url, "create", str(tmp_path / "missing.json")) == 2
    assert "cannot read" in capsys.readouterr().err
    nameless = tmp_path / "nameless.properties"
    nameless.write_text(f"connector.class={SINK}\n")
    assert run_cli(url, "create", str(nameless)) == 2
    assert "has no name" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        run_cli(url, "restart")  # no connector name
    assert e.value.code == 2
    assert run_cli(url, "restart", "x", "--task", "0", "--include-tasks") == 2


def test_lifecycle_status_config_offsets(fresh: tuple[MemoryHerder, str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    herder, url = fresh
    js = tmp_path / "c.json"
    js.write_text(json.dumps({"name": "c", "config": {"connector.class": SOURCE, "topic": "t",
                                                      "tasks.max": "2"}}))
    assert run_cli(url, "create", str(js)) == 0
    herder.conns["c"].failed_tasks.add(1)
    capsys.readouterr()
    assert run_cli(url, "status", "c") == 0
    out = capsys.readouterr().out
    assert "connector c (source): RUNNING" in out and "task 1: FAILED" in out and "Traceback: boom" in out

    assert run_cli(url, "restart", "c", "--include-tasks", "--only-failed") == 0
    assert "Restarting connector c: task 1" in capsys.readouterr().out
    assert run_cli(url, "restart", "c", "--task", "0") == 0
    assert run_cli(url, "pause", "c") == 0
    assert herder.conns["c"].target is TargetState.PAUSED
    assert run_cli(url, "resume", "c") == 0
    assert herder.conns["c"].target is TargetState.STARTED

    capsys.readouterr()
    assert run_cli(url, "config", "c") == 0
    assert "topic=t" in capsys.readouterr().out.splitlines()
    assert run_cli(url, "config", "c", "--set", "topic=t9", "--unset", "tasks.max") == 0
    assert herder.conns["c"].config["topic"] == "t9" and "tasks.max" not in herder.conns["c"].config

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"offsets": [{"partition": {"f": "a"}, "offset": {"pos": 3}}]}))
    assert run_cli(url, "offsets", "c", "--alter", str(offsets)) == 1  # not stopped
    assert "STOPPED" in capsys.readouterr().err
    assert run_cli(url, "stop", "c") == 0
    assert run_cli(url, "offsets", "c", "--alter", str(offsets)) == 0
    assert "altered successfully" in capsys.readouterr().out
    assert run_cli(url, "offsets", "c") == 0
    assert json.loads(capsys.readouterr().out) == json.loads(offsets.read_text())
    assert run_cli(url, "offsets", "c", "--reset") == 0
    assert herder.conns["c"].offsets == []
    assert run_cli(url, "delete", "c") == 0
    assert "c" not in herder.conns


def test_validate_and_plugins(fresh: tuple[MemoryHerder, str], tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    _, url = fresh
    bad = tmp_path / "bad.properties"
    bad.write_text(f"connector.class={SOURCE}\nbatch.size=0\n")
    assert run_cli(url, "validate", str(bad)) == 1
    out = capsys.readouterr().out
    assert "batch.size: " in out and f"{SOURCE}: 2 errors" in out
    good = tmp_path / "good.properties"
    good.write_text(f"connector.class={SOURCE}\ntopic=t\n")
    assert run_cli(url, "validate", str(good)) == 0

    capsys.readouterr()
    assert run_cli(url, "plugins") == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"{SOURCE}  source  1.2.3" in lines
    assert not any("RestTestConverter" in line for line in lines)
    assert run_cli(url, "plugins", "--all") == 0
    assert "resttestplugins.RestTestConverter  converter" in capsys.readouterr().out
    assert run_cli(url, "plugins", "--config", "RestTestSource") == 0
    assert "batch.size  INT  LOW  default '100'" in capsys.readouterr().out


def test_create_request_shapes() -> None:
    assert create_request({"name": "a", "config": {"x": "1"}}, None) == {"name": "a", "config": {"x": "1"}}
    assert create_request({"name": "a", "x": "1"}, None) == {"name": "a", "config": {"name": "a", "x": "1"}}
    assert create_request({"x": "1"}, "b") == {"name": "b", "config": {"x": "1"}}
