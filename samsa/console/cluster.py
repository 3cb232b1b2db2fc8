"""The console's Kafka side: admin operations through confluent-kafka's AdminClient (blocking
calls, run on Starlette's thread pool, never on the broker's event loop). Every failure becomes a
ConsoleError carrying the broker's message and an HTTP status for the page that shows it."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

TIMEOUT_S = 10.0
METADATA_TIMEOUT_S = 5.0  # the first answer; longer means the cluster is unreachable (as the CLI)
TP = tuple[str, int]
INACTIVE_GROUP_STATES = {"EMPTY", "DEAD", "UNKNOWN"}


class ConsoleError(Exception):
    """A failure to show on a page: a message and the HTTP status of that page."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def describe(e: BaseException) -> str:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        err: KafkaError = e.args[0]
        text = err.str() or err.name()
        return text if err.name() in text or err.name().startswith("_") else f"{text} ({err.name()})"
    return str(e) or type(e).__name__


def code_of(e: BaseException) -> int | None:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return int(e.args[0].code())
    return None


def wait(fut: Any, what: str) -> Any:
    try:
        return fut.result(timeout=TIMEOUT_S + 5)
    except KafkaException as e:
        status = 404 if code_of(e) in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.GROUP_ID_NOT_FOUND) \
            else 403 if code_of(e) in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                      KafkaError.GROUP_AUTHORIZATION_FAILED,
                                      KafkaError.CLUSTER_AUTHORIZATION_FAILED) else 400
        raise ConsoleError(f"{what}: {describe(e)}", status) from None
    except TimeoutError:
        raise ConsoleError(f"{what}: the broker did not answer in time", 504) from None


@dataclass
class Samples:
    """End offsets sampled on each overview/topics view, for message rates and the sparkline."""

    points: deque[tuple[float, dict[TP, int]]] = field(default_factory=lambda: deque(maxlen=60))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, ends: dict[TP, int]) -> None:
        with self.lock:
            now = time.monotonic()
            if self.points and now - self.points[-1][0] < 1.0:
                self.points[-1] = (self.points[-1][0], ends)
            else:
                self.points.append((now, ends))

    def total_rates(self) -> list[float]:
        """Messages per second between consecutive samples (all topics)."""
        with self.lock:
            pts = list(self.points)
        out = []
        for (t0, a), (t1, b) in zip(pts, pts[1:], strict=False):
            moved = sum(max(0, b.get(tp, 0) - a.get(tp, 0)) for tp in b)
            out.append(moved / max(t1 - t0, 1e-3))
        return out

    def topic_rate(self, topic: str) -> float | None:
        with self.lock:
            if len(self.points) < 2:
                return None
            (t0, a), (t1, b) = self.points[-2], self.points[-1]
        moved = sum(max(0, off - a.get(tp, 0)) for tp, off in b.items() if tp[0] == topic)
        return moved / max(t1 - t0, 1e-3)


