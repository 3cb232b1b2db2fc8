"""Client quotas without a broker: the metadata record, the image, Kafka's precedence order, the
DescribeClientQuotas filter, AlterClientQuotas checks and the windowed rate and throttle time."""

from __future__ import annotations

import pytest

from samsa.cluster.metadata.image import MetadataImage
from samsa.cluster.metadata.records import ClientQuotaRecord, decode, encode
from samsa.protocol.errors import Err
from samsa.security.quotas import (
    CLIENT_ID,
    USER,
    QuotaError,
    QuotaManager,
    Rate,
    alter_records,
    check_entity,
    describe,
    resolve,
)


def test_record_round_trip_and_bytes() -> None:
    r = ClientQuotaRecord(((USER, "alice"), (CLIENT_ID, None)), "producer_byte_rate", 1024.0)
    b = encode(r)
    assert decode(b) == r
    # frame 1, type 14, version 0 (Kafka: not flexible): int32 count, int16-length strings, -1
    # for the default's null name, float64, bool, no tagged fields
    assert b == (bytes([1, 14, 0]) + b"\x00\x00\x00\x02" + b"\x00\x04user\x00\x05alice"
                 + b"\x00\x09client-id\xff\xff" + b"\x00\x12producer_byte_rate"
                 + b"\x40\x90\x00\x00\x00\x00\x00\x00" + b"\x00")
    # v1 (flexible) is read too
    v1 = (bytes([1, 14, 1]) + b"\x02" + b"\x05user\x06alice\x00" + b"\x13producer_byte_rate"
          + b"\x40\x90\x00\x00\x00\x00\x00\x00" + b"\x01" + b"\x00")
    assert decode(v1) == ClientQuotaRecord(((USER, "alice"),), "producer_byte_rate", 1024.0, True)
    gone = ClientQuotaRecord(((CLIENT_ID, "c"),), "consumer_byte_rate", 0.0, True)
    assert decode(encode(gone)) == gone


