"""The S3 remote storage backend (`remote.log.storage.manager.class.name=s3`), on boto3.

Configuration (`rsm.config.*` broker properties, prefix stripped):
- `bucket` (required), `prefix` (key prefix, default empty), `region` (else the AWS chain's
  region), `endpoint.url` (an S3-compatible service: MinIO, moto, Ceph; path-style addressing is
  then used unless `path.style.access=false`), `profile` (a named profile of the shared config).
- Credentials come from boto3's default chain: environment (`AWS_ACCESS_KEY_ID`, ...), the shared
  credentials/config files, web identity, container or instance metadata. Static keys
  (`aws.access.key.id`, `aws.secret.access.key`, optional `aws.session.token`) take precedence
  when set: for S3-compatible stores, or Spark executors whose environment has no chain.
- `multipart.threshold.bytes` (default 64 MiB): a segment log at least this large is uploaded in
  parts of `multipart.part.size.bytes` (default 16 MiB, S3's minimum 5 MiB) on
  `upload.concurrency` threads (default 4); a failed multipart upload is aborted.
- `retry.max.attempts` (default 5; botocore's "standard" mode: exponential back-off with jitter on
  throttling, 5xx and connection errors), `connect.timeout.ms` (default 5000),
  `read.timeout.ms` (default 30000): a dead endpoint fails a call in bounded time, never a hang.

Layout (the local-directory store's, under a key prefix):
`<prefix><topic>-<partition>-<topic id>/<start offset, 20 digits>-<segment id hex>.<ext>`
with ext log, index, timeindex, snapshot, txnindex, leader-epoch-checkpoint. The small files
(indexes, snapshot, epochs) carry their CRC32C in the object metadata and are checked when
fetched; the log's batches are checked by their own CRCs by the reader.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import crc32c

from .rsm import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteObject,
    RemoteResourceNotFound,
    RemoteStorageError,
    TopicIdPartition,
)

log = logging.getLogger("samsa.remote.s3")

MiB = 1024 * 1024
DEFAULTS = {
    "prefix": "",
    "multipart.threshold.bytes": str(64 * MiB),
    "multipart.part.size.bytes": str(16 * MiB),
    "upload.concurrency": "4",
    "retry.max.attempts": "5",
    "connect.timeout.ms": "5000",
    "read.timeout.ms": "30000",
}
MIN_PART = 5 * MiB
LOG_EXT = "log"
CRC_META = "samsa-crc32c"  # x-amz-meta-samsa-crc32c on the small files
_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
_ALL_EXTS = (LOG_EXT, *(t.value for t in IndexType))
_UUID_LEN = 36


def partition_dir(tp: TopicIdPartition) -> str:
    return f"{tp.topic}-{tp.partition}-{tp.topic_id}"


def object_name(meta: RemoteLogSegmentMetadata, ext: str) -> str:
    return f"{partition_dir(meta.tp)}/{meta.start_offset:020d}-{meta.id.hex}.{ext}"


def parse_key(rel: str) -> tuple[RemoteLogSegmentId, str] | None:
    """(segment id, ext) of a key below the prefix, or None for a key this backend did not write."""
    d, _, name = rel.partition("/")
    if not name or "/" in name or len(d) < _UUID_LEN + 4:
        return None
    try:
        topic_id = uuid.UUID(d[-_UUID_LEN:])
        topic, _, part = d[:-_UUID_LEN - 1].rpartition("-")
        stem, _, ext = name.partition(".")
        seg = uuid.UUID(stem[21:])
        if not topic or not part.isdigit() or ext not in _ALL_EXTS or not stem[:20].isdigit():
            return None
    except ValueError:
        return None
    return RemoteLogSegmentId(TopicIdPartition(topic_id, topic, int(part)), seg), ext


def _int(cfg: Mapping[str, str], key: str) -> int:
    try:
        v = int(cfg[key])
    except ValueError as e:
        raise ValueError(f"rsm.config.{key}: not an integer: {cfg[key]!r}") from e
    if v < 0:
        raise ValueError(f"rsm.config.{key}: must not be negative")
    return v


class S3RemoteStorageManager:
    """KIP-405 RemoteStorageManager on S3. Blocking; the client is thread-safe, so the remote log
    manager's copier and reader threads share one instance."""

    def __init__(self) -> None:
        self.bucket = ""
        self.prefix = ""
        self._client: Any = None
        self._transfer: Any = None

    # ---- setup ---------------------------------------------------------------------------------
    def configure(self, configs: Mapping[str, str]) -> None:
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        cfg = {**DEFAULTS, **{k: str(v) for k, v in configs.items()}}
        bucket = cfg.get("bucket", "").strip()
        if not bucket:
            raise ValueError("rsm.config.bucket is required by the S3 remote storage manager")
        self.bucket = bucket
        self.prefix = cfg["prefix"]
        endpoint = cfg.get("endpoint.url", "").strip() or None
        path_style = cfg.get("path.style.access", "true" if endpoint else "false").lower() == "true"
        part = max(MIN_PART, _int(cfg, "multipart.part.size.bytes"))
        concurrency = max(1, _int(cfg, "upload.concurrency"))
        botocfg = Config(
            retries={"total_max_attempts": max(1, _int(cfg, "retry.max.attempts")),
                     "mode": "standard"},
            connect_timeout=_int(cfg, "connect.timeout.ms") / 1000,
            read_timeout=_int(cfg, "read.timeout.ms") / 1000,
            max_pool_connections=max(10, concurrency * 2),
            s3={"addressing_style": "path" if path_style else "auto"},
        )
        keys = {"aws_access_key_id": cfg.get("aws.access.key.id") or None,
                "aws_secret_access_key": cfg.get("aws.secret.access.key") or None,
                "aws_session_token": cfg.get("aws.session.token") or None}
        if bool(keys["aws_access_key_id"]) != bool(keys["aws_secret_access_key"]):
            raise ValueError("rsm.config.aws.access.key.id and rsm.config.aws.secret.access.key "
                             "go together")
        session = boto3.session.Session(profile_name=cfg.get("profile") or None,
                                        **{k: v for k, v in keys.items() if v})
        self._client = session.client("s3", region_name=cfg.get("region") or None,
                                      endpoint_url=endpoint, config=botocfg)
        self._transfer = TransferConfig(
            multipart_threshold=max(MIN_PART, _int(cfg, "multipart.threshold.bytes")),
            multipart_chunksize=part, max_concurrency=concurrency, use_threads=concurrency > 1)
        log.info("S3 remote storage: bucket %s, prefix %r, endpoint %s", bucket, self.prefix,
                 endpoint or "AWS")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def _key(self, meta: RemoteLogSegmentMetadata, ext: str) -> str:
        return self.prefix + object_name(meta, ext)

    @contextmanager
    def _errors(self, what: str, key: str) -> Iterator[None]:
        """Every boto3/botocore failure becomes the interface's RemoteStorageError (a missing
        object RemoteResourceNotFound), naming the operation and the key."""
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except ClientError as e:
            err = e.response.get("Error", {})
            code = str(err.get("Code", ""))
            msg = f"S3 {what} s3://{self.bucket}/{key}: {code} {err.get('Message', '')}".rstrip()
            if code in _NOT_FOUND:
                raise RemoteResourceNotFound(msg) from e
            raise RemoteStorageError(msg) from e
        except (BotoCoreError, Boto3Error) as e:
            raise RemoteStorageError(f"S3 {what} s3://{self.bucket}/{key}: {e}") from e
        except OSError as e:  # the local file (a segment deleted meanwhile) or the socket
            raise RemoteStorageError(f"S3 {what} s3://{self.bucket}/{key}: {e}") from e

    # ---- copy ----------------------------------------------------------------------------------
    def _put_small(self, key: str, body: bytes) -> None:
        with self._errors("put", key):
            self._client.put_object(Bucket=self.bucket, Key=key, Body=body,
                                    Metadata={CRC_META: f"{crc32c.crc32c(body):08x}"})

    def copy_log_segment_data(self, meta: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        """Indexes first, the log last; every object is complete once its call returns (a part
        upload is invisible until completed, and aborted on failure)."""
        try:
            small: list[tuple[IndexType, bytes | None]] = [
                (IndexType.OFFSET, _read(data.offset_index)),
                (IndexType.TIMESTAMP, _read(data.time_index)),
                (IndexType.LEADER_EPOCH, _read(data.leader_epoch_index)),
                (IndexType.PRODUCER_SNAPSHOT, _read(data.producer_snapshot)),
                (IndexType.TRANSACTION, _read(data.transaction_index)),
            ]
        except OSError as e:
            raise RemoteStorageError(f"copy of segment {meta.id}: reading its files: {e}") from e
        for itype, body in small:
            if body is not None:
                self._put_small(self._key(meta, itype.value), body)
        key = self._key(meta, LOG_EXT)
        with self._errors("upload", key):
            self._client.upload_file(str(data.log_segment), self.bucket, key,
                                     Config=self._transfer)
        return None

    # ---- fetch ---------------------------------------------------------------------------------
    def fetch_log_segment(self, meta: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        if start_position < 0 or (end_position is not None and end_position < start_position):
            raise ValueError(f"bad byte range {start_position}..{end_position}")
        key = self._key(meta, LOG_EXT)
        rng = f"bytes={start_position}-" + ("" if end_position is None else str(end_position))
        from botocore.exceptions import ClientError

        try:
            with self._errors("get", key):
                resp = self._client.get_object(Bucket=self.bucket, Key=key, Range=rng)
                return resp["Body"].read()  # type: ignore[no-any-return]
        except RemoteStorageError as e:
            c = e.__cause__
            if isinstance(c, ClientError) and c.response.get("Error", {}).get("Code") == \
                    "InvalidRange":
                return b""  # the range starts at or past the end of the object
            raise

    def fetch_index(self, meta: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        key = self._key(meta, index_type.value)
        with self._errors("get", key):
            resp = self._client.get_object(Bucket=self.bucket, Key=key)
            body: bytes = resp["Body"].read()
        want = (resp.get("Metadata") or {}).get(CRC_META)
        if want is not None and f"{crc32c.crc32c(body):08x}" != want:
            raise RemoteStorageError(f"S3 get s3://{self.bucket}/{key}: corrupted object (CRC32C "
                                     f"{crc32c.crc32c(body):08x}, stored {want})")
        return body

    # ---- delete and list -----------------------------------------------------------------------
    def delete_log_segment_data(self, meta: RemoteLogSegmentMetadata) -> None:
        keys = [self._key(meta, ext) for ext in _ALL_EXTS]
        self._abort_uploads(self._key(meta, LOG_EXT))
        with self._errors("delete", keys[0]):
            resp = self._client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
        errors = [e for e in resp.get("Errors", ()) if e.get("Code") not in _NOT_FOUND]
        if errors:
            e = errors[0]
            raise RemoteStorageError(f"S3 delete s3://{self.bucket}/{e.get('Key')}: "
                                     f"{e.get('Code')} {e.get('Message', '')}")

    def _abort_uploads(self, key: str) -> None:
        """Abort multipart uploads of `key` that a killed broker left (they cost storage until
        aborted and are invisible to listings of objects)."""
        with self._errors("list uploads", key):
            resp = self._client.list_multipart_uploads(Bucket=self.bucket, Prefix=key)
            for up in resp.get("Uploads", ()):
                if up.get("Key") == key:
                    self._client.abort_multipart_upload(Bucket=self.bucket, Key=key,
                                                        UploadId=up["UploadId"])

    def list_segments(self, tp: TopicIdPartition | None = None) -> Iterable[RemoteObject]:
        where = self.prefix + (partition_dir(tp) + "/" if tp is not None else "")
        found: dict[RemoteLogSegmentId, tuple[int, int, list[str]]] = {}
        with self._errors("list", where):
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=where)
            for page in pages:
                for o in page.get("Contents", ()):
                    parsed = parse_key(o["Key"][len(self.prefix):])
                    if parsed is None:
                        continue
                    sid, _ext = parsed
                    size, mod, files = found.get(sid, (0, 0, []))
                    files.append(o["Key"])
                    found[sid] = (size + int(o["Size"]),
                                  max(mod, int(o["LastModified"].timestamp() * 1000)), files)
        return [RemoteObject(sid, size, mod, tuple(files))
                for sid, (size, mod, files) in found.items()]


def _read(p: Path | bytes | None) -> bytes | None:
    """A part's bytes, given as bytes or as a local file (a missing index file uploads as empty,
    as Kafka's copier sends an empty file for an index a segment never wrote)."""
    if p is None or isinstance(p, bytes | bytearray):
        return None if p is None else bytes(p)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return b""
