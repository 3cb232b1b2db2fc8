"""NodeChannel against a real broker: requests, forwarded raw frames, many in flight, a broker
killed (requests in flight fail with ChannelError) and started again (the channel reconnects)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from samsa.cluster.channel import ChannelError, ChannelPool, NodeChannel
from samsa.testing import SamsaBroker
from tests.wire import Wire


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker() as b:
        yield b


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def _metadata_body(*topics: str) -> dict[str, Any]:
    return {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False}


def test_requests_and_many_in_flight(broker: SamsaBroker) -> None:
    async def go() -> None:
        ch = NodeChannel("127.0.0.1", broker.port, "channel-test", timeout_s=20)
        try:
            assert not ch.connected  # connects lazily
            versions = await ch.request(18, 3, {"client_software_name": "t",
                                                "client_software_version": "1"})
            assert versions.error_code == 0
            assert {k.api_key for k in versions.api_keys} >= {0, 1, 3, 18, 19}
            created = await ch.request(19, 7, {"topics": [{"name": "chan-a", "num_partitions": 3,
                                                           "replication_factor": 1}],
                                               "timeout": 10000})
            assert [(t.name, t.error_code) for t in created.topics] == [("chan-a", 0)]
            # 30 requests in flight on one connection, each answer paired with its request
            names = ["chan-a", "no-such-topic"] * 15
            answers = await asyncio.gather(*(ch.request(3, 12, _metadata_body(n)) for n in names))
            for name, resp in zip(names, answers, strict=True):
                assert [t.name for t in resp.topics] == [name]
                if name == "chan-a":
                    assert resp.topics[0].error_code == 0 and len(resp.topics[0].partitions) == 3
                else:
                    assert resp.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await ch.close()

    run(go())


def test_forward_restores_the_callers_correlation_id(broker: SamsaBroker) -> None:
    wire = Wire(broker.bootstrap)
    try:
        wire.request(19, 7, {"topics": [{"name": "chan-fwd", "num_partitions": 2,
                                         "replication_factor": 1}], "timeout": 10000})
        wire.corr = 424241  # the caller's own numbering
        sized = wire.encode(3, 12, _metadata_body("chan-fwd"))
    finally:
        wire.close()
    frame = sized[4:]
    assert struct.unpack_from(">i", frame, 4)[0] == 424242

    async def go() -> list[bytes]:
        ch = NodeChannel("127.0.0.1", broker.port)
        try:
            # twice: the channel's own correlation ids differ, the caller's comes back each time
            return [await ch.forward(frame), await ch.forward(frame)]
        finally:
            await ch.close()

    for response in run(go()):
        assert struct.unpack_from(">i", response, 0)[0] == 424242
        resp_cls = load_response_schema(3, 12)
        _, n = entity_reader(resp_cls.__header_schema__)(response, 0)
        body, _ = entity_reader(resp_cls)(response, n)
        assert [(t.name, len(t.partitions)) for t in body.topics] == [("chan-fwd", 2)]


def _parked_fetch(topic: str) -> dict[str, Any]:
    """A Fetch the broker parks for up to 30 s (nothing to read, min_bytes 1)."""
    return {"replica_id": -1, "max_wait": 30000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def test_broker_killed_fails_in_flight_then_reconnects() -> None:
    with SamsaBroker() as b:
        async def go() -> None:
            ch = NodeChannel("127.0.0.1", b.port, timeout_s=25)
            try:
                await ch.request(19, 7, {"topics": [{"name": "chan-k", "num_partitions": 1,
                                                     "replication_factor": 1}],
                                         "timeout": 10000})
                parked = [asyncio.ensure_future(ch.request(1, 12, _parked_fetch("chan-k")))
                          for _ in range(3)]
                await asyncio.sleep(0.5)
                assert not any(p.done() for p in parked)
                await asyncio.get_running_loop().run_in_executor(None, b.kill)
                for p in parked:  # all three fail at once, long before their 25 s timeout
                    with pytest.raises(ChannelError, match="closed by the peer|connection lost"):
                        await asyncio.wait_for(p, 10)
                with pytest.raises(ChannelError, match="cannot connect"):
                    await ch.request(18, 3, {})
                await asyncio.get_running_loop().run_in_executor(None, b.start)
                resp = await ch.request(3, 12, _metadata_body("chan-k"))
                assert resp.topics[0].error_code == 0
            finally:
                await ch.close()

        run(go())


async def _silent_server(answer_after: int | None = None) -> tuple[asyncio.Server, int]:
    """A peer that reads requests and answers none, or closes after `answer_after` requests."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen = 0
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                await reader.readexactly(size)
                seen += 1
                if answer_after is not None and seen >= answer_after:
                    writer.close()
                    return
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_timeout_is_a_channel_error_and_the_channel_stays_usable() -> None:
    async def go() -> None:
        server, port = await _silent_server()
        ch = NodeChannel("127.0.0.1", port, timeout_s=0.3)
        try:
            for _ in range(2):
                with pytest.raises(ChannelError, match="no response within 0.3 s"):
                    await ch.request(18, 3, {})
            assert ch.connected  # a timeout does not drop the connection
        finally:
            await ch.close()
            server.close()
            await server.wait_closed()
        with pytest.raises(ChannelError, match="closed"):
            await ch.request(18, 3, {})

    run(go())


def test_connection_loss_fails_every_request_in_flight() -> None:
    async def go() -> None:
        server, port = await _silent_server(answer_after=4)
        ch = NodeChannel("127.0.0.1", port, timeout_s=20)
        try:
            results = await asyncio.gather(*(ch.request(18, 3, {}) for _ in range(4)),
                                           return_exceptions=True)
            assert all(isinstance(r, ChannelError) and "closed by the peer" in str(r)
                       for r in results), results
        finally:
            await ch.close()
            server.close()
            await server.wait_closed()

    run(go())


def test_pool(broker: SamsaBroker) -> None:
    async def go() -> None:
        pool = ChannelPool("pool-test", timeout_s=10)
        try:
            with pytest.raises(ChannelError, match="no address known for node 7"):
                await pool.request(7, 18, 3, {})
            first = pool.set_address(7, "127.0.0.1", 1)  # nothing listens on port 1
            with pytest.raises(ChannelError, match="cannot connect"):
                await pool.request(7, 18, 3, {})
            assert pool.set_address(7, "127.0.0.1", broker.port) is not first
            assert (await pool.request(7, 18, 3, {})).error_code == 0
        finally:
            await pool.close()

    run(go())
