"""A node-to-node connection reset under uvloop (the broker's loop): a write to a transport the
reset already closed, before the connection's reader has seen it, raises RuntimeError in uvloop.
NodeChannel must turn it into a ChannelError and reconnect (found by the fault proxy: a dropped
link resets connections, and replica fetchers and AlterPartition saw raw RuntimeErrors)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import uvloop

from samsa.cluster.channel import ChannelError, NodeChannel
from samsa.testing import SamsaBroker

API_VERSIONS_BODY = {"client_software_name": "t", "client_software_version": "1"}


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker() as b:
        yield b


def test_write_after_reset_is_a_channel_error(broker: SamsaBroker) -> None:
    async def go() -> None:
        ch = NodeChannel("127.0.0.1", broker.port, "reset-test", timeout_s=10)
        try:
            assert (await ch.request(18, 3, API_VERSIONS_BODY)).error_code == 0
            conn = ch._conn
            assert conn is not None
            conn.writer.transport.abort()  # as a reset does: the transport is gone ...
            await asyncio.sleep(0)  # ... and closed, while the read loop has not run yet
            with pytest.raises(ChannelError, match="connection lost"):
                await ch.request(18, 3, API_VERSIONS_BODY)
            # the channel reconnects for the next request
            assert (await ch.request(18, 3, API_VERSIONS_BODY)).error_code == 0
        finally:
            await ch.close()

    uvloop.run(asyncio.wait_for(go(), 30))