def test_image_applies_removes_and_snapshots() -> None:
    img = MetadataImage()
    img.apply(ClientQuotaRecord(((CLIENT_ID, "c"), (USER, "u")), "producer_byte_rate", 10.0))
    img.apply(ClientQuotaRecord(((USER, "u"), (CLIENT_ID, "c")), "consumer_byte_rate", 20.0))
    key = ((CLIENT_ID, "c"), (USER, "u"))
    assert img.client_quotas == {key: {"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0}}
    copy = MetadataImage()
    for rec in img.to_records():
        copy.apply(rec)
    assert copy.client_quotas == img.client_quotas
    img.apply(ClientQuotaRecord(key, "producer_byte_rate", 0.0, True))
    img.apply(ClientQuotaRecord(key, "consumer_byte_rate", 0.0, True))
    assert img.client_quotas == {}


def test_precedence_is_kafkas() -> None:
    """The most specific entity that sets the key wins; each key resolves on its own."""
    order = [((CLIENT_ID, None),), ((CLIENT_ID, "c"),), ((USER, None),),
             ((CLIENT_ID, None), (USER, None)), ((CLIENT_ID, "c"), (USER, None)),
             ((USER, "u"),), ((CLIENT_ID, None), (USER, "u")), ((CLIENT_ID, "c"), (USER, "u"))]
    quotas: dict = {}
    for i, entity in enumerate(order):
        quotas[entity] = {"producer_byte_rate": float(i + 1)}
        found = resolve(quotas, "u", "c", "producer_byte_rate")
        assert found == (entity, float(i + 1))
    assert resolve(quotas, "u", "c", "consumer_byte_rate") is None
    # another user and client fall back to the defaults
    assert resolve(quotas, "v", "d", "producer_byte_rate") == (order[3], 4.0)
    quotas[((CLIENT_ID, "c"), (USER, "u"))]["consumer_byte_rate"] = 5.0
    assert resolve(quotas, "u", "c", "consumer_byte_rate") == (order[7], 5.0)


@pytest.mark.parametrize(("entity", "code"), [
    ([], Err.INVALID_REQUEST),
    ([("ip", "1.2.3.4")], Err.INVALID_REQUEST),
    ([("group", "g")], Err.INVALID_REQUEST),
    ([("client-id", "")], Err.INVALID_REQUEST),
    ([(USER, "a"), (USER, "b")], Err.INVALID_REQUEST),
])
def test_bad_entities(entity: list, code: int) -> None:
    with pytest.raises(QuotaError) as e:
        check_entity(entity)
    assert e.value.code == code


@pytest.mark.parametrize(("key", "value"), [("no_such_quota", 1.0),
                                            ("producer_byte_rate", 1.5),
                                            ("consumer_byte_rate", -1.0),
                                            ("request_percentage", float("nan"))])
def test_bad_ops(key: str, value: float) -> None:
    with pytest.raises(QuotaError) as e:
        alter_records(((USER, "a"),), [(key, value, False)])
    assert e.value.code == Err.INVALID_REQUEST


def test_describe_filters() -> None:
    img = MetadataImage()
    for entity in [((USER, "a"),), ((USER, None),), ((CLIENT_ID, "c"), (USER, "a")),
                   ((CLIENT_ID, None),)]:
        img.apply(ClientQuotaRecord(entity, "request_percentage", 50.0))
    names = lambda comps, strict: sorted(map(str, (e for e, _ in describe(img, comps, strict))))  # noqa: E731
    assert names([(USER, 0, "a")], True) == [str(((USER, "a"),))]
    assert len(describe(img, [(USER, 0, "a")], False)) == 2
    assert names([(USER, 1, None)], True) == [str(((USER, None),))]
    assert len(describe(img, [(USER, 2, None)], True)) == 2
    assert len(describe(img, [], False)) == 4
    for comps in ([(USER, 0, None)], [(USER, 1, "x")], [(USER, 2, "x")], [(USER, 7, None)],
                  [(USER, 2, None), (USER, 1, None)], [("ip", 2, None), (USER, 2, None)]):
        with pytest.raises(QuotaError) as e:
            describe(img, comps, False)
        assert e.value.code == Err.INVALID_REQUEST
    with pytest.raises(QuotaError) as e:
        describe(img, [("group", 2, None)], False)
    assert e.value.code == Err.UNSUPPORTED_VERSION


def test_rate_window_and_throttle_time() -> None:
    """Kafka's Rate: the window is at least samples - 1 windows; the throttle time brings the
    rate back to the bound: (rate - bound) / bound * window."""
    now = [100.0]
    q = QuotaManager(samples=11, window_s=1.0, clock=lambda: now[0])
    q.update({((CLIENT_ID, "c"),): {"producer_byte_rate": 1000.0}})
    s = q.sensor("producer_byte_rate", "ANONYMOUS", "c")
    assert s is not None and q.sensor("producer_byte_rate", "ANONYMOUS", "other") is None
    assert q.record(s, 10_000) == 0  # 10 000 B over a 10 s window: exactly the bound
    ms = q.record(s, 5_000)  # 15 000 B / 10 s = 1500 B/s: half over, for 10 s
    assert ms == 5000
    now[0] += 5.0  # 5 s in, the window is still the 10 s minimum
    assert s.rate.measure(now[0]) == 1500.0 and q.peek(s) == 5000
    now[0] += 6.5  # the only sample is now older than 11 windows: forgotten
    assert s.rate.measure(now[0]) == 0.0 and q.peek(s) == 0
    # samples older than samples * window are forgotten
    r = Rate(2, 1.0)
    r.record(100, 0.0)
    r.record(100, 1.5)
    assert r.measure(1.9) == 200 / 1.9  # both samples, over the time since the first
    assert r.measure(2.0) == 100 / 1.5  # the first expired (2 windows old): the window is
    # then the 0.5 s since the second plus the missing full window
    r.record(0, 3.0)
    assert r.values == [100, 0]


def test_updates_keep_rates_and_drop_removed() -> None:
    q = QuotaManager()
    entity = ((USER, "u"),)
    q.update({entity: {"consumer_byte_rate": 10.0}})
    s = q.sensor("consumer_byte_rate", "u", "any")
    q.update({entity: {"consumer_byte_rate": 20.0}})
    assert q.sensor("consumer_byte_rate", "u", "any") is s and s is not None
    assert s.bound == 20.0
    q.update({})
    assert not q.active and q.sensor("consumer_byte_rate", "u", "any") is None


def test_token_bucket_debt_and_refill() -> None:
    from samsa.security.quotas import TokenBucket

    b = TokenBucket(2.0, 4.0, 0.0)
    assert b.throttle_ms(0.0) == 0
    b.take(5, 0.0)  # one token in debt: half a second at 2/s
    assert b.throttle_ms(0.0) == 500
    assert b.throttle_ms(0.5) == 0
    assert b.throttle_ms(100.0) == 0 and b.tokens == 4.0  # never above the burst
