"""Forwarding of controller-bound requests (topic creation and deletion, partitions, configs) from a
broker to the active controller, as Kafka's brokers do: the request goes as received over the
CONTROLLER listener, its answer comes back as sent. Before answering, the broker waits (bounded)
until its own metadata image shows the change, so a client that asks this broker next sees it."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.serial import entity_reader

from samsa.protocol.errors import Err

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext

PROPAGATION_WAIT_S = 2.0


def must_forward(broker: Broker, ctx: RequestContext) -> bool:
    """A request on a broker listener of a node that is not the active controller."""
    return not ctx.conn.spec.controller and not broker.node.active


def decode_response(key: int, version: int, frame: bytes) -> Any:
    schema = load_response_schema(key, version)
    _, n = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, n)
    return body


async def forward(broker: Broker, ctx: RequestContext,
                  settled: Callable[[Any], Callable[[], bool]] | None = None,
                  timeout_s: float = 30.0) -> list[bytes] | None:
    """Send the request to the active controller, retrying while there is none, it moved, or it
    answers NOT_CONTROLLER; `settled(response)` gives the condition on the local image to wait
    for before answering. None when this node became the active controller meanwhile: the
    caller handles the request itself."""
    from samsa.cluster.channel import ChannelError

    deadline = time.monotonic() + timeout_s
    while True:
        if broker.node.active:
            return None
        ch = broker.controller_channel()
        answer: bytes | None = None
        if ch is not None:
            try:
                answer = await ch.forward(ctx.frame)
            except ChannelError:
                answer = None
        resp = None
        if answer is not None:
            try:
                resp = decode_response(ctx.api_key, ctx.version, answer)
            except Exception:
                resp = None
            if resp is None or top_error(resp) != Err.NOT_CONTROLLER:
                break
        if time.monotonic() >= deadline:
            if answer is not None:
                break  # the client gets NOT_CONTROLLER and retries
            ctx.conn.close()  # the client's own timeout and retry take over
            return []
        await asyncio.sleep(0.05)
    if settled is not None and resp is not None:
        await broker.node.wait_applied(settled(resp), PROPAGATION_WAIT_S)
        await broker.reconciled()
    return [struct.pack(">i", len(answer)), answer]


def top_error(resp: Any) -> int:
    """The first error code of a controller response, wherever it lives (top level or the
    first topic/result)."""
    code = getattr(resp, "error_code", 0)
    if code:
        return int(code)
    for attr in ("topics", "responses", "results", "entries"):
        items = getattr(resp, attr, None)
        if items:
            return int(getattr(items[0], "error_code", 0))
    return 0


def ok_names(items: Any, name_attr: str = "name") -> list[str]:
    return [getattr(t, name_attr) for t in items or () if t.error_code == Err.NONE
            and getattr(t, name_attr, None)]
