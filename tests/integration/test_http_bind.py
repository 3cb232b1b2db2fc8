"""The embedded HTTP servers bind through samsa.net.bind: a busy port is an OSError naming the
server, never uvicorn's sys.exit() (which would end the broker or worker embedding it)."""

from __future__ import annotations

import asyncio
import errno
import socket

import pytest

from samsa.net.bind import bind_tcp
from samsa.registry.server import RegistryConfig, RegistryServer
from samsa.testing import SamsaBroker


def test_bind_tcp_free_and_busy_ports() -> None:
    sock = bind_tcp("127.0.0.1", 0, "test server")
    try:
        port = sock.getsockname()[1]
        assert port > 0
        sock.listen()
        with pytest.raises(OSError, match=f"test server could not listen on 127.0.0.1:{port}") \
                as err:
            bind_tcp("127.0.0.1", port, "test server")
        assert err.value.errno == errno.EADDRINUSE
    finally:
        sock.close()


def test_registry_on_a_busy_port_raises_oserror(samsa_broker: SamsaBroker) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = RegistryServer(RegistryConfig(samsa_broker.bootstrap,
                                               listener=f"http://127.0.0.1:{port}",
                                               timeout_s=15))

        async def run() -> None:
            try:
                await server.start()
            finally:
                await server.stop()

        with pytest.raises(OSError, match="schema registry could not listen"):
            asyncio.run(run())


def test_registry_on_port_zero_reports_the_bound_port(samsa_broker: SamsaBroker) -> None:
    server = RegistryServer(RegistryConfig(samsa_broker.bootstrap, listener="http://127.0.0.1:0",
                                           timeout_s=15))

    async def run() -> None:
        await server.start()
        try:
            assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
            _, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.close()
        finally:
            await server.stop()

    asyncio.run(run())
