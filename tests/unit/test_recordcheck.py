"""The records validator (samsa/protocol/recordcheck.py and its C twin): every corruption class is
rejected with Kafka's error code, real batches pass, and C and Python agree byte for byte."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.protocol import codecs, recordcheck
from samsa.protocol.batch import InvalidBatch, validate_single_batch
from samsa.protocol.records import decode_batch, encode_batch
from tests.corrupt_records import BOMB_SIZE, TS, cases, record, varint

DEFAULT_MAX_MESSAGE_BYTES = 1048588
IMPLS = {"c": recordcheck.check_c, "py": recordcheck.check_py}


def _validate(raw: bytes, impl: str, monkeypatch: pytest.MonkeyPatch,
              want_keyless: bool = False) -> list[int] | None:
    monkeypatch.setattr(recordcheck, "check", IMPLS[impl])
    h = validate_single_batch(raw)
    return recordcheck.validate_records(raw, h, max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES,
                                        want_keyless=want_keyless)


def test_the_compiled_validator_is_built() -> None:
    assert recordcheck.check_c is not None, "run `pip install -e .` (make install) to build it"
    assert recordcheck.check is recordcheck.check_c


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name,build,code", cases(), ids=[c[0] for c in cases()])
def test_each_corruption_class_is_rejected(name: str, build, code: int, impl: str,  # type: ignore[no-untyped-def]
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidBatch) as e:
        _validate(build(), impl, monkeypatch)
    assert e.value.code == code, str(e.value)


_REAL = [
    ("plain", [(b"k1", b"v" * 100, [], TS), (b"k2", b"", [], TS + 5)]),
    ("null key and value", [(None, None, [], TS), (b"k", None, [], TS)]),
    ("headers", [(b"k", b"v", [("h1", b"x"), ("h2", None), ("", b"")], TS)]),
    ("many", [(str(i).encode(), b"x" * (i % 300), [], TS + i) for i in range(500)]),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("codec", sorted(codecs.NAMES))
@pytest.mark.parametrize("name,recs", _REAL, ids=[r[0] for r in _REAL])
def test_real_batches_pass_and_keyless_records_are_found(name: str, recs, codec: int, impl: str,  # type: ignore[no-untyped-def]
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    raw = encode_batch(recs, compression=codec)
    assert _validate(raw, impl, monkeypatch) is None
    expected = [i for i, r in enumerate(recs) if r[0] is None]
    assert _validate(raw, impl, monkeypatch, want_keyless=True) == expected
    assert len(decode_batch(raw)) == len(recs)


def test_client_built_batches_pass() -> None:
    """Batches as librdkafka and kafka-python build them (with their own codecs)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    for codec in (0, 1, 2, 3, 4):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 20)
        for i in range(50):
            b.append(i, timestamp=TS + i, key=b"key%d" % i if i % 3 else None, value=b"v" * i,
                     headers=[("h", b"x")] if i % 2 else [])
        raw = bytes(b.build())
        h = validate_single_batch(raw)
        keyless = recordcheck.validate_records(raw, h, max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES,
                                               want_keyless=True)
        assert keyless == [i for i in range(50) if i % 3 == 0], codec


@pytest.mark.parametrize("fn", [codecs.decompress, codecs.decompress_view], ids=["bytes", "view"])
@pytest.mark.parametrize("codec", [c for c in codecs.NAMES if c != codecs.NONE])
def test_decompression_stops_at_the_limit(codec: int, fn) -> None:  # type: ignore[no-untyped-def]
    good = b"".join(record(i, value=b"x" * 1000) for i in range(3000))  # 3 MB: the buffer grows
    stream = codecs.compress(codec, good)
    assert bytes(fn(codec, stream, len(good))) == good
    with pytest.raises(codecs.CorruptPayload):
        fn(codec, stream, len(good) - 1)
    with pytest.raises(codecs.CorruptPayload):
        fn(codec, stream[:-3], len(good))
    with pytest.raises(codecs.CorruptPayload):
        fn(codec, stream + b"\x00junk", len(good))


def test_decompression_limit_follows_max_message_bytes() -> None:
    assert recordcheck.decompression_limit(DEFAULT_MAX_MESSAGE_BYTES) == 64 * DEFAULT_MAX_MESSAGE_BYTES
    assert recordcheck.decompression_limit(1000) == 1 << 20
    assert recordcheck.decompression_limit(100 << 20) == 256 << 20
    assert BOMB_SIZE > recordcheck.decompression_limit(DEFAULT_MAX_MESSAGE_BYTES)


# -- differential: C and Python give the same answer (same message) on any bytes --

def _outcome(fn, payload: bytes, count: int) -> tuple[str, object]:  # type: ignore[no-untyped-def]
    try:
        return "ok", fn(payload, count, True)
    except ValueError as e:
        return "error", str(e)


_rec = st.tuples(st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), st.binary(max_size=200)),
                 st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
                          max_size=3),
                 st.integers(TS - 10**6, TS + 10**6))
_mutation = st.tuples(st.sampled_from(["flip", "set", "cut", "insert", "delete", "varint"]),
                      st.integers(0, 10**6), st.integers(0, 255))


def _mutate(body: bytes, muts: list[tuple[str, int, int]]) -> bytes:
    b = bytearray(body)
    for kind, pos, val in muts:
        if not b:
            b.append(val)
            continue
        p = pos % len(b)
        if kind == "flip":
            b[p] ^= 1 << (val % 8)
        elif kind == "set":
            b[p] = val
        elif kind == "cut":
            del b[p:]
        elif kind == "insert":
            b.insert(p, val)
        elif kind == "delete":
            del b[p]
        else:  # an over-long or unterminated varint
            b[p:p] = bytes([0x80 | val]) * (val % 12)
    return bytes(b)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(_rec, min_size=1, max_size=8), muts=st.lists(_mutation, max_size=4),
       count_delta=st.sampled_from([0, 0, 0, -1, 1, 2**31 - 1]))
