"""Per-app state: the context, the registry codec, sign-in sessions and each principal's cluster
clients. When the cluster's client config uses SASL, every user signs in with their own SASL
credentials (checked by connecting with them) and the console acts as that principal, so the
broker's ACLs apply to what they see and do."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from .cluster import Cluster, ConsoleError, Samples, describe
from .codec import Codec
from .context import Live
from .registry import RegistryClient

SESSION_TTL_S = 8 * 3600
MAX_SESSIONS = 200  # each holds an AdminClient (threads, connections)
MAX_TAILS = 20  # live tails open at once (one consumer each)
COOKIE = "samsa_console"
SIGN_IN_TIMEOUT_S = 8.0


@dataclass
class Session:
    user: str
    cluster: Cluster
    created: float
    producer: Producer | None = None


def librdkafka(props: dict[str, str]) -> dict[str, Any]:
    """Java client properties (sasl.jaas.config, PEM stores...) as librdkafka settings."""
    from samsa.client_security import librdkafka_config

    return dict(librdkafka_config(props))


class ConsoleState:
    def __init__(self, ctx: Live) -> None:
        self.ctx = ctx
        self._registry: RegistryClient | None = None
        self._codec = Codec(None)
        self.samples = Samples()
        mech = ctx.client_config.get("sasl.mechanism") or ctx.client_config.get("sasl.mechanisms")
        proto = ctx.client_config.get("security.protocol", "PLAINTEXT").upper()
        self.login_required = bool(mech) or proto.startswith("SASL")
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._shared: Session | None = None
        self.log_dirs_cache: tuple[float, dict[tuple[str, int], int] | None] = (0.0, None)
        self.tails = 0  # open live tails, under _lock

    def _registry_now(self) -> tuple[RegistryClient | None, Codec]:
        """The registry client and codec for the context's current registry URL (it may appear
        after start-up, when the embedded registry comes up after the admin listener)."""
        url = self.ctx.registry_url
        with self._lock:
            if url and (self._registry is None or self._registry.url != url.rstrip("/")):
                self._registry = RegistryClient(url, self.ctx.registry_config)
                self._codec = Codec(self._registry)
            elif not url and self._registry is not None:
                self._registry, self._codec = None, Codec(None)
            return self._registry, self._codec

    @property
    def registry(self) -> RegistryClient | None:
        return self._registry_now()[0]

    @property
    def codec(self) -> Codec:
        return self._registry_now()[1]

    def base_config(self) -> dict[str, Any]:
        """librdkafka settings from the context's Kafka (Java-named) client properties."""
        try:
            client = librdkafka(self.ctx.client_config)
        except ValueError as e:
            raise ConsoleError(f"the console's client settings are not usable: {e}", 500) from None
        return {"bootstrap.servers": self.ctx.bootstrap, **client}

    def shared(self) -> Session:
        with self._lock:
            if self._shared is None:
                self._shared = Session("", Cluster(self.base_config()), time.time())
            return self._shared

    def sign_in(self, user: str, password: str) -> str:
        """A session token for these SASL credentials, once the broker accepted them."""
        conf: dict[str, Any] = {**self.base_config(), "sasl.username": user, "sasl.password": password}
        conf.pop("sasl.jaas.config", None)
        refused: list[Any] = []

        def on_error(err: Any) -> None:  # a refused login is reported here at once
            if err.code() == KafkaError._AUTHENTICATION:
                refused.append(err)
        cluster = Cluster({**conf, "error_cb": on_error})
        deadline = time.monotonic() + SIGN_IN_TIMEOUT_S
        while True:
            try:
                cluster.admin.list_topics(timeout=0.5)
                break
            except KafkaException as e:
                cluster.admin.poll(0)  # serves error_cb
                if refused:
                    raise ConsoleError(f"sign-in failed: {refused[0].str()}", 401) from None
                if time.monotonic() > deadline:
                    raise ConsoleError(f"sign-in failed: {describe(e)}", 401) from None
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._expire()
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions, key=lambda t: self._sessions[t].created)
                self._sessions.pop(oldest)
            self._sessions[token] = Session(user, cluster, time.time())
        return token

    def session(self, token: str | None) -> Session | None:
        if not self.login_required:
            return self.shared()
        if not token:
            return None
        with self._lock:
            s = self._sessions.get(token)
            if s is not None and time.time() - s.created > SESSION_TTL_S:
                self._sessions.pop(token, None)
                return None
            return s

    def open_tail(self) -> bool:
        with self._lock:
            if self.tails >= MAX_TAILS:
                return False
            self.tails += 1
            return True

    def close_tail(self) -> None:
        with self._lock:
            self.tails -= 1

    def sign_out(self, token: str | None) -> None:
        with self._lock:
            self._sessions.pop(token or "", None)

    def _expire(self) -> None:
        now = time.time()
        for t in [t for t, s in self._sessions.items() if now - s.created > SESSION_TTL_S]:
            self._sessions.pop(t)

    def producer(self, s: Session) -> Producer:
        with self._lock:
            if s.producer is None:
                conf = {k: v for k, v in s.cluster.config.items()}
                conf.update({"client.id": "samsa-console-producer", "acks": "all",
                             "linger.ms": 0, "enable.idempotence": True})
                s.producer = Producer(conf)
            return s.producer
