"""TEST-ONLY fault injection: make chosen APIs' handlers fail, to test how failures are answered.

Off unless the environment variable SAMSA_FAULT_INJECT is set when the broker starts (read once,
at import). Its value is a comma-separated list of API keys: `3` makes every Metadata handler
call raise at once; `3:async` makes it return an awaitable that raises when awaited (the path of
handlers that wait: produce with acks=all, joins, forwarded admin requests). Never set it in
production: every matching request is answered with UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger("samsa.fault_inject")

ENV = "SAMSA_FAULT_INJECT"


class InjectedFault(RuntimeError):
    """What an injected handler raises."""


def parse(value: str) -> dict[int, bool]:
    """api key -> True for an asynchronous failure, False for a synchronous one."""
    out: dict[int, bool] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        key, _, mode = item.partition(":")
        if mode not in ("", "async"):
            raise ValueError(f"{ENV}: unknown mode {mode!r} in {item!r} (expected 'async')")
        out[int(key)] = mode == "async"
    return out


FAULTS: dict[int, bool] = parse(os.environ.get(ENV, ""))
if FAULTS:
    log.warning("%s is set: handlers of api keys %s fail on purpose (test only)", ENV,
                sorted(FAULTS))


async def _fail_later(api_key: int) -> None:
    raise InjectedFault(f"injected asynchronous failure of api {api_key}")


def wrap(api_key: int, handler: Callable[..., Any]) -> Callable[..., Any]:
    """`handler`, or a stand-in that fails as FAULTS says for `api_key`."""
    mode = FAULTS.get(api_key)
    if mode is None:
        return handler

    def failing(broker: Any, ctx: Any, body: Any) -> Any:
        if mode:
            return _fail_later(api_key)
        raise InjectedFault(f"injected failure of api {api_key}")

    return failing
