"""KIP-951 on the broker side: for a NOT_LEADER_OR_FOLLOWER partition, the current leader and
epoch from the image, and that leader's endpoint on the listener the request came in on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.protocol.leader_hint import NodeEndpoint

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext


class LeaderHints:
    def __init__(self, broker: Broker, ctx: RequestContext) -> None:
        self.broker = broker
        self.listener = getattr(ctx.conn, "listener_name", None) or broker.inter_broker_listener
        self.endpoints: dict[int, NodeEndpoint] = {}

    def current_leader(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader id, leader epoch), (-1, -1) if unknown; notes the leader's endpoint."""
        image = self.broker.node.image
        t = image.topics.get(topic)
        st = t.partitions.get(partition) if t is not None else None
        if st is None:
            return -1, -1
        reg = image.brokers.get(st.leader)
        ep = None if reg is None or reg.fenced else reg.endpoints.get(self.listener)
        if ep is not None:
            self.endpoints[st.leader] = (st.leader, ep[0], ep[1], reg.rack if reg else None)
        return st.leader, st.leader_epoch

    def node_endpoints(self) -> list[NodeEndpoint] | None:
        return sorted(self.endpoints.values()) or None
