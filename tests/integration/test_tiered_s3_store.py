"""The S3 remote storage backend against moto's S3 server over real HTTP: copy, ranged fetch,
indexes, delete, listing, multipart uploads, the AWS credential chain, an unreachable endpoint,
error responses (retried with back-off, then surfaced as RemoteStorageError) and corrupted
objects."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.protocol.records import encode_batch
from samsa.storage.remote.rsm import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFound,
    RemoteStorageError,
    TopicIdPartition,
    create_rsm,
)
from samsa.storage.remote.s3_store import S3RemoteStorageManager, parse_key
from samsa.testing.s3 import MotoS3, S3FaultProxy, aws_env

BUCKET = "samsa-tiered"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    with MotoS3() as server, aws_env(server.env):
        server.create_bucket(BUCKET)
        yield server


def _rsm(endpoint: str, **extra: str) -> S3RemoteStorageManager:
    props = {"rsm.config.bucket": BUCKET, "rsm.config.endpoint.url": endpoint,
             "rsm.config.region": "us-east-1", "rsm.config.prefix": "tiered/",
             **{f"rsm.config.{k}": v for k, v in extra.items()}}
    rsm = create_rsm("s3", props)
    assert isinstance(rsm, S3RemoteStorageManager)
    return rsm


def _segment(tmp: Path, base: int, batches: int, value_size: int = 100) -> tuple[Path, bytes]:
    data = b"".join(
        encode_batch([(b"k%d" % i, bytes([i % 251]) * value_size, [], 1_700_000_000_000 + i)],
                     base_offset=base + i)
        for i in range(batches))
    p = tmp / f"{base:020d}.log"
    p.write_bytes(data)
    return p, data


def _meta(tp: TopicIdPartition, start: int, end: int, size: int) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(tp), start, end,
                                    1_700_000_000_000 + end, 1, 0, size, ((0, start),))


def _data(tmp: Path, log_path: Path, txn: bytes | None = None) -> LogSegmentData:
    (tmp / "x.index").write_bytes(b"\x00\x00\x00\x00\x00\x00\x00\x00")
    (tmp / "x.timeindex").write_bytes(b"\x00" * 12)
    return LogSegmentData(log_path, tmp / "x.index", tmp / "x.timeindex", txn, b'{"offset": 5}',
                          b"0\n1\n0 0\n")


def test_copy_fetch_list_delete(moto: MotoS3, tmp_path: Path) -> None:
    rsm = _rsm(moto.endpoint)
    tp = TopicIdPartition(uuid.uuid4(), "orders-v1.eu", 3)
    log_path, data = _segment(tmp_path, 0, 5)
    meta = _meta(tp, 0, 4, len(data))
    assert rsm.copy_log_segment_data(meta, _data(tmp_path, log_path)) is None

    assert rsm.fetch_log_segment(meta, 0) == data
    assert rsm.fetch_log_segment(meta, 10, 19) == data[10:20]  # end inclusive, as Kafka's
    assert rsm.fetch_log_segment(meta, len(data) - 3) == data[-3:]
    assert rsm.fetch_log_segment(meta, len(data)) == b""  # past the end: nothing, not an error
    assert rsm.fetch_index(meta, IndexType.OFFSET) == b"\x00" * 8
    assert rsm.fetch_index(meta, IndexType.TIMESTAMP) == b"\x00" * 12
    assert rsm.fetch_index(meta, IndexType.LEADER_EPOCH) == b"0\n1\n0 0\n"
    assert rsm.fetch_index(meta, IndexType.PRODUCER_SNAPSHOT) == b'{"offset": 5}'
    with pytest.raises(RemoteResourceNotFound):  # no aborted transactions: no txn index
        rsm.fetch_index(meta, IndexType.TRANSACTION)

    keys = moto.keys(BUCKET, "tiered/")
    assert len(keys) == 5 and all(k.startswith(f"tiered/orders-v1.eu-3-{tp.topic_id}/") for k in keys)
    listed = list(rsm.list_segments(tp))
    assert [o.segment_id for o in listed] == [meta.segment_id]
    assert sorted(listed[0].files) == keys and listed[0].size >= len(data)
    assert meta.segment_id in {o.segment_id for o in rsm.list_segments()}

    rsm.delete_log_segment_data(meta)
    assert moto.keys(BUCKET, "tiered/") == []
    rsm.delete_log_segment_data(meta)  # already gone: not an error
    with pytest.raises(RemoteResourceNotFound):
        rsm.fetch_log_segment(meta, 0)
    rsm.close()


def test_key_parsing_round_trips() -> None:
    tp = TopicIdPartition(uuid.uuid4(), "a-b-7", 12)
    sid = RemoteLogSegmentId.generate(tp)
    meta = RemoteLogSegmentMetadata(sid, 1234, 2000, 0, 1, 0, 10, ())
    from samsa.storage.remote.s3_store import object_name
    for ext in ("log", "index", "leader-epoch-checkpoint"):
        assert parse_key(object_name(meta, ext)) == (sid, ext)
    assert parse_key("a-1-notauuid/0-x.log") is None
    assert parse_key("unrelated.txt") is None


def test_large_segment_uploads_in_parts(moto: MotoS3, tmp_path: Path) -> None:
    rsm = _rsm(moto.endpoint, **{"multipart.threshold.bytes": str(5 << 20),
                                 "multipart.part.size.bytes": str(5 << 20)})
    tp = TopicIdPartition(uuid.uuid4(), "big", 0)
    log_path, data = _segment(tmp_path, 100, 120, value_size=100_000)  # ~12 MiB
    meta = _meta(tp, 100, 219, len(data))
    rsm.copy_log_segment_data(meta, _data(tmp_path, log_path))
    head = moto.client().head_object(Bucket=BUCKET, Key=rsm._key(meta, "log"))
    assert head["ETag"].strip('"').endswith("-3")  # a multipart object of 3 parts
    assert head["ContentLength"] == len(data)
    assert rsm.fetch_log_segment(meta, 6 << 20, (6 << 20) + 99) == data[6 << 20:(6 << 20) + 100]
    assert rsm.fetch_log_segment(meta, 0) == data
    rsm.delete_log_segment_data(meta)


def test_credentials_come_from_the_aws_chain(moto: MotoS3, tmp_path: Path) -> None:
    """No key in the config: botocore signs with what the chain finds (here a shared
    credentials file named by AWS_SHARED_CREDENTIALS_FILE with a named profile)."""
    creds = tmp_path / "credentials"
    creds.write_text("[tiering]\naws_access_key_id = PROFILEKEY123\n"
                     "aws_secret_access_key = profile-secret\n")
    with S3FaultProxy(moto.endpoint) as proxy, aws_env({"AWS_SHARED_CREDENTIALS_FILE": str(creds)}):
        rsm = _rsm(proxy.endpoint, profile="tiering")
        tp = TopicIdPartition(uuid.uuid4(), "creds", 0)
        log_path, data = _segment(tmp_path, 0, 2)
        meta = _meta(tp, 0, 1, len(data))
        rsm.copy_log_segment_data(meta, _data(tmp_path, log_path))
        rsm.delete_log_segment_data(meta)
    auths = [a for _m, _p, a in proxy.requests]
    assert auths and all("Credential=PROFILEKEY123/" in a for a in auths)
    # and the default chain reads the environment when no profile is named
    with S3FaultProxy(moto.endpoint) as proxy:
        rsm = _rsm(proxy.endpoint)
        with pytest.raises(RemoteResourceNotFound):
            rsm.fetch_index(meta, IndexType.OFFSET)
    assert proxy.requests and "Credential=samsa-test-key/" in proxy.requests[0][2]
    # static keys in the config take precedence over the chain
    with S3FaultProxy(moto.endpoint) as proxy:
        rsm = _rsm(proxy.endpoint, **{"aws.access.key.id": "STATICKEY9",
                                      "aws.secret.access.key": "static-secret"})
        with pytest.raises(RemoteResourceNotFound):
            rsm.fetch_index(meta, IndexType.OFFSET)
    assert proxy.requests and "Credential=STATICKEY9/" in proxy.requests[0][2]
    with pytest.raises(ValueError, match="go together"):
        _rsm(moto.endpoint, **{"aws.access.key.id": "only-the-id"})


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def test_unreachable_endpoint_fails_every_call(tmp_path: Path) -> None:
    rsm = _rsm(f"http://127.0.0.1:{_closed_port()}", **{"retry.max.attempts": "2",
                                                         "connect.timeout.ms": "500"})
    tp = TopicIdPartition(uuid.uuid4(), "down", 0)
    log_path, data = _segment(tmp_path, 0, 2)
    meta = _meta(tp, 0, 1, len(data))
    with pytest.raises(RemoteStorageError, match="Could not connect"):
        rsm.copy_log_segment_data(meta, _data(tmp_path, log_path))
    with pytest.raises(RemoteStorageError) as e:
        rsm.fetch_log_segment(meta, 0)
    assert not isinstance(e.value, RemoteResourceNotFound)
    with pytest.raises(RemoteStorageError):
        rsm.fetch_index(meta, IndexType.OFFSET)
    with pytest.raises(RemoteStorageError):
        rsm.delete_log_segment_data(meta)
    with pytest.raises(RemoteStorageError):
        list(rsm.list_segments())


def test_throttling_is_retried_with_backoff(moto: MotoS3, tmp_path: Path) -> None:
    with S3FaultProxy(moto.endpoint) as proxy:
        rsm = _rsm(proxy.endpoint, **{"retry.max.attempts": "4"})
        tp = TopicIdPartition(uuid.uuid4(), "flaky", 0)
        log_path, data = _segment(tmp_path, 0, 3)
        meta = _meta(tp, 0, 2, len(data))
        proxy.fail(2)  # two 503 SlowDown, then the real server
        rsm.copy_log_segment_data(meta, _data(tmp_path, log_path))
        first_put = [r for r in proxy.requests if r[0] == "PUT"][:3]
        assert len({p for _m, p, _a in first_put}) == 1  # the same object, tried 3 times
        proxy.fail(2, 500, "InternalError")
        assert rsm.fetch_log_segment(meta, 0) == data
        # failing on every attempt: the error surfaces after retry.max.attempts requests
        before = len(proxy.requests)
        proxy.fail(100)
        with pytest.raises(RemoteStorageError, match="SlowDown"):
            rsm.fetch_log_segment(meta, 0)
        assert len(proxy.requests) - before == 4
        proxy.fail(0)
        rsm.delete_log_segment_data(meta)


def test_error_responses_surface_as_remote_storage_errors(moto: MotoS3, tmp_path: Path) -> None:
    with S3FaultProxy(moto.endpoint) as proxy:
        rsm = _rsm(proxy.endpoint, **{"retry.max.attempts": "3"})
        tp = TopicIdPartition(uuid.uuid4(), "denied", 0)
        log_path, data = _segment(tmp_path, 0, 2)
        meta = _meta(tp, 0, 1, len(data))
        proxy.fail(1, 403, "AccessDenied")  # not retriable: one request, then the error
        before = len(proxy.requests)
        with pytest.raises(RemoteStorageError, match="AccessDenied"):
            rsm.copy_log_segment_data(meta, _data(tmp_path, log_path))
        assert len(proxy.requests) - before == 1
    missing = _rsm(moto.endpoint, bucket="no-such-bucket-here")
    with pytest.raises(RemoteStorageError, match="NoSuchBucket"):
        missing.copy_log_segment_data(meta, _data(tmp_path, log_path))
    with pytest.raises(ValueError, match="bucket"):
        create_rsm("s3", {"rsm.config.endpoint.url": moto.endpoint})
    with pytest.raises(ValueError, match="multipart.part.size.bytes"):
        _rsm(moto.endpoint, **{"multipart.part.size.bytes": "lots"})


def test_corrupted_index_object_is_not_served(moto: MotoS3, tmp_path: Path) -> None:
    rsm = _rsm(moto.endpoint)
    tp = TopicIdPartition(uuid.uuid4(), "rot", 0)
    log_path, data = _segment(tmp_path, 0, 2)
    meta = _meta(tp, 0, 1, len(data))
    rsm.copy_log_segment_data(meta, _data(tmp_path, log_path))
    c = moto.client()
    key = rsm._key(meta, IndexType.LEADER_EPOCH.value)
    stored = c.head_object(Bucket=BUCKET, Key=key)["Metadata"]
    c.put_object(Bucket=BUCKET, Key=key, Body=b"0\n1\n7 0\n", Metadata=stored)  # bit rot
    with pytest.raises(RemoteStorageError, match="corrupted"):
        rsm.fetch_index(meta, IndexType.LEADER_EPOCH)
    assert rsm.fetch_index(meta, IndexType.OFFSET) == b"\x00" * 8  # the others are intact
    rsm.delete_log_segment_data(meta)

