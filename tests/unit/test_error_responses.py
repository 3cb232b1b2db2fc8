"""Every served API version's error response (Kafka's getErrorResponse) encodes and decodes.

For each API key and version Samsa serves, a sample request naming two of everything (topics,
partitions, groups, resources...) is encoded with kio, decoded by Samsa's guarded decoder, answered
by `error_response`, encoded by Samsa's response encoder and decoded back with the response schema:
every error code in it is UNKNOWN_SERVER_ERROR (-1), and the versions that carry an error field
carry at least one. Focused tests check that the entities a request named are answered (Produce,
Metadata, Fetch) and that acks=0 Produce has no answer.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from samsa.protocol import apis
from samsa.protocol.codec import Chunks, build, decode_request, encode_response
from samsa.protocol.error_responses import BUILDERS, error_response

ALL: dict[int, tuple[int, int]] = {**apis.SUPPORTED}
for _k, (_lo, _hi) in apis.CONTROLLER_SUPPORTED.items():
    lo, hi = ALL.get(_k, (_lo, _hi))
    ALL[_k] = (min(lo, _lo), max(hi, _hi))

CASES = [(k, v) for k, (lo, hi) in sorted(ALL.items()) for v in range(lo, hi + 1)]

# Kafka's error response for these versions has no error field at all (an empty answer)
NO_ERROR_FIELD = {(apis.DESCRIBE_LOG_DIRS, 1), (apis.DESCRIBE_LOG_DIRS, 2)}


def _sample(cls: type, depth: int = 0) -> Any:
    """A request entity with every array holding two elements, strings and ids set."""
    data: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        ktype = f.metadata.get("kafka_type", "")
        if isinstance(kind, EntityTupleField):
            data[f.name] = [_sample(kind.type_, depth + 1) for _ in range(2)]
        elif isinstance(kind, EntityField):
            data[f.name] = _sample(kind.type_, depth + 1)
        elif getattr(kind, "is_array", False):
            one = {"string": "g", "uuid": uuid.uuid4()}.get(ktype, 1)
            data[f.name] = [one if ktype != "string" else f"g{i}" for i in range(2)]
        elif ktype == "string":
            data[f.name] = f"s{depth}"
        elif ktype == "uuid":
            data[f.name] = uuid.uuid4()
        elif ktype in ("bytes", "records"):
            data[f.name] = b""
        elif ktype == "bool":
            data[f.name] = False
        elif ktype in ("int8", "int16", "int32", "int64"):
            data[f.name] = 1  # acks=1 (acks=0 has no answer), key_type group...
    return build(cls, data)


def _frame(key: int, version: int, body: Any) -> bytes:
    req_cls = load_request_schema(key, version)
    hdr_cls = req_cls.__header_schema__
    out = Chunks()
    entity_writer(hdr_cls)(out, build(hdr_cls, {"request_api_key": key,
                                                "request_api_version": version,
                                                "correlation_id": 7, "client_id": "t"}))
    entity_writer(req_cls)(out, body)
    return b"".join(out)


def _error_codes(obj: Any) -> list[int]:
    out: list[int] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            if value is not None:
                out.append(int(value))
        elif isinstance(value, tuple):
            for v in value:
                if dataclasses.is_dataclass(v):
                    out += _error_codes(v)
        elif dataclasses.is_dataclass(value):
            out += _error_codes(value)
    return out


def test_every_served_api_has_an_error_response() -> None:
    assert set(ALL) <= set(BUILDERS)


@pytest.mark.parametrize(("key", "version"), CASES)
def test_error_response_round_trip(key: int, version: int) -> None:
    req_cls = load_request_schema(key, version)
    frame = _frame(key, version, _sample(req_cls))
    _, body = decode_request(key, version, frame)
    answer = error_response(key, version, body)
    assert answer is not None
    chunks = encode_response(key, version, 7, answer)
    data = b"".join(chunks)
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    resp_cls = load_response_schema(key, version)
    hdr, n = entity_reader(resp_cls.__header_schema__)(data[4:], 0)
    assert hdr.correlation_id == 7
    resp, _ = entity_reader(resp_cls)(data[4:], n)
    codes = _error_codes(resp)
    assert all(c == -1 for c in codes), codes
    if (key, version) not in NO_ERROR_FIELD:
        assert codes, f"api {key} v{version}: no error field set"


def _names(resp: Any, field: str) -> list[Any]:
    return [getattr(x, field) for x in resp]


def _decoded(key: int, version: int, body: dict[str, Any]) -> Any:
    req_cls = load_request_schema(key, version)
    _, req = decode_request(key, version, _frame(key, version, build(req_cls, body)))
    data = b"".join(encode_response(key, version, 1, error_response(key, version, req)))
    resp_cls = load_response_schema(key, version)
    _, n = entity_reader(resp_cls.__header_schema__)(data[4:], 0)
    return entity_reader(resp_cls)(data[4:], n)[0]


def test_produce_answers_every_partition_and_acks0_has_none() -> None:
    body = {"acks": -1, "timeout": 1000, "topic_data": [
        {"name": "a", "partition_data": [{"index": 0, "records": b""},
                                         {"index": 3, "records": b""}]},
        {"name": "b", "partition_data": [{"index": 1, "records": b""}]}]}
    resp = _decoded(apis.PRODUCE, 9, body)
    assert _names(resp.responses, "name") == ["a", "b"]
    parts = resp.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(0, -1, -1), (3, -1, -1)]
    req_cls = load_request_schema(apis.PRODUCE, 9)
    _, req = decode_request(apis.PRODUCE, 9, _frame(apis.PRODUCE, 9,
                                                    build(req_cls, {**body, "acks": 0})))
    assert error_response(apis.PRODUCE, 9, req) is None


def test_metadata_names_the_requested_topics() -> None:
    resp = _decoded(apis.METADATA, 12, {"topics": [{"name": "x"}, {"name": "y"}]})
    assert [(t.name, t.error_code) for t in resp.topics] == [("x", -1), ("y", -1)]


def test_fetch_old_versions_answer_partitions_new_ones_the_top_level() -> None:
    old = _decoded(apis.FETCH, 12, {"max_bytes": 1, "topics": [
        {"topic": "t", "partitions": [{"partition": 2, "fetch_offset": 0}]}]})
    assert old.error_code == -1
    assert [(p.partition_index, p.error_code, p.high_watermark)
            for p in old.responses[0].partitions] == [(2, -1, -1)]
    new = _decoded(apis.FETCH, 16, {"max_bytes": 1, "topics": [
        {"topic_id": uuid.uuid4(), "partitions": [{"partition": 2, "fetch_offset": 0}]}]})
    assert new.error_code == -1 and new.responses == ()


def test_failure_log_keeps_one_stack_per_api_and_error_type(
        caplog: pytest.LogCaptureFixture) -> None:
    from samsa.broker.server import _FailureLog

    flog = _FailureLog()
    caplog.set_level("DEBUG", logger="samsa.server")
    for _ in range(50):  # a client retrying a failing request in a tight loop
        flog.log(2, 7, RuntimeError("boom"), "answered UNKNOWN_SERVER_ERROR")
    flog.log(2, 7, ValueError("other"), "answered UNKNOWN_SERVER_ERROR")
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 2 and all(r.exc_info for r in errors)
    assert sum(r.levelname == "DEBUG" for r in caplog.records) == 49
    caplog.clear()
    flog.last = {k: (at - flog.STACK_EVERY, n) for k, (at, n) in flog.last.items()
                 if at is not None}  # the window passed
    flog.log(2, 7, RuntimeError("boom"), "answered UNKNOWN_SERVER_ERROR")
    [r] = caplog.records
    assert r.levelname == "ERROR" and "49 more such failures" in r.getMessage()