class Cluster:
    """One principal's view of the cluster: an AdminClient with that principal's credentials."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = {"log_level": 0, "socket.connection.setup.timeout.ms": 5000,
                       "client.id": "samsa-console", **config}
        try:
            self.admin = AdminClient(dict(self.config))
        except KafkaException as e:
            raise ConsoleError(f"bad client configuration: {describe(e)}", 500) from None

    def metadata(self, topic: str | None = None) -> Any:
        try:
            if topic is None:
                return self.admin.list_topics(timeout=METADATA_TIMEOUT_S)
            return self.admin.list_topics(topic, timeout=METADATA_TIMEOUT_S)
        except KafkaException as e:
            raise ConsoleError(f"cannot reach the cluster at {self.config.get('bootstrap.servers')}: "
                               f"{describe(e)}", 503) from None

    def topic(self, name: str) -> Any:
        md = self.metadata()
        tm = md.topics.get(name)
        if tm is None:
            raise ConsoleError(f"unknown topic {name!r}", 404)
        if tm.error is not None:
            raise ConsoleError(f"topic {name!r}: {tm.error.str()}", 404)
        return tm

    def offsets(self, tps: Iterable[TP], spec: Any) -> dict[TP, int]:
        """ListOffsets for partitions; partitions that fail are left out."""
        specs = {TopicPartition(t, p): spec for t, p in tps}
        if not specs:
            return {}
        out: dict[TP, int] = {}
        for tp, fut in self.admin.list_offsets(specs, request_timeout=TIMEOUT_S).items():
            try:
                out[(tp.topic, tp.partition)] = int(fut.result(timeout=TIMEOUT_S + 5).offset)
            except (KafkaException, TimeoutError):
                continue
        return out

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self.offsets(tps, OffsetSpec.earliest())

    def latest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self.offsets(tps, OffsetSpec.latest())

    def for_time(self, tps: Iterable[TP], ts_ms: int) -> dict[TP, int]:
        return self.offsets(tps, OffsetSpec.for_timestamp(ts_ms))

    @staticmethod
    def partitions_of(md: Any, topics: Iterable[str] | None = None) -> list[TP]:
        names = md.topics if topics is None else topics
        return sorted((t, p) for t in names if t in md.topics and md.topics[t].error is None
                      for p in md.topics[t].partitions)

    # -- topics ----------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication: int,
                     configs: dict[str, str]) -> None:
        fut = self.admin.create_topics([NewTopic(name, partitions, replication, config=configs)],
                                       request_timeout=TIMEOUT_S)[name]
        wait(fut, f"cannot create topic {name!r}")

    def delete_topic(self, name: str) -> None:
        wait(self.admin.delete_topics([name], request_timeout=TIMEOUT_S)[name],
             f"cannot delete topic {name!r}")

    def add_partitions(self, name: str, total: int) -> None:
        wait(self.admin.create_partitions([NewPartitions(name, total)],
                                          request_timeout=TIMEOUT_S)[name],
             f"cannot grow topic {name!r} to {total} partitions")

    def topic_configs(self, name: str) -> list[dict[str, Any]]:
        res = ConfigResource(ResourceType.TOPIC, name)
        entries = wait(self.admin.describe_configs([res], request_timeout=TIMEOUT_S)[res],
                       f"cannot describe the configs of {name!r}")
        out = []
        for e in sorted(entries.values(), key=lambda e: e.name):
            out.append({"name": e.name, "value": None if e.is_sensitive else e.value,
                        "default": bool(e.is_default), "readOnly": bool(e.is_read_only),
                        "source": str(getattr(e.source, "name", e.source))})
        return out

    def alter_topic_config(self, name: str, key: str, value: str | None) -> None:
        """Set (or with None delete back to the default) one topic config: IncrementalAlterConfigs."""
        op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
        res = ConfigResource(ResourceType.TOPIC, name,
                             incremental_configs=[ConfigEntry(key, value, incremental_operation=op)])
        wait(self.admin.incremental_alter_configs([res], request_timeout=TIMEOUT_S)[res],
             f"cannot change {key} of {name!r}")

    # -- groups ----------------------------------------------------------------------------------

    def groups(self) -> list[dict[str, Any]]:
        res = wait(self.admin.list_consumer_groups(request_timeout=TIMEOUT_S), "cannot list groups")
        out = []
        for g in res.valid:
            out.append({"id": g.group_id, "state": _name(g.state),
                        "type": _name(getattr(g, "type", None)), "simple": bool(g.is_simple_consumer_group)})
        return sorted(out, key=lambda g: g["id"])

    def group(self, group: str) -> dict[str, Any]:
        desc = wait(self.admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group],
                    f"cannot describe group {group!r}")
        members = []
        for m in desc.members or []:
            parts = sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions
                                                              if m.assignment else []))
            members.append({"id": m.member_id, "client": m.client_id, "host": m.host,
                            "instance": m.group_instance_id, "assignment": parts})
        owner = {tp: m["client"] or m["id"] for m in members for tp in m["assignment"]}
        committed = self.committed(group)
        tps = sorted(set(committed) | set(owner))
        ends = self.latest(tps)
        rows = []
        for tp in tps:
            c = committed.get(tp)
            end = ends.get(tp)
            lag = None if c is None or end is None else max(0, end - c)
            rows.append({"topic": tp[0], "partition": tp[1], "committed": c, "end": end,
                         "lag": lag, "owner": owner.get(tp)})
        coord = desc.coordinator
        return {"id": group, "state": _name(desc.state), "protocol": desc.partition_assignor,
                "coordinator": None if coord is None else f"{coord.id} ({coord.host}:{coord.port})",
                "members": members, "offsets": rows,
                "totalLag": sum(r["lag"] or 0 for r in rows)}

    def committed(self, group: str) -> dict[TP, int]:
        req = [ConsumerGroupTopicPartitions(group)]
        res = wait(self.admin.list_consumer_group_offsets(req, request_timeout=TIMEOUT_S)[group],
                   f"cannot read the committed offsets of {group!r}")
        return {(tp.topic, tp.partition): int(tp.offset) for tp in res.topic_partitions or []
                if tp.error is None and tp.offset >= 0}

    def reset_plan(self, group: str, topic: str, strategy: str, value: str) -> list[dict[str, Any]]:
        """The new offsets a reset would commit (Kafka's kafka-consumer-groups.sh rules: offsets
        clamped to [log start, log end], shift-by from the committed offset)."""
        tm = self.topic(topic)
        tps = sorted((topic, p) for p in tm.partitions)
        committed = self.committed(group)
        lo, hi = self.earliest(tps), self.latest(tps)
        if strategy == "earliest":
            new = dict(lo)
        elif strategy == "latest":
            new = dict(hi)
        elif strategy in ("offset", "shift"):
            try:
                n = int(value)
            except ValueError:
                raise ConsoleError(f"{strategy} needs a whole number, got {value!r}") from None
            if strategy == "offset":
                new = {tp: n for tp in tps}
            else:
                missing = [tp for tp in tps if tp not in committed]
                if missing:
                    raise ConsoleError(f"cannot shift partition {missing[0][1]}: the group has no "
                                       "committed offset there")
                new = {tp: committed[tp] + n for tp in tps}
        elif strategy == "timestamp":
            ts = parse_time(value)
            found = self.for_time(tps, ts)
            new = {tp: found[tp] if found.get(tp, -1) >= 0 else hi[tp] for tp in tps}
        else:
            raise ConsoleError(f"unknown reset strategy {strategy!r}")
        rows = []
        for tp in tps:
            want = new[tp]
            off = min(max(want, lo.get(tp, 0)), hi.get(tp, want))
            rows.append({"topic": tp[0], "partition": tp[1], "current": committed.get(tp),
                         "new": off, "clamped": off != want})
        return rows

    def reset_execute(self, group: str, rows: list[dict[str, Any]]) -> None:
        state = self.group_state(group)
        if state not in INACTIVE_GROUP_STATES:
            raise ConsoleError(f"Assignments can only be reset if the group '{group}' is inactive, "
                               f"but the current state is {state}.", 409)
        req = [ConsumerGroupTopicPartitions(group, [TopicPartition(r["topic"], r["partition"], r["new"])
                                                    for r in rows])]
        res = wait(self.admin.alter_consumer_group_offsets(req, request_timeout=TIMEOUT_S)[group],
                   f"cannot reset the offsets of {group!r}")
        bad = [tp for tp in res.topic_partitions or [] if tp.error is not None]
        if bad:
            raise ConsoleError(f"cannot reset {bad[0].topic}/{bad[0].partition}: {bad[0].error.str()}")

    def group_state(self, group: str) -> str:
        try:
            desc = self.admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group] \
                .result(timeout=TIMEOUT_S + 5)
        except KafkaException as e:
            if code_of(e) == KafkaError.GROUP_ID_NOT_FOUND:
                return "DEAD"
            raise ConsoleError(f"cannot describe group {group!r}: {describe(e)}") from None
        return _name(desc.state)

    # -- security --------------------------------------------------------------------------------

    def acls(self) -> list[dict[str, str]] | None:
        """Every ACL binding, or None when the cluster has no authorizer."""
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
        )

        none: Any = None
        flt = AclBindingFilter(ResourceType.ANY, none, ResourcePatternType.ANY, none, none,
                               AclOperation.ANY, AclPermissionType.ANY)
        try:
            res = self.admin.describe_acls(flt, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S + 5)
        except KafkaException as e:
            if code_of(e) == KafkaError.SECURITY_DISABLED:
                return None
            raise ConsoleError(f"cannot list ACLs: {describe(e)}", 403 if code_of(e) ==
                               KafkaError.CLUSTER_AUTHORIZATION_FAILED else 400) from None
        return [{"principal": b.principal, "host": b.host, "operation": _name(b.operation),
                 "permission": _name(b.permission_type), "resourceType": _acl_type_name(b.restype),
                 "name": b.name, "pattern": _name(b.resource_pattern_type)} for b in res]

    def change_acl(self, add: bool, a: dict[str, str]) -> None:
        """Create one ACL binding, or delete exactly the one matching `a` (CreateAcls/DeleteAcls)."""
        from confluent_kafka.admin import (
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
        )

        try:
            rtype = ResourceType[_acl_type(a["resourceType"].upper())]
            op = AclOperation[a["operation"].upper()]
            perm = AclPermissionType[a["permission"].upper()]
            pattern = ResourcePatternType[a.get("pattern", "LITERAL").upper()]
        except KeyError as e:
            raise ConsoleError(f"unknown ACL value {e}") from None
        principal, host, name = a.get("principal", ""), a.get("host") or "*", a.get("name", "")
        if not principal.startswith("User:") or not name:
            raise ConsoleError("an ACL needs a principal (User:name) and a resource name")
        cls: Any = AclBinding if add else AclBindingFilter
        binding: Any = cls(rtype, name, pattern, principal, host, op, perm)
        futs: dict[Any, Any]
        try:
            if add:
                futs = self.admin.create_acls([binding], request_timeout=TIMEOUT_S)
            else:
                futs = self.admin.delete_acls([binding], request_timeout=TIMEOUT_S)
        except (KafkaException, ValueError, TypeError) as e:
            raise ConsoleError(f"bad ACL: {describe(e)}") from None
        for fut in futs.values():
            wait(fut, "cannot create the ACL" if add else "cannot delete the ACL")

    def may_describe_cluster(self) -> bool:
        """Whether this principal holds DESCRIBE on the cluster (DescribeCluster's authorized
        operations). Asked before the ACL and user listings, which need it: confluent-kafka
        2.16 crashes the process on a refused DescribeUserScramCredentials."""
        from confluent_kafka.admin import AclOperation

        try:
            res = self.admin.describe_cluster(include_authorized_operations=True,
                                              request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S + 5)
        except KafkaException as e:
            raise ConsoleError(f"cannot describe the cluster: {describe(e)}") from None
        ops = res.authorized_operations or []
        return AclOperation.DESCRIBE in ops or AclOperation.ALL in ops

    def users(self) -> list[dict[str, Any]]:
        """Every SCRAM user with its credentials [(mechanism, iterations)]. Callers ask
        may_describe_cluster() first when the cluster has an authorizer (see there)."""
        try:
            res = self.admin.describe_user_scram_credentials(request_timeout=TIMEOUT_S)
            res = res.result(timeout=TIMEOUT_S + 5) if hasattr(res, "result") else \
                {u: f.result(timeout=TIMEOUT_S + 5) for u, f in res.items()}
        except KafkaException as e:
            raise ConsoleError(f"cannot list SCRAM users: {describe(e)}") from None
        return [{"user": u, "credentials": [(_name(i.mechanism).replace("_", "-"), int(i.iterations))
                                            for i in d.scram_credential_infos]}
                for u, d in sorted(res.items())]

    def set_scram(self, user: str, mechanism: str, password: str, iterations: int) -> None:
        """Create or replace one SCRAM credential (AlterUserScramCredentials upsertion; the
        client salts and hashes the password, only the salted form is sent). Checked first by
        scram_checks: librdkafka hashes on its own thread, so an unbounded iteration count
        would tie the session's client up. No message here ever carries the password."""
        from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

        scram_checks(user, mechanism, iterations, password)
        try:
            up = UserScramCredentialUpsertion(user, ScramCredentialInfo(_scram_mech(mechanism),
                                                                        iterations), password.encode())
            futs = self.admin.alter_user_scram_credentials([up], request_timeout=TIMEOUT_S)
        except (KafkaException, ValueError, TypeError) as e:
            raise ConsoleError(f"bad SCRAM credential for {user!r}: {_no_secret(e, password)}") from None
        for fut in futs.values():
            _scram_wait(fut, f"cannot set the {mechanism} credential of {user!r}")

    def delete_scram(self, user: str, mechanism: str) -> None:
        """Delete one user's credential for one mechanism (AlterUserScramCredentials deletion)."""
        from confluent_kafka.admin import UserScramCredentialDeletion

        scram_checks(user, mechanism)
        try:
            d = UserScramCredentialDeletion(user, _scram_mech(mechanism))
            futs = self.admin.alter_user_scram_credentials([d], request_timeout=TIMEOUT_S)
        except (KafkaException, ValueError, TypeError) as e:
            raise ConsoleError(f"bad SCRAM deletion for {user!r}: {describe(e)}") from None
        for fut in futs.values():
            _scram_wait(fut, f"cannot delete the {mechanism} credential of {user!r}")

    def close(self) -> None:
        pass


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum, also its default
SCRAM_MAX_ITERATIONS = 16384  # AlterUserScramCredentials refuses more (KIP-554)
MAX_USER_CHARS = 256  # the console's bound on a user name (Kafka sets none)
MAX_PASSWORD_CHARS = 1024  # the console's bound on a password


