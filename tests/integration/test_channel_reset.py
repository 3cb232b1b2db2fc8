"""A node-to-node connection reset under uvloop (the broker's loop): a write to a transport the
reset already closed, before the connection's reader has seen it, raises RuntimeError in uvloop.
NodeChannel must turn it into a ChannelError and reconnect (found by the fault proxy: a dropped
link resets connections, and replica fetchers and AlterPartition saw raw RuntimeErrors)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path

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


def test_quorum_driver_write_after_reset_closes_the_link(tmp_path: Path) -> None:
    """The same for the quorum driver's outgoing link: writing a frame to a transport a reset
    closed closes the link (its reader then fails what was in flight) instead of raising out of
    the connecting task, which skipped failing the queued requests."""
    from samsa.cluster.quorum.config import QuorumConfig, VoterEndpoint
    from samsa.cluster.quorum.driver import QuorumDriver, _Link

    async def go() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        voters = {1: VoterEndpoint(1, "127.0.0.1", 1), 2: VoterEndpoint(2, "127.0.0.1", port)}
        driver = QuorumDriver(1, voters, tmp_path, QuorumConfig(), "reset-test",
                              on_commit=lambda batch: None, on_snapshot=lambda sid, data: None,
                              take_snapshot=lambda: b"")
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        link = _Link()
        link.writer = writer
        writer.transport.abort()
        await asyncio.sleep(0)
        frame = struct.pack(">hhi", 52, 2, 7) + b"\x00" * 8  # api key, version, correlation id
        driver._write(2, link, writer, frame)  # no RuntimeError
        assert writer.is_closing()
        for handle in driver._timers:
            handle.cancel()
        server.close()
        await server.wait_closed()

    uvloop.run(asyncio.wait_for(go(), 30))
