"""The transaction coordinator's marker sender: COMMIT/ABORT markers go to the leader of each of
the transaction's partitions — written here for the ones this broker leads, sent as
WriteTxnMarkers (v1) over the inter-broker listener to the others — and are retried until every
partition has its marker (a leader may be briefly unavailable) or no longer exists."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from samsa.cluster.channel import ChannelError, ChannelPool
from samsa.cluster.metadata.image import MetadataImage
from samsa.protocol.errors import Err

log = logging.getLogger("samsa.txn.markers")

WRITE_TXN_MARKERS = 27
REQUEST_TIMEOUT_S = 5.0
BACKOFF_S, MAX_BACKOFF_S = 0.05, 1.0
TP = tuple[str, int]
# (producer id, epoch, commit?, partitions, coordinator epoch) -> error code per partition
LocalWriter = Callable[[int, int, bool, Iterable[TP], int], Awaitable[dict[TP, int]]]


class MarkerSender:
    def __init__(self, node_id: int, image: Callable[[], MetadataImage], listener: str,
                 write_local: LocalWriter, client_id: str = "samsa-txn-markers",
                 security: Any = None) -> None:
        """`security`: the inter-broker listener's TLS / SASL (cluster.node_security)."""
        self.node_id = node_id
        self.image = image
        self.listener = listener  # the inter-broker listener's name
        self.write_local = write_local
        # a pool of its own: the broker's pool keys node ids to their CONTROLLER endpoints
        self.channels = ChannelPool(client_id=f"{client_id}-{node_id}", security=security)

    async def write(self, producer_id: int, epoch: int, commit: bool, partitions: set[TP],
                    coordinator_epoch: int = 0) -> None:
        pending = set(partitions)
        backoff = BACKOFF_S
        warned = time.monotonic()
        while pending:
            image = self.image()
            by_leader: dict[int, list[TP]] = {}
            for tp in sorted(pending):
                t = image.topics.get(tp[0])
                st = t.partitions.get(tp[1]) if t is not None else None
                if st is None:
                    pending.discard(tp)  # deleted meanwhile: nothing to mark
                    continue
                by_leader.setdefault(st.leader, []).append(tp)
            jobs = []
            for leader, tps in by_leader.items():
                if leader == self.node_id:
                    jobs.append(self.write_local(producer_id, epoch, commit, tps,
                                                 coordinator_epoch))
                elif leader >= 0:
                    jobs.append(self._send(image, leader, producer_id, epoch, commit, tps,
                                           coordinator_epoch))
            for codes in await asyncio.gather(*jobs):
                for tp, code in codes.items():
                    if code in (0, Err.UNKNOWN_TOPIC_OR_PARTITION):
                        pending.discard(tp)
                    elif code == Err.TRANSACTION_COORDINATOR_FENCED:
                        # a newer coordinator has written this producer's markers: it completes
                        # the transaction, this one stops (Kafka's marker handler does the same)
                        log.warning("transaction markers of producer %d on %s: this coordinator "
                                    "(epoch %d) is fenced by a newer one", producer_id, tp,
                                    coordinator_epoch)
                        pending.discard(tp)
            if not pending:
                return
            if time.monotonic() - warned > 10:
                warned = time.monotonic()
                log.warning("transaction markers of producer %d still unwritten on %s; retrying",
                            producer_id, sorted(pending))
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _send(self, image: MetadataImage, leader: int, producer_id: int, epoch: int,
                    commit: bool, tps: list[TP], coordinator_epoch: int) -> dict[TP, int]:
        failed = dict.fromkeys(tps, int(Err.NOT_LEADER_OR_FOLLOWER))
        reg = image.brokers.get(leader)
        ep = None if reg is None else reg.endpoints.get(self.listener)
        if ep is None:
            return failed
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        body: dict[str, Any] = {"markers": [{
            "producer_id": producer_id, "producer_epoch": epoch, "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
        try:
            ch = self.channels.set_address(leader, ep[0], ep[1])
            resp = await ch.request(WRITE_TXN_MARKERS, 1, body, REQUEST_TIMEOUT_S)
        except ChannelError as e:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader, e)
            return failed
        codes = dict(failed)
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    if (t.name, p.partition_index) in codes:
                        codes[(t.name, p.partition_index)] = int(p.error_code)
        return codes

    async def close(self) -> None:
        await self.channels.close()
