"""kcat (librdkafka's CLI, Debian package) against Samsa: -L, -P, -C."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from samsa.testing import SamsaBroker

pytestmark = [pytest.mark.timeout(120)]


def kcat(bs: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed: `make system-deps` installs it (Debian package kcat)"
    return subprocess.run([exe, "-b", bs, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_kcat_metadata_produce_consume(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    lines = "".join(f"k{i}:value {i}\n" for i in range(500))
    r = kcat(bs, "-P", "-t", "kcat-topic", "-K:", "-z", "lz4", "-H", "origin=kcat", stdin=lines)
    assert r.returncode == 0, r.stderr
    meta = kcat(bs, "-L", "-t", "kcat-topic")
    assert meta.returncode == 0, meta.stderr
    assert "1 brokers:" in meta.stdout and 'topic "kcat-topic" with 1 partitions' in meta.stdout
    out = kcat(bs, "-C", "-t", "kcat-topic", "-e", "-o", "beginning", "-f", "%k|%s|%o|%h\n")
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows == [f"k{i}|value {i}|{i}|origin=kcat" for i in range(500)]
    tail = kcat(bs, "-C", "-t", "kcat-topic", "-e", "-o", "-3", "-f", "%o\n")
    assert tail.stdout.split() == ["497", "498", "499"]


def test_kcat_json_envelope_and_partition(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    r = kcat(bs, "-P", "-t", "kcat-json", "-p", "0", stdin="a\nb\n")
    assert r.returncode == 0, r.stderr
    out = kcat(bs, "-C", "-t", "kcat-json", "-e", "-J")
    assert '"payload":"a"' in out.stdout and '"payload":"b"' in out.stdout
