"""meta.properties: Kafka's format, Kafka Uuids, and the start-up checks on log directories."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from samsa.cluster import meta_properties as mp

CLUSTER = "XcZZOzUqS4yHOjhMQB6JLQ"


def test_random_uuid_is_kafka_format() -> None:
    ids = {mp.random_uuid() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16
        mp.parse_uuid(text)


@pytest.mark.parametrize("text,why", [
    ("invalid", "decoded as 5 bytes, which is not equal to the expected 16 bytes"),
    ("26c36907-4158-4a35-919d-6534229f5241", "is too long to be decoded as a base64 UUID"),
    (CLUSTER + "==", "not the 22-character form"),
    ("XcZZOzUqS4yHOjhMQB6JL!", "not URL-safe base64"),
    ("XcZZOzUqS4yHOjhMQB6JLR", "not the 22-character form"),  # stray low bits
])
def test_parse_uuid_refuses(text: str, why: str) -> None:
    with pytest.raises(mp.MetaPropertiesError, match=why):
        mp.parse_uuid(text)


def test_write_read_round_trip(tmp_path: Path) -> None:
    d = tmp_path / "a" / "b"
    meta = mp.MetaProperties(CLUSTER, 3, mp.random_uuid())
    mp.write(d, meta)
    assert mp.read(d) == meta
    text = (d / "meta.properties").read_text()
    assert f"cluster.id={CLUSTER}\n" in text and "node.id=3\n" in text and "version=1\n" in text
    assert not (d / "meta.properties.tmp").exists()


def test_reads_kafkas_file(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Tue Nov 24 07:00:00 UTC 2026\nnode.id=2\nversion=1\ncluster.id=" + CLUSTER
        + "\ndirectory.id=PVP48-L1TtCTJ6tTOuK3uA\n")
    assert mp.read(tmp_path) == mp.MetaProperties(CLUSTER, 2, "PVP48-L1TtCTJ6tTOuK3uA")


@pytest.mark.parametrize("text,why", [
    ("version=0\nbroker.id=1\ncluster.id=x\n", "unsupported version '0'"),
    ("version=1\nnode.id=1\n", "no cluster.id"),
    ("version=1\ncluster.id=x\nnode.id=one\n", "node.id 'one' is not an integer"),
    ("version=1\ngarbage\n", "cannot parse line"),
])
def test_bad_files(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "meta.properties").write_text(text)
    with pytest.raises(mp.MetaPropertiesError, match=why):
        mp.read(tmp_path)


def test_check_unformatted(tmp_path: Path) -> None:
    with pytest.raises(mp.MetaPropertiesError) as e:
        mp.check_log_dirs([tmp_path / "a"], 1)
    assert str(e.value) == (f"No meta.properties found in {tmp_path / 'a'} (have you run "
                            f"`samsa storage format`?)")


def test_check_formatted_dirs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    mp.write(a, mp.MetaProperties(CLUSTER, 1, mp.random_uuid()))
    mp.write(b, mp.MetaProperties(CLUSTER, 1, mp.random_uuid()))
    assert mp.check_log_dirs([a, b], 1) == CLUSTER
    assert mp.check_log_dirs([a, b], 1, CLUSTER) == CLUSTER


def test_check_cluster_mismatch(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    other = mp.random_uuid()
    mp.write(a, mp.MetaProperties(CLUSTER, 1, mp.random_uuid()))
    mp.write(b, mp.MetaProperties(other, 1, mp.random_uuid()))
    with pytest.raises(mp.MetaPropertiesError, match=f"expected {CLUSTER}, but read {other}"):
        mp.check_log_dirs([a, b], 1)
    with pytest.raises(mp.MetaPropertiesError, match=f"expected {other}, but read {CLUSTER}"):
        mp.check_log_dirs([a], 1, other)


def test_check_node_mismatch(tmp_path: Path) -> None:
    mp.write(tmp_path, mp.MetaProperties(CLUSTER, 1, mp.random_uuid()))
    with pytest.raises(mp.MetaPropertiesError, match="Stored node id 1 .* does not match the "
                                                     "configured node.id 2"):
        mp.check_log_dirs([tmp_path], 2)


def test_check_duplicate_directory_id(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    dir_id = mp.random_uuid()
    mp.write(a, mp.MetaProperties(CLUSTER, 1, dir_id))
    mp.write(b, mp.MetaProperties(CLUSTER, 1, dir_id))
    with pytest.raises(mp.MetaPropertiesError, match=f"Duplicate directory.id {dir_id}"):
        mp.check_log_dirs([a, b], 1)


def test_new_empty_log_dir_is_adopted_but_not_one_with_data(tmp_path: Path) -> None:
    meta_dir, new, used = tmp_path / "m", tmp_path / "new", tmp_path / "used"
    mp.write(meta_dir, mp.MetaProperties(CLUSTER, 1, mp.random_uuid()))
    assert mp.check_log_dirs([new], 1, metadata_dir=meta_dir) == CLUSTER
    got = mp.read(new)
    assert got is not None and (got.cluster_id, got.node_id) == (CLUSTER, 1)
    (used / "orders-0").mkdir(parents=True)
    with pytest.raises(mp.MetaPropertiesError, match=f"No meta.properties found in {used}"):
        mp.check_log_dirs([used], 1, metadata_dir=meta_dir)


def test_format_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(mp.MetaPropertiesError, match="decoded as"):
        mp.format_dirs(dirs, "invalid", 1)
    assert not dirs[0].exists()
    mp.format_dirs(dirs, CLUSTER, 5)
    assert mp.check_log_dirs(dirs, 5) == CLUSTER
