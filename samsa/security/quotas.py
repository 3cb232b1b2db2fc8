"""Client quotas, Kafka's way: which quota applies to a (user, client-id), the windowed rates that
measure clients, and the throttle time a violation costs.

Quotas live in the metadata image (ClientQuotaRecord), keyed by entity: ((type, name), ...) with
type "user" or "client-id" and name None for that type's default. For each quota key the first
entity in Kafka's precedence order that sets it applies (docs: /config/users/<user>/clients/<id>
first, /config/clients/<default> last); clients resolving to the same entity share its rate.

Rates are Kafka's `Rate` over `SampledStat`: quota.window.num samples of quota.window.size.seconds,
the window size never below (num - 1) samples, so a new client may burst. A record that takes the
rate over the bound costs (rate - bound) / bound * window size ms (Kafka's QuotaUtils.throttleTime);
the request quota's throttle is capped at one sample, as Kafka's ClientRequestQuotaManager.

Accounting is per request (its size, its response size, its handler time): never per record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa.broker import authz
from samsa.protocol.errors import Err
from samsa.security import authorizer as az

if TYPE_CHECKING:
    from samsa.cluster.metadata.image import MetadataImage
    from samsa.cluster.metadata.records import ClientQuotaRecord

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# quota key -> integral (Kafka's LONG type) or not (DOUBLE)
QUOTA_KEYS: dict[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                               REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]


class QuotaError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def normalize(entity: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity as the image keys it: entries sorted by type."""
    return tuple(sorted(entity, key=lambda e: e[0]))


# ------------------------------------------------------------------------------ precedence
def candidates(user: str, client_id: str) -> tuple[Entity, ...]:
    """Kafka's 8 quota entities for a (user, client-id), highest precedence first."""
    return (
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    )


def resolve(quotas: dict[Entity, dict[str, float]], user: str, client_id: str,
            key: str) -> tuple[Entity, float] | None:
    """(entity whose quota applies, its value) for `key`, or None: unlimited."""
    for entity in candidates(user, client_id):
        held = quotas.get(entity)
        if held is not None and key in held:
            return entity, held[key]
    return None


