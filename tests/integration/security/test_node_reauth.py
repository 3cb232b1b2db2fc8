"""KIP-368 between nodes: a node's connection to another node whose listener limits SASL sessions
(connections.max.reauth.ms) re-authenticates in place, SaslHandshake + SaslAuthenticate on the
same connection before the session ends, as Kafka's nodes do, instead of moving to a new
connection. Driven with the node's own client (NodeChannel, what brokers use to reach the
controllers and each other) against a real broker whose listener gives 1.5 s sessions: requests
keep being answered for several sessions on one connection, the broker cuts nothing off."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from samsa.cluster.channel import NodeChannel
from samsa.cluster.node_security import NodeSecurity
from samsa.testing import SamsaBroker, free_port
from samsa.testing.secure_cluster import oauth_jaas, plain_jaas

pytestmark = [pytest.mark.timeout(120)]

REAUTH_MS = 1500
METADATA = 3


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[SamsaBroker, int]]:
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"REAUTH://127.0.0.1:{sasl},PLAINTEXT://127.0.0.1:{plain}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REAUTH:SASL_PLAINTEXT",
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.reauth.plain.sasl.jaas.config": plain_jaas("x", "x", {"node": "pw"}),
        "listener.name.reauth.oauthbearer.sasl.jaas.config": oauth_jaas("x"),
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
    }
    with SamsaBroker(port=plain, overrides=overrides) as b:
        yield b, sasl


async def _requests_over_sessions(port: int, sec: NodeSecurity) -> tuple[int, int]:
    """Metadata requests every 0.2 s for 3 sessions' time; (answered, connections used)."""
    ch = NodeChannel("127.0.0.1", port, "samsa-node-7", timeout_s=10, security=sec)
    connections: list[object] = []
    answered = 0
    try:
        for _ in range(int(3 * REAUTH_MS / 200)):  # bounded: 22 requests
            resp = await ch.request(METADATA, 9, {"topics": [], "allow_auto_topic_creation":
                                                  False})
            answered += len(resp.brokers) == 1  # this broker, as the answer names it
            if not connections or connections[-1] is not ch._conn:
                connections.append(ch._conn)
            await asyncio.sleep(0.2)
    finally:
        await ch.close()
    return answered, len(connections)


@pytest.mark.parametrize("mechanism", ["PLAIN", "OAUTHBEARER"])
def test_node_connection_reauthenticates_in_place(broker: tuple[SamsaBroker, int],
                                                  mechanism: str) -> None:
    b, port = broker
    sec = (NodeSecurity("REAUTH", "SASL_PLAINTEXT", None, True, "PLAIN", "node", "pw")
           if mechanism == "PLAIN" else
           NodeSecurity("REAUTH", "SASL_PLAINTEXT", None, True, "OAUTHBEARER", "node", "",
                        (("sub", "node"),)))
    answered, connections = asyncio.run(_requests_over_sessions(port, sec))
    assert answered == int(3 * REAUTH_MS / 200)
    assert connections == 1  # one connection through 3 sessions: re-authenticated on it
    assert "SASL session expired without re-authentication" not in b.log_text()
