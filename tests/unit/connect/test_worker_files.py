"""Connector files given to `samsa connect standalone` (properties or Kafka 3.8's JSON forms) and
worker settings with Kafka's names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samsa.connect.errors import ConfigException
from samsa.connect.runtime.process import read_connector_file
from samsa.connect.runtime.status import TargetState
from samsa.connect.runtime.worker_config import WorkerConfig


def test_properties_file(tmp_path: Path) -> None:
    p = tmp_path / "c.properties"
    p.write_text("# a comment\nname=src\nconnector.class=FileStreamSource\ntopic=t\n")
    assert read_connector_file(str(p)) == ("src", {"name": "src", "connector.class":
                                                   "FileStreamSource", "topic": "t"}, None)


def test_json_with_name_config_and_initial_state(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"name": "src", "config": {"connector.class": "X", "tasks.max": 2},
                             "initial_state": "PAUSED"}))
    assert read_connector_file(str(p)) == ("src", {"connector.class": "X", "tasks.max": "2"},
                                           TargetState.PAUSED)


def test_bare_json_config(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"name": "s", "connector.class": "X"}))
    assert read_connector_file(str(p)) == ("s", {"name": "s", "connector.class": "X"}, None)


def test_worker_defaults_and_required_keys() -> None:
    cfg = WorkerConfig({"offset.storage.file.filename": "/tmp/x"}, distributed=False)
    assert cfg.get("offset.flush.interval.ms") == 60000
    assert cfg.get("key.converter") == "org.apache.kafka.connect.json.JsonConverter"
    assert cfg.rest_listener() == ("0.0.0.0", 8083)
    with pytest.raises(ConfigException, match="group.id"):
        WorkerConfig({}, distributed=True)
    d = WorkerConfig({"group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
                      "status.storage.topic": "s", "listeners": "http://127.0.0.1:9999"}, True)
    assert d.get("scheduled.rebalance.max.delay.ms") == 300000
    assert d.get("session.timeout.ms") == 10000
    assert d.rest_listener() == ("127.0.0.1", 9999)
    with pytest.raises(ConfigException):
        WorkerConfig({"offset.storage.file.filename": "x", "exactly.once.source.support": "on"},
                     False)
