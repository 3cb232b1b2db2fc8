"""Transaction APIs: InitProducerId (transactional), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, and the admin side: DescribeProducers, DescribeTransactions, ListTransactions."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.coordinator.routing import owner_error
from samsa.coordinator.txn.coordinator import PRODUCER_FENCED, TxnError
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

INVALID_PRODUCER_EPOCH = 47


def _fenced_code(code: int, version: int, first_version_with_fenced: int) -> int:
    """Older request versions do not know PRODUCER_FENCED: Kafka sends INVALID_PRODUCER_EPOCH."""
    if code == PRODUCER_FENCED and version < first_version_with_fenced:
        return INVALID_PRODUCER_EPOCH
    return code


def _ms(td: Any) -> int:
    return int(td.total_seconds() * 1000) if hasattr(td, "total_seconds") else int(td)


async def _txn_owner(broker: Broker, tid: str) -> int:
    """0 if this broker coordinates the transactional id, else NOT_COORDINATOR (or
    COORDINATOR_NOT_AVAILABLE)."""
    return await owner_error(broker.txn, tid)


_TXN_DENIED = Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _write_denied(ctx: RequestContext, tid: str) -> int:
    """ACLs (issue 17): the transaction APIs need WRITE on the transactional id."""
    return 0 if authz.txn_id(ctx, az.OP_WRITE, tid) else _TXN_DENIED


async def init_transactional(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    # Kafka's coordinator refuses the empty transactional id (after the WRITE check on it)
    if code := _write_denied(ctx, req.transactional_id) or \
            (Err.INVALID_REQUEST if req.transactional_id == "" else 0) or \
            await _txn_owner(broker, req.transactional_id):
        return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    try:
        pid, epoch = await broker.txn.init_producer_id(
            req.transactional_id, _ms(req.transaction_timeout),
            getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1))
    except TxnError as e:
        return {"throttle_time": 0, "error_code": _fenced_code(e.code, ctx.version, 4),
                "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch}


def _topic_results(result: dict[tuple[str, int], int], version: int) -> list[dict[str, Any]]:
    by: dict[str, list[dict[str, Any]]] = {}
    for (t, p), c in result.items():
        by.setdefault(t, []).append({"partition_index": p,
                                     "partition_error_code": _fenced_code(c, version, 2)})
    return [{"name": t, "results_by_partition": ps} for t, ps in by.items()]


async def add_partitions_to_txn(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.version >= 4:
        out = []
        for tx in req.transactions:
            parts = [(t.name, p) for t in tx.topics for p in t.partitions]
            if code := _write_denied(ctx, tx.transactional_id) or \
                    await _txn_owner(broker, tx.transactional_id):
                res = dict.fromkeys(parts, code)
            elif denied := _topics_denied(ctx, parts):
                res = denied
            else:
                res = await broker.txn.add_partitions(tx.transactional_id, tx.producer_id,
                                                      tx.producer_epoch, parts, tx.verify_only)
            out.append({"transactional_id": tx.transactional_id,
                        "topic_results": _topic_results(res, ctx.version)})
        return {"throttle_time": 0, "error_code": 0, "results_by_transaction": out}
    parts = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    # Kafka checks WRITE on the transactional id first (every partition gets
    # TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which a producer treats as fatal), then the topics
    if code := _write_denied(ctx, req.v3_and_below_transactional_id):
        return {"throttle_time": 0,
                "results_by_topic_v3_and_below": _topic_results(dict.fromkeys(parts, code),
                                                                ctx.version)}
    if denied := _topics_denied(ctx, parts):
        return {"throttle_time": 0,
                "results_by_topic_v3_and_below": _topic_results(denied, ctx.version)}
    if code := await _txn_owner(broker, req.v3_and_below_transactional_id):
        return {"throttle_time": 0,
                "results_by_topic_v3_and_below": _topic_results(dict.fromkeys(parts, code),
                                                                ctx.version)}
    res = await broker.txn.add_partitions(req.v3_and_below_transactional_id,
                                          req.v3_and_below_producer_id,
                                          req.v3_and_below_producer_epoch, parts)
    return {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(res, ctx.version)}


def _topics_denied(ctx: RequestContext,
                   parts: list[tuple[str, int]]) -> dict[tuple[str, int], int] | None:
    """AddPartitionsToTxn needs WRITE on every topic: if one is denied, Kafka answers
    TOPIC_AUTHORIZATION_FAILED for those and OPERATION_NOT_ATTEMPTED for the rest."""
    bad = {t for t, _ in parts if not authz.topic(ctx, az.OP_WRITE, t)}
    if not bad:
        return None
    return {(t, p): Err.TOPIC_AUTHORIZATION_FAILED if t in bad else Err.OPERATION_NOT_ATTEMPTED
            for t, p in parts}


async def add_offsets_to_txn(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if code := _write_denied(ctx, req.transactional_id) or (
            0 if authz.group(ctx, az.OP_READ, req.group_id)
            else Err.GROUP_AUTHORIZATION_FAILED) or \
            await _txn_owner(broker, req.transactional_id):
        return {"throttle_time": 0, "error_code": code}
    await broker.groups.topic.ensure()
    code = await broker.txn.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch,
                                        req.group_id)
    return {"throttle_time": 0, "error_code": _fenced_code(code, ctx.version, 2)}


async def end_txn(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if code := _write_denied(ctx, req.transactional_id) or \
            await _txn_owner(broker, req.transactional_id):
        return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    try:
        pid, epoch = await broker.txn.end_txn(req.transactional_id, req.producer_id,
                                              req.producer_epoch, req.committed)
    except TxnError as e:
        return {"throttle_time": 0, "error_code": _fenced_code(e.code, ctx.version, 2),
                "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch}


async def txn_offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    offsets = [(t.name, p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
               for t in req.topics for p in t.partitions]
    result: dict[tuple[str, int], int] | int
    # the group's coordinator answers TxnOffsetCommit; it checks the producer against the
    # transaction coordinator's state when that is this broker too (Kafka checks the epoch
    # against the producer state of the __consumer_offsets partition)
    # ACLs (issue 17): WRITE on the transactional id, READ on the group and on each topic
    code = _write_denied(ctx, req.transactional_id) or (
        0 if authz.group(ctx, az.OP_READ, req.group_id) else Err.GROUP_AUTHORIZATION_FAILED)
    # as Kafka: a denied transactional id or group is the answer for every partition
    denied = set() if code else \
        {t.name for t in req.topics if not authz.topic(ctx, az.OP_READ, t.name)}
    offsets = [o for o in offsets if o[0] not in denied]
    code = code or await owner_error(broker.groups, req.group_id)
    if code == 0 and broker.txn.topic.exists and \
            await owner_error(broker.txn, req.transactional_id) == 0:
        code = broker.txn.check_offsets_commit(req.transactional_id, req.producer_id,
                                               req.producer_epoch)
    if code != 0:
        result = _fenced_code(code, ctx.version, 3)
    else:
        result = await broker.groups.txn_commit(
            group_id=req.group_id, producer_id=req.producer_id,
            producer_epoch=req.producer_epoch, member_id=getattr(req, "member_id", ""),
            instance_id=getattr(req, "group_instance_id", None),
            generation=getattr(req, "generation_id", -1), offsets=offsets)
    topics = []
    for t in req.topics:
        topics.append({"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": Err.TOPIC_AUTHORIZATION_FAILED if t.name in denied
             else result if isinstance(result, int)
             else result[(t.name, p.partition_index)]} for p in t.partitions]})
    return {"throttle_time": 0, "topics": topics}


def describe_producers(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    for t in req.topics:
        parts = []
        denied = not authz.topic(ctx, az.OP_READ, t.name)  # ACLs (issue 17)
        for p in t.partition_indexes:
            lg = broker.partition_log(t.name, p)
            if denied:
                parts.append({"partition_index": p, "error_code": Err.TOPIC_AUTHORIZATION_FAILED,
                              "error_message": None, "active_producers": []})
                continue
            if lg is None:
                parts.append({"partition_index": p,
                              "error_code": broker.partition_error(t.name, p),
                              "error_message": None, "active_producers": []})
                continue
            parts.append({"partition_index": p, "error_code": 0, "error_message": None,
                          "active_producers": [
                              {"producer_id": e.producer_id, "producer_epoch": e.epoch,
                               "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                               "coordinator_epoch": e.coordinator_epoch,
                               "current_txn_start_offset": e.txn_first_offset}
                              for e in lg.producers.producers.values()]})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


async def describe_transactions(broker: Broker, ctx: RequestContext,
                                req: Any) -> dict[str, Any]:
    states = []
    for tid in req.transactional_ids:
        if code := (0 if authz.txn_id(ctx, az.OP_DESCRIBE, tid) else _TXN_DENIED) or \
                await _txn_owner(broker, tid):
            states.append({"error_code": code, "transactional_id": tid, "transaction_state": "",
                           "transaction_timeout": 0, "transaction_start_time": -1,
                           "producer_id": -1, "producer_epoch": -1, "topics": []})
        else:
            state = broker.txn.describe(tid)
            if authz.enabled(ctx):  # as Kafka: only the topics the principal may DESCRIBE
                state["topics"] = [t for t in state["topics"]
                                   if authz.topic(ctx, az.OP_DESCRIBE, t["topic"])]
            states.append(state)
    return {"throttle_time": 0, "transaction_states": states}


def list_transactions(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    states = set(req.state_filters or ())
    pids = set(req.producer_id_filters or ())
    min_ms = getattr(req, "duration_filter", -1)
    now = int(time.time() * 1000)
    known = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
             "CompleteAbort", "Dead", "PrepareEpochFence"}
    out = []
    for meta in broker.txn.txns.values():
        if states and meta.state.value not in states:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if min_ms is not None and min_ms >= 0 and (meta.start_ms < 0
                                                   or now - meta.start_ms < min_ms):
            continue
        if not authz.txn_id(ctx, az.OP_DESCRIBE, meta.transactional_id):
            continue  # ACLs (issue 17): only ids the principal may DESCRIBE
        out.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                    "transaction_state": meta.state.value})
    return {"throttle_time": 0, "error_code": 0,
            "unknown_state_filters": sorted(states - known), "transaction_states": out}
