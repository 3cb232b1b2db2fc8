"""`samsa schemas` against a registry: register, list, get, check, config, delete, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing import SamsaBroker
from samsa.testing.registry import InProcessRegistry

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def url(samsa_broker: SamsaBroker) -> Iterator[str]:
    with InProcessRegistry(samsa_broker.bootstrap) as r:
        yield r.url


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa.cli.main", "schemas", "--registry-url", url, *args],
                          capture_output=True, text=True, timeout=60)


def test_schemas_commands(url: str, tmp_path: Path) -> None:
    v1 = tmp_path / "user.avsc"
    v1.write_text(json.dumps({"type": "record", "name": "U", "fields": [{"name": "a", "type": "int"}]}))
    bad = tmp_path / "bad.avsc"
    bad.write_text(json.dumps({"type": "record", "name": "U", "fields": [{"name": "a", "type": "string"}]}))
    proto = tmp_path / "m.proto"
    proto.write_text('syntax = "proto3"; message M { string s = 1; }')
    r = cli(url, "register", "cli-value", str(v1))
    assert r.returncode == 0 and r.stdout.strip().isdigit(), r.stderr
    assert cli(url, "register", "cli-proto", str(proto)).returncode == 0
    assert "cli-value" in cli(url, "list").stdout.split()
    assert cli(url, "list", "cli-value").stdout.split() == ["1"]
    assert json.loads(cli(url, "get", "cli-value").stdout)["name"] == "U"
    chk = cli(url, "check", "cli-value", str(bad))
    assert chk.returncode == 1 and "incompatible" in chk.stdout and "TYPE_MISMATCH" in chk.stdout
    assert cli(url, "check", "cli-value", str(v1)).stdout.strip() == "compatible"
    reg = cli(url, "register", "cli-value", str(bad))
    assert reg.returncode == 1 and "incompatible" in reg.stderr and "error 409" in reg.stderr
    assert cli(url, "config", "cli-value", "--set", "none").stdout.strip() == "NONE"
    assert cli(url, "config", "cli-value").stdout.strip() == "NONE"
    assert cli(url, "register", "cli-value", str(bad)).returncode == 0
    assert "deleted cli-value versions 1, 2" in cli(url, "delete", "cli-value").stdout
    nf = cli(url, "get", "cli-value")
    assert nf.returncode == 1 and "not found" in nf.stderr and "40401" in nf.stderr
    down = cli("http://127.0.0.1:9", "list")
    assert down.returncode == 1 and "cannot reach the schema registry" in down.stderr
