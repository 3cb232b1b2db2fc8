"""WriteTxnMarkers (API 27): a transaction coordinator on another broker asks this one, the
leader of some of the transaction's partitions, to write its COMMIT/ABORT markers. Markers in
`__consumer_offsets` partitions also make the transaction's offsets visible (or drop them)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import Err
from samsa.protocol.records import CONTROL_ABORT, CONTROL_COMMIT

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext
    from samsa.storage.log import PartitionLog

OFFSETS_TOPIC = "__consumer_offsets"


async def write_local(broker: Broker, producer_id: int, epoch: int, commit: bool,
                      partitions: Iterable[tuple[str, int]],
                      coordinator_epoch: int = 0) -> dict[tuple[str, int], int]:
    """Append the marker to every partition this broker leads; the error code of each other one
    (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION)."""
    marker = CONTROL_COMMIT if commit else CONTROL_ABORT
    codes: dict[tuple[str, int], int] = {}
    flush = []
    written: list[tuple[tuple[str, int], PartitionLog, int]] = []
    offsets = False
    for tp in partitions:
        lg = broker.partition_log(*tp)
        if lg is None:
            codes[tp] = broker.partition_error(*tp)
            continue
        if lg.producers.coordinator_epoch_of(producer_id) > coordinator_epoch:
            # Kafka's ProducerAppendInfo.checkCoordinatorEpoch: a marker from a coordinator
            # older than the one whose marker this partition already has
            codes[tp] = Err.TRANSACTION_COORDINATOR_FENCED
            continue
        lg.append_marker(producer_id, epoch, marker, coordinator_epoch,
                         leader_epoch=lg.leader_epoch)
        codes[tp] = 0
        written.append((tp, lg, lg.end_offset))
        offsets = offsets or tp[0] == OFFSETS_TOPIC
        if lg.flush_due:
            flush.append(lg)
    if offsets:
        broker.groups.complete_txn(producer_id, commit)
    for lg in flush:
        await lg.flush()
    # as Kafka (acks=all): a marker counts once the ISR has it; otherwise the coordinator retries
    timeout_s = broker.config.get_int("replica.socket.timeout.ms") / 1000
    results = await asyncio.gather(*(broker.replicas.wait_replicated(lg, end, timeout_s)
                                     for _, lg, end in written))
    for (tp, _, _), code in zip(written, results, strict=True):
        if code and code != Err.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            codes[tp] = code
    return codes


async def write_txn_markers(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    out = []
    for m in req.markers:
        tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        codes = await write_local(broker, m.producer_id, m.producer_epoch,
                                  bool(m.transaction_result), tps, m.coordinator_epoch)
        out.append({"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p, "error_code": codes[(t.name, p)]}
                                            for p in t.partition_indexes]} for t in m.topics]})
    return {"markers": out}
