"""A long-polling Fetch whose connection is gone stops waiting: it holds nothing anyone will read,
and a client that parks fetches and reconnects must not pile them up until their max_wait ends."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
import uvloop

from samsa.broker.broker import Broker
from samsa.config import BrokerConfig
from samsa.testing import free_port
from tests.wire import Wire

pytestmark = pytest.mark.timeout(60)


def _on_loop(loop: asyncio.AbstractEventLoop, fn):  # type: ignore[no-untyped-def]
    async def call():  # type: ignore[no-untyped-def]
        return fn()
    return asyncio.run_coroutine_threadsafe(call(), loop).result(10)


def _wait_until(loop: asyncio.AbstractEventLoop, fn, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(400):
        if _on_loop(loop, fn):
            return
        time.sleep(0.01)
    raise AssertionError(f"never: {what}")


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])  # the broker runs on uvloop
def test_parked_fetches_end_when_their_connection_closes(tmp_path: Path, loop_name: str) -> None:
    port = free_port()
    config = BrokerConfig({"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path)})
    loop = uvloop.new_event_loop() if loop_name == "uvloop" else asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    broker = Broker(config)
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(30)
    try:
        w = Wire(f"127.0.0.1:{port}")
        created = w.request(19, 4, {"topics": [{"name": "parked", "num_partitions": 1,
                                                "replication_factor": 1, "assignments": [],
                                                "configs": []}], "timeout": 10000,
                                    "validate_only": False})
        assert int(created.topics[0].error_code) == 0
        fetch = {"replica_id": -1, "max_wait": 600_000, "min_bytes": 1, "max_bytes": 1 << 20,
                 "isolation_level": 0,
                 "topics": [{"topic": "parked", "partitions": [
                     {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
        w.send_raw(b"".join(w.encode(1, 11, fetch) for _ in range(20)))
        lg = broker.partition_log("parked", 0)
        assert lg is not None
        _wait_until(loop, lambda: len(lg.waiters) == 20, "20 fetches parked")
        w.close()
        _wait_until(loop, lambda: not broker.connections, "connection gone")
        # nothing will ever append to this partition: only the closed connection can end them
        _wait_until(loop, lambda: not lg.waiters, "parked fetches released")
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