def test_c_and_python_agree_on_generated_and_mutated_records(recs, muts, count_delta) -> None:  # type: ignore[no-untyped-def]
    raw = encode_batch(recs)
    body = _mutate(raw[61:], muts)
    count = max(1, min(len(recs) + count_delta, 2**31 - 1))
    c = _outcome(recordcheck.check_c, body, count)
    py = _outcome(recordcheck.check_py, body, count)
    assert c == py
    if not muts and count_delta == 0:
        assert c == ("ok", [i for i, r in enumerate(recs) if r[0] is None])


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300), count=st.integers(-5, 2**31 - 1))
def test_c_and_python_agree_on_arbitrary_bytes(body: bytes, count: int) -> None:
    assert _outcome(recordcheck.check_c, body, count) == _outcome(recordcheck.check_py, body, count)


_near = st.one_of(st.integers(-3, 3), st.sampled_from([-2**31, 2**31 - 1, -(2**20), 2**20]))
_field_rec = st.tuples(st.one_of(st.none(), st.binary(max_size=12)),
                       st.one_of(st.none(), st.binary(max_size=12)),
                       st.lists(st.tuples(st.binary(max_size=4), st.one_of(st.none(), st.binary(max_size=4))),
                                max_size=2),
                       st.sampled_from([None, "length", "klen", "vlen", "hcount", "delta", "extra",
                                        "klen_end", "vlen_end"]), _near)


def _field_record(i: int, key, value, headers, field, near) -> bytes:  # type: ignore[no-untyped-def]
    """A record whose one chosen field is off by a little (or by a lot) from the truth."""
    true = {"klen": -1 if key is None else len(key), "vlen": -1 if value is None else len(value),
            "hcount": len(headers), "delta": i}
    kw = {}
    if field in true:
        kw[field] = true[field] + near
    elif field == "extra":
        kw["extra"] = bytes(abs(near) % 4)
    if field == "delta":
        return record(i + near, key=key, value=value, headers=tuple(headers))
    hdrs = b"".join(varint(len(k)) + k + varint(-1 if v is None else len(v)) + (v or b"")
                    for k, v in headers)
    tail = varint(len(headers)) + hdrs  # what follows the value
    if field == "vlen_end":  # a value length that reaches (near) the end of the record
        kw["vlen"] = len(value or b"") + len(tail) + near % 3 - 1
    elif field == "klen_end":
        tail = varint(-1 if value is None else len(value)) + (value or b"") + tail
        kw["klen"] = len(key or b"") + len(tail) + near % 3 - 1
    rec = record(i, key=key, value=value, headers=tuple(headers), **kw)  # type: ignore[arg-type]
    if field == "length":
        body_len = len(record(i, key=key, value=value, headers=tuple(headers), length=0)) - 1
        rec = record(i, key=key, value=value, headers=tuple(headers), length=body_len + near)
    return rec


@settings(max_examples=600, deadline=None)
@given(recs=st.lists(_field_rec, min_size=1, max_size=5), count_delta=st.integers(-1, 1))
def test_c_and_python_agree_on_fields_off_by_a_little(recs, count_delta) -> None:  # type: ignore[no-untyped-def]
    body = b"".join(_field_record(i, *r) for i, r in enumerate(recs))
    count = max(1, len(recs) + count_delta)
    c = _outcome(recordcheck.check_c, body, count)
    assert c == _outcome(recordcheck.check_py, body, count)
    if count_delta == 0 and all(r[3] is None or (r[4] == 0 and r[3] in ("klen", "vlen", "hcount", "delta"))
                                for r in recs):
        assert c[0] == "ok"


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from([c for c in codecs.NAMES if c != codecs.NONE]),
       muts=st.lists(_mutation, min_size=1, max_size=3), view=st.booleans())
def test_mutated_streams_decompress_or_fail_as_corrupt(codec: int, muts, view: bool) -> None:  # type: ignore[no-untyped-def]
    """Whatever a stream's bytes, decompression ends in CorruptPayload or output within the limit."""
    data = b"".join(record(i, value=b"abc" * i) for i in range(40))
    stream = _mutate(codecs.compress(codec, data), muts)
    fn = codecs.decompress_view if view else codecs.decompress
    try:
        out = fn(codec, stream, 4 * len(data))
    except codecs.CorruptPayload:
        return
    assert len(out) <= 4 * len(data)


def test_without_the_extension_the_reference_is_used_with_a_warning() -> None:
    import subprocess
    import sys

    code = ("import sys, logging; logging.basicConfig(level=logging.WARNING); "
            "sys.modules['samsa.protocol._recordcheck'] = None; "
            "from samsa.protocol import recordcheck as r; "
            "from tests.corrupt_records import batch, good_body, record; "
            "from samsa.protocol.batch import validate_single_batch, InvalidBatch; "
            "assert r.check is r.check_py and r.check_c is None; "
            "b = batch(record(0, klen=50), 1); h = validate_single_batch(b)\n"
            "try:\n r.validate_records(b, h, max_message_bytes=1 << 20)\n"
            "except InvalidBatch as e:\n print('refused', e.code)")
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]  # `python -c` imports from its working directory
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=root)
    assert out.returncode == 0, out.stderr
    assert "refused 87" in out.stdout
    assert "_recordcheck is not built" in out.stderr