def scram_checks(user: str, mechanism: str, iterations: int | None = None,
                 password: str | None = None) -> None:
    """The form's values within Kafka's bounds (and the console's length bounds), else a 400 page."""
    if not user:
        raise ConsoleError("a SCRAM credential needs a user name")
    if len(user) > MAX_USER_CHARS:
        raise ConsoleError(f"user names longer than {MAX_USER_CHARS} characters are not accepted here")
    if mechanism not in SCRAM_MECHANISMS:
        raise ConsoleError(f"unknown SCRAM mechanism {mechanism[:40]!r} "
                           f"(use {' or '.join(SCRAM_MECHANISMS)})")
    if iterations is not None and not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
        raise ConsoleError(f"iterations must be between {SCRAM_MIN_ITERATIONS} and "
                           f"{SCRAM_MAX_ITERATIONS} (Kafka's bounds; the default is "
                           f"{SCRAM_MIN_ITERATIONS})")
    if password is not None and not password:
        raise ConsoleError("the password must not be empty")
    if password is not None and len(password) > MAX_PASSWORD_CHARS:
        raise ConsoleError(f"passwords longer than {MAX_PASSWORD_CHARS} characters are not accepted "
                           "here")


def _scram_mech(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    return ScramMechanism.SCRAM_SHA_256 if name == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512


def _scram_wait(fut: Any, what: str) -> None:
    """A credential change's result: the broker's refusal as a page with a fitting status."""
    try:
        fut.result(timeout=TIMEOUT_S + 5)
    except KafkaException as e:
        code = code_of(e)
        status = 403 if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED else \
            404 if code == KafkaError.RESOURCE_NOT_FOUND else 400
        raise ConsoleError(f"{what}: {describe(e)}", status) from None
    except TimeoutError:
        raise ConsoleError(f"{what}: the broker did not answer in time", 504) from None


def _no_secret(e: BaseException, secret: str) -> str:
    """A client error's text with the password cut out, should a client ever quote it."""
    text = describe(e)
    return text.replace(secret, "***") if secret else text


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from epoch-ms digits or an ISO-8601 date-time (UTC unless an
    offset is given)."""
    from datetime import UTC, datetime

    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConsoleError(f"not a time: {text!r} (use 2026-01-31T12:00:00 or epoch milliseconds)") \
            from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _acl_type(name: str) -> str:
    """Kafka's ACL resource type CLUSTER is confluent-kafka's ResourceType.BROKER (both 4)."""
    return "BROKER" if name == "CLUSTER" else name


def _acl_type_name(v: Any) -> str:
    name = _name(v)
    return "CLUSTER" if name == "BROKER" else name


def _name(v: Any) -> str:
    if v is None:
        return "UNKNOWN"
    return str(getattr(v, "name", v))
