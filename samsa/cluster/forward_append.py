"""An internal topic that any broker of a cluster can write: appends to a partition led by
another broker are produced to that leader (acks=all), as Kafka's topic-based remote log metadata
manager writes `__remote_log_metadata` with a producer from whichever broker leads the user
partition. Appends to a partition led here stay local (InternalTopic.append)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from samsa.protocol.errors import Err
from samsa.protocol.records import encode_batch

from .channel import ChannelError, NodeChannel
from .internal_topic import InternalTopic, ReplicationError

PRODUCE, PRODUCE_VERSION = 0, 9
TIMEOUT_MS = 30_000


class ForwardingInternalTopic(InternalTopic):
    def __init__(self, *args: Any, node_id: int,
                 endpoint_of: Callable[[int], tuple[str, int] | None],
                 security: Callable[[], Any] = lambda: None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.node_id = node_id
        self.endpoint_of = endpoint_of  # a broker's inter-broker listener (host, port)
        self.security = security  # that listener's TLS / SASL (as the replica fetchers use)
        self._channels: dict[int, NodeChannel] = {}

    def _channel(self, leader: int) -> NodeChannel:
        ep = self.endpoint_of(leader)
        if ep is None:
            raise ReplicationError(Err.LEADER_NOT_AVAILABLE,
                                   f"{self.name}: no endpoint for broker {leader}")
        ch = self._channels.get(leader)
        if ch is None or (ch.host, ch.port) != ep:
            ch = self._channels[leader] = NodeChannel(
                ep[0], ep[1], client_id=f"samsa-internal-{self.name}-{self.node_id}",
                timeout_s=TIMEOUT_MS / 1000 + 5, security=self.security())
        return ch

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> int:
        await self.ensure()
        if self._leader_log(partition) is not None or transactional:
            return await super().append(partition, records, producer_id, producer_epoch,
                                        transactional)
        t = self.controller.image.topics.get(self.name)
        st = None if t is None else t.partitions.get(partition)
        if st is None or st.leader < 0:
            raise ReplicationError(Err.LEADER_NOT_AVAILABLE,
                                   f"{self.name}-{partition} has no leader")
        if st.leader == self.node_id:  # led here, log not open yet: the caller retries
            raise ReplicationError(Err.NOT_LEADER_OR_FOLLOWER,
                                   f"{self.name}-{partition} is not open here yet")
        now = int(time.time() * 1000)
        batch = encode_batch([(k, v, [], now) for k, v in records])
        body = {"transactional_id": None, "acks": -1,
                "timeout": datetime.timedelta(milliseconds=TIMEOUT_MS),
                "topic_data": [{"name": self.name, "partition_data": [
                    {"index": partition, "records": batch}]}]}
        try:
            resp = await self._channel(st.leader).request(PRODUCE, PRODUCE_VERSION, body)
        except ChannelError as e:
            raise ReplicationError(Err.REQUEST_TIMED_OUT,
                                   f"{self.name}-{partition}: forwarding to broker "
                                   f"{st.leader} failed: {e}") from e
        for rt in resp.responses:
            for p in rt.partition_responses:
                if p.index != partition:
                    continue
                if p.error_code:
                    raise ReplicationError(p.error_code, f"{self.name}-{partition}: broker "
                                           f"{st.leader} answered {Err.name_of(p.error_code)}")
                return int(p.base_offset)
        raise ReplicationError(Err.UNKNOWN_SERVER_ERROR,
                               f"{self.name}-{partition}: no answer for the partition")

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()
