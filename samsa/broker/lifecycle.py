"""The broker's lifecycle with the active controller (Kafka's BrokerLifecycleManager):
BrokerRegistration, then a BrokerHeartbeat every broker.heartbeat.interval.ms; the controller
unfences the broker once it has caught up with the metadata log, fences it when heartbeats stop,
and lets it go after a controlled shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from samsa.cluster.controller import ControllerError
from samsa.cluster.metadata import records as rec
from samsa.cluster.node import NotControllerError
from samsa.protocol.errors import Err

if TYPE_CHECKING:
    from samsa.broker.broker import Broker

log = logging.getLogger("samsa.broker.lifecycle")
BROKER_REGISTRATION, BROKER_HEARTBEAT = 62, 63
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SUPPORTED_FEATURES = (("metadata.version", 1, 25), ("group.version", 0, 1),
                      ("transaction.version", 0, 0), ("kraft.version", 0, 0))


class BrokerLifecycle:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.node = broker.node
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self.caught_up = False
        self.want_shut_down = False
        self.shut_down_ok = asyncio.Event()
        self.unfenced = asyncio.Event()
        self.interval_s = broker.config.get_int("broker.heartbeat.interval.ms") / 1000
        self.session_s = broker.config.get_int("broker.session.timeout.ms") / 1000
        self._task: asyncio.Task[None] | None = None
        self._why = ""
        self._last_log = 0.0

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _complain(self, why: str) -> None:
        """Say why the broker cannot register/heartbeat, at most every 5 s."""
        now = time.monotonic()
        if why != self._why or now - self._last_log > 5:
            log.warning("broker %d: %s", self.node.node_id, why)
            self._why, self._last_log = why, now

    async def _run(self) -> None:
        while True:
            try:
                if self.broker_epoch < 0:
                    await self._register()
                if self.broker_epoch >= 0:
                    await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # keep going: the quorum may come back
                self._complain(f"lifecycle error: {e!r}")
            await asyncio.sleep(self.interval_s if self.broker_epoch >= 0 and not self.fenced
                                else min(self.interval_s, 0.05 if self._why == "" else 0.5))

    # ---- calls (local when this node is the active controller) --------------------------------
    def _listeners(self) -> list[dict[str, Any]]:
        return [{"name": ln.name, "host": ln.host, "port": ln.port,
                 "security_protocol": SECURITY_PROTOCOLS.get(ln.security_protocol, 0)}
                for ln in self.broker.advertised_broker_listeners]

    async def _register(self) -> None:
        b = self.broker
        c = self.node.controller if self.node.active else None
        if c is not None:
            try:
                self.broker_epoch = await c.register_broker(
                    self.node.node_id, self.incarnation_id, self.node.image.cluster_id,
                    [rec.BrokerEndpoint(**ep) for ep in self._listeners()],
                    b.config.get("broker.rack") or None,
                    [rec.BrokerFeature(n, lo, hi) for n, lo, hi in SUPPORTED_FEATURES])
                self._why = ""
                return
            except NotControllerError:
                pass
            except ControllerError as e:
                self._complain(f"registration refused: {Err.name_of(e.code)}: {e}")
                return
        resp = await self._call(BROKER_REGISTRATION, 4, {
            "broker_id": self.node.node_id, "cluster_id": self.node.image.cluster_id,
            "incarnation_id": self.incarnation_id, "listeners": self._listeners(),
            "features": [{"name": n, "min_supported_version": lo, "max_supported_version": hi}
                         for n, lo, hi in SUPPORTED_FEATURES],
            "rack": b.config.get("broker.rack") or None, "is_migrating_zk_broker": False,
            "log_dirs": (), "previous_broker_epoch": -1})
        if resp is None:
            return
        if resp.error_code:
            self._complain(f"registration refused by the controller: "
                           f"{Err.name_of(resp.error_code)}")
            return
        self.broker_epoch = resp.broker_epoch
        self._why = ""

    async def _heartbeat(self) -> None:
        offset = self.node.image.offset
        c = self.node.controller if self.node.active else None
        reply: Any
        if c is not None:
            try:
                r = await c.heartbeat(self.node.node_id, self.broker_epoch, offset, False,
                                      self.want_shut_down)
            except NotControllerError:
                return
            reply = SimpleNamespace(error_code=r.error, is_fenced=r.is_fenced,
                                    is_caught_up=r.is_caught_up,
                                    should_shut_down=r.should_shut_down)
        else:
            reply = await self._call(BROKER_HEARTBEAT, 1, {
                "broker_id": self.node.node_id, "broker_epoch": self.broker_epoch,
                "current_metadata_offset": offset, "want_fence": False,
                "want_shut_down": self.want_shut_down, "offline_log_dirs": ()})
            if reply is None:
                return
        if reply.error_code in (Err.STALE_BROKER_EPOCH, Err.BROKER_ID_NOT_REGISTERED):
            self._complain(f"heartbeat refused ({Err.name_of(reply.error_code)}): registering again")
            self.broker_epoch = -1
            return
        if reply.error_code:
            self._complain(f"heartbeat refused: {Err.name_of(reply.error_code)}")
            return
        self._why = ""
        self.fenced = reply.is_fenced
        self.caught_up = reply.is_caught_up
        if not self.fenced:
            self.unfenced.set()
        if reply.should_shut_down:
            self.shut_down_ok.set()

    async def _call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        from samsa.broker.controller_client import call_controller
        from samsa.cluster.channel import ChannelError

        ch = self.broker.controller_channel()
        if ch is None and self.node.leader_id == self.node.node_id:
            return None  # this node is becoming the active controller
        if ch is None:
            self._complain("no active controller known yet (voters: "
                           f"{self.broker.config.get('controller.quorum.voters')})")
            return None
        try:
            # bounded well inside the session: a heartbeat stuck on a frozen controller must
            # not outlive it (a new controller would fence this live broker)
            resp = await call_controller(self.node, ch, api_key, version, body,
                                         self.session_s / 2)
        except ChannelError as e:
            self._complain(f"cannot reach the controller at {ch.host}:{ch.port}: {e}")
            return None
        if resp is None:
            return None  # the quorum has a new leader: ask it
        if getattr(resp, "error_code", 0) == Err.NOT_CONTROLLER:
            return None
        return resp

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Ask the controller to let this broker go (leaders moved away), bounded in time."""
        if self.broker_epoch < 0 or self._task is None:
            return
        self.want_shut_down = True
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._beat_until_released(), timeout_s)

    async def _beat_until_released(self) -> None:
        while not self.shut_down_ok.is_set():
            with contextlib.suppress(Exception):
                await self._heartbeat()
            if self.shut_down_ok.is_set():
                return
            await asyncio.sleep(0.05)
