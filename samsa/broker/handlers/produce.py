"""Produce: validate each partition's batch (header and CRC, then every record's structure in one
compiled pass, see samsa/protocol/recordcheck.py), append it verbatim (base offset patched), answer
according to acks. A rejected batch leaves the log and the producer state untouched."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.cluster.metadata.image import INTERNAL_TOPICS
from samsa.protocol import codecs
from samsa.protocol.batch import (
    ATTR_OFFSET,
    MAGIC_OFFSET,
    TRANSACTIONAL_BIT,
    InvalidBatch,
    recompress,
    validate_single_batch,
)
from samsa.protocol.errors import Err
from samsa.protocol.leader_hint import NodeEndpoint
from samsa.protocol.produce_response import encode_produce_response
from samsa.protocol.recordcheck import validate_records
from samsa.registry.validation import SchemaCheck
from samsa.registry.validation import checker as schema_checker
from samsa.security import authorizer as az
from samsa.storage.producer_state import ProducerStateError

from .leader_hints import LeaderHints

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext
    from samsa.storage.log import PartitionLog

# Kafka lets a request with this client id append to internal topics (AdminUtils.ADMIN_CLIENT_ID)
ADMIN_CLIENT_ID = "__admin_client"

_TOPIC_CODEC = {"uncompressed": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY,
                "lz4": codecs.LZ4, "zstd": codecs.ZSTD}


def _error(index: int, code: int, message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "record_errors": (), "error_message": message}


def _append_one(lg: PartitionLog, index: int, records: bytes | None,
                now_ms: int, schema_check: SchemaCheck | None = None,
                version: int = 11) -> dict[str, Any]:
    if records is None or len(records) == 0:
        return _error(index, Err.CORRUPT_MESSAGE, "empty record set")
    try:
        h = validate_single_batch(records)
    except InvalidBatch as e:
        return _error(index, e.code, str(e))
    if h.compression == codecs.ZSTD and version < 7:  # Kafka: zstd needs Produce v7+ (KIP-110)
        return _error(index, Err.UNSUPPORTED_COMPRESSION_TYPE,
                      f"Produce requests with version {version} are not allowed to use ZStandard "
                      "compression")
    cfg = lg.config
    if len(records) > cfg.max_message_bytes:
        return _error(index, Err.MESSAGE_TOO_LARGE,
                      f"The batch is {len(records)} bytes, larger than max.message.bytes "
                      f"{cfg.max_message_bytes}")
    try:  # records section: lengths, varints, counts (and, for compacted topics, keys)
        keyless = validate_records(records, h, max_message_bytes=cfg.max_message_bytes,
                                   want_keyless=cfg.compact)
    except InvalidBatch as e:
        return _error(index, e.code, str(e))
    if not cfg.log_append_time:
        if h.max_timestamp > now_ms + cfg.timestamp_after_max_ms or \
                h.base_timestamp < now_ms - cfg.timestamp_before_max_ms:
            return _error(index, Err.INVALID_TIMESTAMP,
                          "Timestamp of the batch is out of the range allowed by "
                          "message.timestamp.before.max.ms / message.timestamp.after.max.ms")
    if keyless:
        return _keyless_error(lg, index, keyless)
    # -- schema-validated topics (samsa/registry/validation.py) --
    if schema_check is not None and (bad := schema_check(records)) is not None:
        r = _error(index, Err.INVALID_RECORD, bad.message)
        r["record_errors"] = bad.record_errors
        return r
    # -- end schema validation --
    target = _TOPIC_CODEC.get(cfg.compression_type)
    data = bytearray(records)
    if target is not None and target != h.compression:
        data = recompress(data, target)
    try:
        base, append_time = lg.append(data, now_ms, lg.leader_epoch)
    except ProducerStateError as e:
        return _error(index, e.code, str(e))
    return {"index": index, "error_code": 0, "base_offset": base,
            "log_append_time": append_time, "log_start_offset": lg.log_start_offset,
            "record_errors": (), "error_message": None}


def _keyless_error(lg: PartitionLog, index: int, keyless: list[int]) -> dict[str, Any]:
    """Kafka's answer (LogValidator.validateKey): INVALID_RECORD with one record error per keyless
    record and a message listing the first three."""
    errors = [(i, "Compacted topic cannot accept message without key in topic partition "
                  f"{lg.topic}-{lg.partition}") for i in keyless]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    r = _error(index, Err.INVALID_RECORD,
               f"One or more records have been rejected due to {len(errors)} record errors in total, "
               f"and only showing the first three errors at most: [{shown}]")
    r["record_errors"] = tuple({"batch_index": i, "batch_index_error_message": m} for i, m in errors)
    return r


def produce(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    acks = req.acks
    now_ms = int(time.time() * 1000)
    responses = []
    to_flush: list[PartitionLog] = []
    to_replicate: list[tuple[PartitionLog, int, dict[str, Any]]] = []
    hints: LeaderHints | None = None
    denied = _denied(ctx, req)  # ACLs (issue 17): None, or the code every partition gets
    for td in req.topic_data:
        parts = []
        topic_denied = denied or (Err.TOPIC_AUTHORIZATION_FAILED if authz.enabled(ctx)
                                  and not authz.topic(ctx, az.OP_WRITE, td.name) else 0)
        for pd in td.partition_data:
            if topic_denied:
                parts.append(_error(pd.index, topic_denied))
                continue
            if acks not in (0, 1, -1):
                parts.append(_error(pd.index, Err.INVALID_REQUIRED_ACKS))
                continue
            lg = broker.partition_log(td.name, pd.index)
            if lg is None:
                code = broker.partition_error(td.name, pd.index)
                parts.append(_error(pd.index, code))
                if code == Err.NOT_LEADER_OR_FOLLOWER and ctx.version >= 10:  # KIP-951
                    hints = hints or LeaderHints(broker, ctx)
                    parts[-1]["current_leader"] = hints.current_leader(td.name, pd.index)
                continue
            if td.name in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
                # Kafka's ReplicaManager: only the coordinators write their internal topics
                parts.append(_error(pd.index, Err.INVALID_TOPIC_EXCEPTION,
                                    f"Cannot append to internal topic {td.name}"))
                continue
            if acks == -1 and (code := broker.replicas.min_isr_error(td.name, pd.index)):
                parts.append(_error(pd.index, code, _NOT_ENOUGH.get(code)))
                continue
            r = _append_one(lg, pd.index, pd.records, now_ms, schema_checker(broker, td.name),
                            ctx.version)
            if r["error_code"] == 0:  # ops-metrics: once per partition batch
                broker.metrics.produced(td.name, pd.records)
            else:
                broker.metrics.produce_failed(td.name, len(pd.records or b""))
            if r["error_code"] == 0:
                if lg.flush_due:
                    to_flush.append(lg)
                if acks == -1 and lg.high_watermark < lg.end_offset:
                    to_replicate.append((lg, lg.end_offset, r))
            parts.append(r)
        responses.append({"name": td.name, "partition_responses": parts})
    endpoints = hints.node_endpoints() or [] if hints is not None else None
    if to_flush or to_replicate:
        return _complete_then(broker, to_flush, to_replicate, req.timeout.total_seconds(), ctx,
                              responses, acks, endpoints)
    return None if acks == 0 else encode_produce_response(ctx.version, ctx.correlation_id,
                                                          responses, endpoints, ctx.throttle_ms)


def _denied(ctx: RequestContext, req: Any) -> int:
    """A transactional produce needs WRITE on its transactional id (Kafka: every partition gets
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Transactional batches in a request without a
    transactional id are refused the same way, as Kafka refuses them (with or without an
    authorizer): else a principal without any transactional id could open a transaction no
    coordinator knows, which holds the partition's last stable offset forever. One attributes
    byte per partition, no per-record work."""
    tid = getattr(req, "transactional_id", None)
    if tid is None:
        if _has_transactional_batch(req):
            return Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return 0
    if authz.enabled(ctx) and not authz.txn_id(ctx, az.OP_WRITE, tid):
        return Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return 0


def _has_transactional_batch(req: Any) -> bool:
    """Whether a partition's batch (one per partition, magic 2) has the transactional bit."""
    for td in req.topic_data:
        for pd in td.partition_data:
            r = pd.records
            if r is not None and len(r) > ATTR_OFFSET + 1 and r[MAGIC_OFFSET] == 2 and \
                    r[ATTR_OFFSET + 1] & TRANSACTIONAL_BIT:
                return True
    return False


_NOT_ENOUGH: dict[int, str] = {Err.NOT_ENOUGH_REPLICAS: "The size of the current ISR is smaller than "
               "min.insync.replicas for this partition"}


async def _complete_then(broker: Broker, logs: list[PartitionLog],
                         replicate: list[tuple[PartitionLog, int, dict[str, Any]]],
                         timeout_s: float, ctx: RequestContext,
                         responses: list[dict[str, Any]], acks: int,
                         endpoints: list[NodeEndpoint] | None) -> list[bytes] | None:
    """Flush what the flush policy asks for, then (acks=all) wait until the high watermark has
    passed each partition's append (Kafka's DelayedProduce): a partition that times out or
    whose ISR fell below min.insync.replicas gets that error instead of its offset."""
    for lg in logs:
        await lg.flush()
    if replicate:
        ctx.park()  # waiting on followers' fetches now, not on this broker's work
        codes = await asyncio.gather(*(broker.replicas.wait_replicated(lg, end, timeout_s)
                                       for lg, end, _ in replicate))
        hints: LeaderHints | None = None
        for (lg, _, r), code in zip(replicate, codes, strict=True):
            if code:
                r.update(_error(r["index"], code))
                if code == Err.NOT_LEADER_OR_FOLLOWER and ctx.version >= 10:
                    # leadership moved during the wait: say where it went (KIP-951)
                    hints = hints or LeaderHints(broker, ctx)
                    r["current_leader"] = hints.current_leader(lg.topic, lg.partition)
        if hints is not None:
            endpoints = sorted({*(endpoints or []), *(hints.node_endpoints() or [])})
    return None if acks == 0 else encode_produce_response(ctx.version, ctx.correlation_id,
                                                          responses, endpoints, ctx.throttle_ms)