# ------------------------------------------------------------------------------ validation
def check_entity(entity: Iterable[tuple[str, str | None]]) -> Entity:
    """Kafka's entity checks for AlterClientQuotas: not empty, known types, no repeats."""
    out = list(entity)
    if not out:
        raise QuotaError(Err.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: set[str] = set()
    for etype, name in out:
        if etype == IP:
            raise QuotaError(Err.INVALID_REQUEST,
                             "IP quotas (connection_creation_rate) are not supported by Samsa")
        if etype in seen:
            raise QuotaError(Err.INVALID_REQUEST, "Invalid empty client quota entity, "
                             f"duplicate entity entry {etype}")
        if etype not in (USER, CLIENT_ID):
            raise QuotaError(Err.INVALID_REQUEST, f"Unhandled client quota entity type: {etype}")
        if name == "":
            raise QuotaError(Err.INVALID_REQUEST, f"Empty {etype} not supported")
        seen.add(etype)
    return normalize(out)


def check_op(key: str, value: float, remove: bool) -> None:
    """Kafka's key and value checks for one quota change."""
    integral = QUOTA_KEYS.get(key)
    if integral is None:
        raise QuotaError(Err.INVALID_REQUEST, f"Invalid configuration key {key}")
    if remove:
        return
    if math.isnan(value) or math.isinf(value):
        raise QuotaError(Err.INVALID_REQUEST, f"Configuration {key} must be a finite number")
    if integral and abs(value - round(value)) > 1e-6:
        raise QuotaError(Err.INVALID_REQUEST, f"Configuration {key} must be a Long value")
    if value <= 0:
        raise QuotaError(Err.INVALID_REQUEST, f"Configuration {key} must be positive")


def alter_records(entity: Entity, ops: Iterable[tuple[str, float, bool]]
                  ) -> list[ClientQuotaRecord]:
    """The records for one AlterClientQuotas entry (checked: QuotaError on the first bad op)."""
    from samsa.cluster.metadata.records import ClientQuotaRecord

    changes: dict[str, float | None] = {}  # a key given twice: the last op wins (Kafka's map)
    for key, value, remove in ops:
        check_op(key, value, remove)
        changes[key] = None if remove else float(value)
    return [ClientQuotaRecord(entity, key, 0.0 if v is None else v, v is None)
            for key, v in changes.items()]


# ------------------------------------------------------------------------------ describe
def describe(image: MetadataImage, components: Iterable[tuple[str, int, str | None]],
             strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """Kafka's DescribeClientQuotas filter over the image: QuotaError for a bad filter."""
    exact: dict[str, str | None] = {}
    any_of: set[str] = set()
    for etype, match_type, match in components:
        if not etype:
            raise QuotaError(Err.INVALID_REQUEST, "Invalid empty entity type.")
        if etype in exact or etype in any_of:
            raise QuotaError(Err.INVALID_REQUEST,
                             f"Entity type {etype} cannot appear more than once in the filter.")
        if etype not in (USER, CLIENT_ID, IP):
            raise QuotaError(Err.UNSUPPORTED_VERSION, f"Unsupported entity type {etype}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError(Err.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but "
                                 "set match string to null.")
            exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError(Err.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but "
                                 "also specified a match string.")
            exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaError(Err.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, "
                                 "but also specified a match string")
            any_of.add(etype)
        else:
            raise QuotaError(Err.INVALID_REQUEST, f"Unknown match type {match_type}")
    if IP in exact or IP in any_of:
        if exact.keys() - {IP} or any_of - {IP}:
            raise QuotaError(Err.INVALID_REQUEST, "Invalid entity filter component combination. "
                             "IP filter component should not be used with user or clientId "
                             "filter component.")
    wanted = len(exact) + len(any_of)
    out = []
    for entity, values in image.client_quotas.items():
        names = dict(entity)
        if strict and len(names) != wanted:
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        if any(t not in names for t in any_of):
            continue
        out.append((entity, dict(values)))
    return out


# ------------------------------------------------------------------------------ rates
class Rate:
    """Kafka's windowed Rate: `samples` samples of `window_s` seconds each."""

    __slots__ = ("samples", "window_s", "starts", "values")

    def __init__(self, samples: int, window_s: float) -> None:
        self.samples = max(samples, 1)
        self.window_s = window_s
        self.starts: list[float] = []
        self.values: list[float] = []

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_s
        while self.starts and now - self.starts[0] >= expire:
            del self.starts[0]
            del self.values[0]

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        if not self.starts or now - self.starts[-1] >= self.window_s:
            self.starts.append(now)
            self.values.append(value)
            if len(self.starts) > self.samples:
                del self.starts[0]
                del self.values[0]
        else:
            self.values[-1] += value

    def window_size(self, now: float) -> float:
        """Seconds the rate divides by: since the oldest sample, at least samples - 1 windows."""
        self._purge(now)
        elapsed = now - self.starts[0] if self.starts else 0.0
        full = int(elapsed / self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return max(elapsed, 0.001)  # Kafka: at least 1 ms

    def measure(self, now: float) -> float:
        size = self.window_size(now)  # purges first
        return sum(self.values) / size


@dataclass(slots=True)
class _Sensor:
    bound: float
    rate: Rate


class QuotaManager:
    """One per broker: the image's quotas resolved per (user, client-id), and the rates of the
    entities they apply to. `active` is False while no quota is set: the hot paths check only it."""

    def __init__(self, samples: int = 11, window_s: float = 1.0,
                 clock: object = time.monotonic) -> None:
        self.samples = samples
        self.window_s = window_s
        self.clock = clock
        self.active = False
        self.generation = 0  # bumped whenever the quotas change: connections re-resolve
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._sensors: dict[tuple[str, Entity], _Sensor] = {}
        self._resolved: dict[tuple[str, str, str], _Sensor | None] = {}
        self._buckets: dict[Entity, TokenBucket] = {}  # controller_mutation_rate

    def update(self, quotas: dict[Entity, dict[str, float]]) -> None:
        """The image's quotas changed (or may have): take them, keep rates of unchanged quotas."""
        if quotas == self._quotas:
            return
        self._quotas = {e: dict(v) for e, v in quotas.items()}
        self.active = bool(self._quotas)
        self._resolved.clear()
        self.generation += 1
        for entity in [e for e in self._buckets
                       if CONTROLLER_MUTATION_RATE not in self._quotas.get(e, {})]:
            del self._buckets[entity]
        for (key, entity), sensor in list(self._sensors.items()):
            value = self._quotas.get(entity, {}).get(key)
            if value is None:
                del self._sensors[(key, entity)]
            else:
                sensor.bound = value

    def sensor(self, key: str, user: str, client_id: str) -> _Sensor | None:
        """The sensor measuring this client for `key`; None when unlimited."""
        k = (key, user, client_id)
        try:
            return self._resolved[k]
        except KeyError:
            pass
        found = resolve(self._quotas, user, client_id, key)
        s = None
        if found is not None:
            entity, value = found
            s = self._sensors.get((key, entity))
            if s is None:
                s = self._sensors[(key, entity)] = _Sensor(value, Rate(self.samples,
                                                                        self.window_s))
        if len(self._resolved) > 10_000:  # bounded: many client ids must not grow it forever
            self._resolved.clear()
        self._resolved[k] = s
        return s

    def now(self) -> float:
        return self.clock()  # type: ignore[operator,no-any-return]

    def record(self, s: _Sensor, value: float, cap_ms: float | None = None) -> int:
        """Record `value`; the throttle time in ms it costs (0 while within the quota)."""
        now = self.now()
        s.rate.record(value, now)
        rate = s.rate.measure(now)
        if rate <= s.bound:
            return 0
        ms = (rate - s.bound) / s.bound * s.rate.window_size(now) * 1000
        if cap_ms is not None:
            ms = min(ms, cap_ms)
        return int(ms)

    def unrecord(self, s: _Sensor, value: float) -> None:
        """Take back a recorded value (Kafka: a throttled fetch sends no data)."""
        s.rate.record(-value, self.now())

    def max_in_window(self, s: _Sensor) -> float:
        """Most bytes one response may carry (Kafka's getMaxValueInQuotaWindow)."""
        return s.bound * max(self.samples - 1, 1) * self.window_s

    def request_cap_ms(self) -> float:
        return self.window_s * 1000

    def peek(self, s: _Sensor, cap_ms: float | None = None) -> int:
        """The throttle time the rate measured so far costs, without recording."""
        now = self.now()
        rate = s.rate.measure(now)
        if rate <= s.bound:
            return 0
        ms = (rate - s.bound) / s.bound * s.rate.window_size(now) * 1000
        return int(ms if cap_ms is None else min(ms, cap_ms))


# ------------------------------------------------------------------------------ per request
# Brokers' own connections (replica fetches, controller traffic) are exempt. Samsa knows them by
# their client id; with an authorizer on, a client id alone is not trusted (any client can claim
# one): the principal must also be allowed ClusterAction on the cluster, as nodes are.
_BROKER_CLIENT = ("samsa-node", "samsa-replica-fetcher-", "samsa-txn-markers")


def _node_connection(ctx: Any) -> bool:
    if not (ctx.client_id or "").startswith(_BROKER_CLIENT):
        return False
    return authz.cluster(ctx, az.OP_CLUSTER_ACTION)
_PRODUCE, _API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 0, 18, 17, 36
_UNTHROTTLED = frozenset({_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE})


def charge_request(q: QuotaManager, ctx: Any, size: int) -> bool:
    """Before the handler runs: charge a Produce's bytes (its request size, as Kafka) and set
    ctx.throttle_ms from the produce and request quotas. True when the handler's time is to be
    charged to a request quota afterwards (charge_time)."""
    cid = ctx.client_id or ""
    if ctx.api_key in _UNTHROTTLED or _node_connection(ctx):
        return False
    user = ctx.conn.principal.name
    ms = 0
    rs = q.sensor(REQUEST_PERCENTAGE, user, cid)
    if rs is not None:
        # Samsa charges a request's time once it is known, so the throttle comes from the
        # time charged so far (Kafka's includes the request being answered)
        ms = q.peek(rs, q.request_cap_ms())
    if ctx.api_key == _PRODUCE:
        ps = q.sensor(PRODUCER_BYTE_RATE, user, cid)
        if ps is not None:
            ms = max(ms, q.record(ps, size))
    ctx.throttle_ms = ms
    return rs is not None


def charge_time(q: QuotaManager, ctx: Any, seconds: float) -> None:
    """After the handler's synchronous part: its time, as percent-seconds of one thread."""
    s = q.sensor(REQUEST_PERCENTAGE, ctx.conn.principal.name, ctx.client_id or "")
    if s is not None:
        s.rate.record(seconds * 100, q.now())


class Timed:
    """An awaitable that runs another one and adds up the time of its steps on the event loop
    (not the time it waits): a coroutine handler's share of a request quota."""

    __slots__ = ("aw", "spent")

    def __init__(self, aw: Any) -> None:
        self.aw = aw
        self.spent = 0.0

    def __await__(self) -> Any:
        gen = self.aw.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                step = gen.send(value) if error is None else gen.throw(error)
            except StopIteration as e:
                self.spent += time.perf_counter() - started
                return e.value
            except BaseException:
                self.spent += time.perf_counter() - started
                raise
            self.spent += time.perf_counter() - started
            try:
                value, error = (yield step), None
            except BaseException as e:  # noqa: BLE001 - handed to the awaited coroutine
                value, error = None, e


def fetch_sensor(q: QuotaManager, ctx: Any) -> _Sensor | None:
    """The consumer_byte_rate sensor of a consumer's Fetch; None when unlimited."""
    cid = ctx.client_id or ""
    if not q.active or _node_connection(ctx):
        return None
    return q.sensor(CONSUMER_BYTE_RATE, ctx.conn.principal.name, cid)


# ------------------------------------------------------------------------------ mutations
class TokenBucket:
    """Kafka's TokenBucket (KIP-599): `rate` tokens a second, at most samples x window worth
    held; a mutation takes its partitions' worth and may leave the bucket in debt."""

    __slots__ = ("rate", "burst", "tokens", "last")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.last = now

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def throttle_ms(self, now: float) -> int:
        """0 while the bucket holds tokens, else the ms until it is out of debt."""
        self._refill(now)
        return 0 if self.tokens >= 0 else math.ceil(-self.tokens / self.rate * 1000)

    def take(self, n: float, now: float) -> None:
        self._refill(now)
        self.tokens -= n


class MutationQuota:
    """controller_mutation_rate for one request: `exceeded()` before each topic's mutation
    (strict requests then fail it with THROTTLING_QUOTA_EXCEEDED), `record(partitions)` after."""

    def __init__(self, q: QuotaManager, bucket: TokenBucket | None, strict: bool) -> None:
        self.q = q
        self.bucket = bucket
        self.strict = strict

    def exceeded(self) -> bool:
        return self.strict and self.bucket is not None and \
            self.bucket.throttle_ms(self.q.now()) > 0

    def record(self, partitions: int) -> None:
        if self.bucket is not None and partitions > 0:
            self.bucket.take(partitions, self.q.now())

    def throttle_ms(self) -> int:
        return self.bucket.throttle_ms(self.q.now()) if self.bucket is not None else 0


def mutation_quota(q: QuotaManager, ctx: Any, strict_from: int) -> MutationQuota:
    """The controller mutation quota of a CreateTopics / CreatePartitions / DeleteTopics request
    (strict, i.e. refusing, from the version KIP-599 gave each)."""
    bucket = None
    cid = ctx.client_id or ""
    if q.active and not _node_connection(ctx):
        found = resolve(q._quotas, ctx.conn.principal.name, cid, CONTROLLER_MUTATION_RATE)
        if found is not None:
            entity, rate = found
            bucket = q._buckets.get(entity)
            burst = rate * q.samples * q.window_s
            if bucket is None:
                bucket = q._buckets[entity] = TokenBucket(rate, burst, q.now())
            else:
                bucket.rate, bucket.burst = rate, burst
    return MutationQuota(q, bucket, ctx.version >= strict_from)
