"""DescribeClientQuotas / AlterClientQuotas against a real broker (raw protocol: neither
confluent-kafka nor kafka-python's admin clients offer them), the `samsa quotas` CLI, Kafka's
error codes for bad requests, and quotas surviving a kill -9 (they live in the metadata log)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.cli.main import main as samsa_main
from samsa.testing import SamsaBroker
from tests.wire import Wire

DESCRIBE, ALTER = 48, 49
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35


@pytest.fixture(scope="module")
def broker() -> Iterator[SamsaBroker]:
    with SamsaBroker(overrides={"quota.window.num": "2"}) as b:
        yield b


def alter(b: Any, entries: list[tuple[list[tuple[str, str | None]],
                                              list[tuple[str, float, bool]]]],
          validate_only: bool = False, version: int = 1) -> list[tuple[int, str | None]]:
    w = Wire(b.bootstrap)
    try:
        resp = w.request(ALTER, version, {
            "entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in ent],
                         "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}
                        for ent, ops in entries],
            "validate_only": validate_only})
    finally:
        w.close()
    return [(int(e.error_code), e.error_message) for e in resp.entries]


def describe(b: Any, comps: list[tuple[str, int, str | None]], strict: bool = False,
             version: int = 1) -> Any:
    w = Wire(b.bootstrap)
    try:
        return w.request(DESCRIBE, version, {
            "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in comps],
            "strict": strict})
    finally:
        w.close()


def as_dict(resp: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: float(v.value) for v in entry.values} for entry in resp.entries}


def test_alter_then_describe_every_entity_kind(broker: SamsaBroker) -> None:
    assert alter(broker, [
        ([("user", "alice")], [("producer_byte_rate", 1024, False)]),
        ([("user", None)], [("consumer_byte_rate", 2048, False)]),
        ([("user", "alice"), ("client-id", "app")], [("request_percentage", 12.5, False)]),
        ([("client-id", None)], [("controller_mutation_rate", 3.5, False)]),
    ]) == [(0, None)] * 4
    everything = as_dict(describe(broker, []))
    assert everything[(("user", "alice"),)] == {"producer_byte_rate": 1024.0}
    assert everything[(("user", None),)] == {"consumer_byte_rate": 2048.0}
    assert everything[(("client-id", "app"), ("user", "alice"))] == {"request_percentage": 12.5}
    assert everything[(("client-id", None),)] == {"controller_mutation_rate": 3.5}
    # EXACT user alice, non-strict: alice alone and alice with a client id
    assert set(as_dict(describe(broker, [("user", 0, "alice")]))) == {
        (("user", "alice"),), (("client-id", "app"), ("user", "alice"))}
    # strict: only entities with exactly the filtered types
    assert set(as_dict(describe(broker, [("user", 0, "alice")], strict=True))) == {
        (("user", "alice"),)}
    assert set(as_dict(describe(broker, [("user", 1, None)], strict=True))) == {(("user", None),)}
    # remove one key: the entity disappears once it has none
    assert alter(broker, [([("user", "alice")], [("producer_byte_rate", 0, True)])]) == [(0, None)]
    assert (("user", "alice"),) not in as_dict(describe(broker, []))


def test_validate_only_changes_nothing(broker: SamsaBroker) -> None:
    assert alter(broker, [([("client-id", "dry")], [("producer_byte_rate", 10, False)])],
                 validate_only=True) == [(0, None)]
    assert as_dict(describe(broker, [("client-id", 0, "dry")])) == {}


@pytest.mark.parametrize(("entity", "ops", "code"), [
    ([], [("producer_byte_rate", 10, False)], INVALID_REQUEST),
    ([("client-id", "x")], [("no_such_quota", 10, False)], INVALID_REQUEST),
    ([("client-id", "x")], [("producer_byte_rate", 10.5, False)], INVALID_REQUEST),
    ([("client-id", "x")], [("consumer_byte_rate", -5, False)], INVALID_REQUEST),
    ([("user", "a"), ("user", "b")], [("producer_byte_rate", 10, False)], INVALID_REQUEST),
    ([("topic", "t")], [("producer_byte_rate", 10, False)], INVALID_REQUEST),
    ([("user", "")], [("producer_byte_rate", 10, False)], INVALID_REQUEST),
])
def test_bad_alter_entries_get_kafkas_errors(broker: SamsaBroker, entity: list[Any],
                                             ops: list[Any], code: int) -> None:
    """A bad entry fails alone: the good entry beside it is applied."""
    good = ([("client-id", f"ok-{code}-{len(entity)}")], [("producer_byte_rate", 7, False)])
    got = alter(broker, [(entity, ops), good])
    assert got[0][0] == code and got[0][1]
    assert got[1] == (0, None)
    assert as_dict(describe(broker, [("client-id", 0, good[0][0][1])])) == {
        (("client-id", good[0][0][1]),): {"producer_byte_rate": 7.0}}


@pytest.mark.parametrize(("comps", "code"), [
    ([("user", 0, None)], INVALID_REQUEST),  # EXACT without a name
    ([("user", 1, "x")], INVALID_REQUEST),  # DEFAULT with a name
    ([("user", 2, None), ("user", 1, None)], INVALID_REQUEST),  # a type twice
    ([("user", 9, None)], INVALID_REQUEST),  # unknown match type
    ([("topic", 2, None)], UNSUPPORTED_VERSION),
])
def test_bad_describe_filters_get_kafkas_errors(broker: SamsaBroker, comps: list[Any],
                                                code: int) -> None:
    resp = describe(broker, comps)
    assert int(resp.error_code) == code and resp.error_message
    assert resp.entries is None


def test_cli_set_and_describe(broker: SamsaBroker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    assert samsa_main(["quotas", "set", "--entity-type", "users", "--entity-name", "bob",
                       "--entity-type", "clients", "--entity-default",
                       "--add-config", "producer_byte_rate=4096,consumer_byte_rate=8192", *bs]) == 0
    assert "user-principal 'bob' and the default client-id" in capsys.readouterr().out
    assert samsa_main(["quotas", "describe", "--entity-type", "users", "--entity-name", "bob",
                       "--entity-type", "clients", "--entity-default", *bs]) == 0
    out = capsys.readouterr().out
    assert ("Quota configs for user-principal 'bob' and the default client-id are "
            "consumer_byte_rate=8192.0, producer_byte_rate=4096.0") in out
    assert samsa_main(["quotas", "set", "--entity-type", "users", "--entity-name", "bob",
                       "--entity-type", "clients", "--entity-default",
                       "--delete-config", "consumer_byte_rate", *bs]) == 0
    capsys.readouterr()
    assert samsa_main(["quotas", "describe", "--entity-type", "users", "--entity-name", "bob",
                       "--entity-type", "clients", "--entity-default", *bs]) == 0
    out = capsys.readouterr().out
    assert "producer_byte_rate=4096.0" in out and "consumer_byte_rate" not in out
    # a bad key: Kafka's message, a failing exit code
    assert samsa_main(["quotas", "set", "--entity-type", "clients", "--entity-name", "c",
                       "--add-config", "bogus_rate=1", *bs]) == 1
    assert "Invalid configuration key bogus_rate" in capsys.readouterr().err


def _throttle_seen(bootstrap: str, client_id: str, seconds: float) -> int:
    """Produce as client_id for up to `seconds`; the largest throttle librdkafka reports."""
    seen = [0]

    def stats(text: str) -> None:
        for b in json.loads(text).get("brokers", {}).values():
            seen[0] = max(seen[0], int(b.get("throttle", {}).get("max", 0)))

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "statistics.interval.ms": 200, "stats_cb": stats})
    deadline = time.monotonic() + seconds
    payload = b"x" * 1024
    while time.monotonic() < deadline and not seen[0]:
        try:
            p.produce("quota-restart", payload)
        except BufferError:
            pass
        p.poll(0.01)
    p.flush(10)
    return seen[0]


def test_quotas_survive_kill_and_still_throttle() -> None:
    """After a kill -9 the quotas are back from the metadata log and enforced in Kafka's order:
    the (user ANONYMOUS, client-id tiny) quota beats the user's own, which applies to the other
    client ids of that user (every unauthenticated client is User:ANONYMOUS)."""
    with SamsaBroker(overrides={"quota.window.num": "2"}) as b:
        assert alter(b, [([("user", "ANONYMOUS"), ("client-id", "tiny")],
                          [("producer_byte_rate", 20_000, False)]),
                         ([("user", "ANONYMOUS")], [("producer_byte_rate", 1e12, False)])]) \
            == [(0, None)] * 2
        b.restart(hard=True)  # kill -9
        got = as_dict(describe(b, []))
        assert got == {(("client-id", "tiny"), ("user", "ANONYMOUS")):
                       {"producer_byte_rate": 20_000.0},
                       (("user", "ANONYMOUS"),): {"producer_byte_rate": 1e12}}
        assert _throttle_seen(b.bootstrap, "tiny", 20.0) > 0
        assert _throttle_seen(b.bootstrap, "other", 2.0) == 0


def test_controller_mutation_rate_refuses_strict_requests_in_debt(broker: SamsaBroker) -> None:
    """KIP-599: 2 partitions/s (a burst of samples x window x rate = 4). In one CreateTopics v7
    request a 24-partition topic puts the client in debt, so the next topic fails with
    THROTTLING_QUOTA_EXCEEDED and the answer carries a throttle time (the connection is then
    muted for it); a v5 request (not strict) from another connection is served in debt."""
    assert alter(broker, [([("client-id", "wire-test")],
                           [("controller_mutation_rate", 2, False)])]) == [(0, None)]

    def create(version: int, topics: list[tuple[str, int]]) -> Any:
        w = Wire(broker.bootstrap)
        try:
            return w.request(19, version, {"topics": [{
                "name": name, "num_partitions": n, "replication_factor": 1, "assignments": [],
                "configs": []} for name, n in topics], "timeout": 30_000, "validate_only": False})
        finally:
            w.close()

    try:
        strict = create(7, [("mut-1", 24), ("mut-2", 1)])
        assert [int(t.error_code) for t in strict.topics] == [0, 89]
        assert strict.topics[1].error_message == "The throttling quota has been exceeded."
        assert strict.throttle_time.total_seconds() > 0
        lenient = create(5, [("mut-3", 1), ("mut-4", 1)])
        assert [int(t.error_code) for t in lenient.topics] == [0, 0]
        assert lenient.throttle_time.total_seconds() > 0
    finally:
        alter(broker, [([("client-id", "wire-test")], [("controller_mutation_rate", 0, True)])])
