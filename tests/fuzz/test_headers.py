"""Request-header abuse: unknown API keys, unsupported versions, bad client ids, tagged-field garbage.

Kafka's answers: an unknown key or an unsupported version closes the connection, except ApiVersions,
which answers UNSUPPORTED_VERSION (35) with the supported ranges; a null or long client id is
valid; unknown tagged fields are skipped (KIP-482); a header that cannot be parsed closes.
"""

from __future__ import annotations

import random
import struct

import pytest

from samsa.protocol import apis
from samsa.protocol.varint import uvarint
from samsa.testing import SamsaBroker

from ._support import Health, connect, correlation_of, frame, read_answer

pytestmark = pytest.mark.timeout(240)


def _legacy_str(b: bytes | None) -> bytes:
    return struct.pack(">h", -1) if b is None else struct.pack(">h", len(b)) + b


APIV3_BODY = uvarint(5) + b"fuzz" + uvarint(2) + b"1" + b"\x00"  # name, version, no tags


def api_versions_v3(client_id: bytes | None = b"fuzz", tags: bytes = b"\x00", corr: int = 7,
                    body: bytes = APIV3_BODY, raw_client_id: bytes | None = None) -> bytes:
    """ApiVersions v3 with header v2, every part chosen by the caller."""
    cid = raw_client_id if raw_client_id is not None else _legacy_str(client_id)
    return frame(struct.pack(">hhi", 18, 3, corr) + cid + tags + body)


def _send(broker: SamsaBroker, data: bytes, timeout: float = 5) -> tuple[str, bytes | None]:
    s = connect(broker.bootstrap)
    try:
        s.sendall(data)
        try:
            ans = read_answer(s, timeout)
            return ("closed", None) if ans is None else ("answered", ans)
        except TimeoutError:
            return "silent", None
        except OSError:
            return "closed", None
    finally:
        s.close()


def test_unknown_api_keys_close(fuzz_broker: SamsaBroker, health: Health) -> None:
    served = set(apis.SUPPORTED)
    keys = [k for k in [-1, -32768, 32767, 93, 999, 4, 5, 6, 7, 17, 36, 50, 67, 74]
            if k not in served] + [k for k in range(0, 95) if k not in served][:20]
    failures = []
    for key in dict.fromkeys(keys):
        data = frame(struct.pack(">hhi", key, 0, 1) + _legacy_str(b"fuzz") + b"\x00" * 16)
        got, _ = _send(fuzz_broker, data)
        if got != "closed":
            failures.append(f"api key {key}: {got}; frame {data.hex()}")
    assert not failures, "\n".join(failures)
    health.check("unknown api keys")


def test_unsupported_versions(fuzz_broker: SamsaBroker, health: Health) -> None:
    failures = []
    for key, (lo, hi) in sorted(apis.SUPPORTED.items()):
        for v in dict.fromkeys([lo - 1, hi + 1, -1, 32767, -32768]):
            if lo <= v <= hi:
                continue
            data = frame(struct.pack(">hhi", key, v, 5) + _legacy_str(b"fuzz") + b"\x00" * 16)
            got, ans = _send(fuzz_broker, data)
            if key == apis.API_VERSIONS:
                ok = got == "answered" and ans is not None and \
                    struct.unpack_from(">ih", ans, 0) == (5, 35)
            else:
                ok = got == "closed"
            if not ok:
                failures.append(f"api {key} v{v}: {got}; frame {data.hex()}")
    assert not failures, "\n".join(failures)
    health.check("unsupported versions")


def test_client_ids(fuzz_broker: SamsaBroker, health: Health) -> None:
    """Null and 32,767-byte client ids are valid (answered); invalid UTF-8 is answered or closed;
    a length that is negative (not -1) or past the frame's end closes."""
    failures = []
    for name, cid in [("null", None), ("empty", b""), ("huge", b"c" * 32767),
                      ("nul bytes", b"a\x00b")]:
        got, ans = _send(fuzz_broker, api_versions_v3(client_id=cid))
        if got != "answered" or correlation_of(ans or b"\0\0\0\0") != 7:
            failures.append(f"client id {name}: {got}")
    for name, cid in [("invalid utf-8", b"\xff\xfe\xc3\x28"), ("lone surrogate", b"\xed\xa0\x80"),
                      ("overlong", b"\xc0\xaf")]:
        data = api_versions_v3(client_id=cid)
        got, _ = _send(fuzz_broker, data)
        if got == "silent":
            failures.append(f"client id {name}: silent; frame {data.hex()}")
    for name, raw in [("length -2", struct.pack(">h", -2)), ("length -32768", struct.pack(">h", -32768)),
                      ("length past end", struct.pack(">h", 30000) + b"abc")]:
        data = api_versions_v3(raw_client_id=raw)
        got, _ = _send(fuzz_broker, data)
        if got == "silent" or (got == "answered" and name == "length past end"):
            failures.append(f"client id {name}: {got}; frame {data.hex()}")
    assert not failures, "\n".join(failures)
    health.check("client ids")


def test_tagged_field_garbage(fuzz_broker: SamsaBroker, health: Health, rng: random.Random) -> None:
    """Header v2 tagged fields: unknown tags with well-formed sizes are skipped (answered); counts
    and sizes past the end, or varints that never end, close. Never a hang."""
    failures = []
    must_answer = {
        "one unknown tag": uvarint(1) + uvarint(99) + uvarint(3) + b"abc",
        "unknown tag 2^31-1": uvarint(1) + uvarint(2**31 - 1) + uvarint(0),
        "three unknown tags": uvarint(3) + b"".join(uvarint(t) + uvarint(1) + b"x"
                                                   for t in (10, 20, 30)),
    }
    may_close = {
        "count 2^32-1": uvarint(2**32 - 1),
        "count 2^31-1": uvarint(2**31 - 1),
        "size past end": uvarint(1) + uvarint(99) + uvarint(100000) + b"abc",
        "size 2^32-1": uvarint(1) + uvarint(5) + uvarint(2**32 - 1),
        "unterminated varint": b"\xff" * 12,
        "varint 10 bytes": b"\x81" * 9 + b"\x01",
        "tags out of order": uvarint(2) + uvarint(9) + uvarint(0) + uvarint(3) + uvarint(0),
        "duplicate tag": uvarint(2) + uvarint(9) + uvarint(0) + uvarint(9) + uvarint(0),
    }
    for _ in range(30):  # random tag sections
        n = rng.randrange(0, 6)
        may_close[f"random {_}"] = uvarint(n) + bytes(rng.getrandbits(8)
                                                      for _ in range(rng.randrange(0, 40)))
    for name, tags in {**must_answer, **may_close}.items():
        data = api_versions_v3(tags=tags)
        got, ans = _send(fuzz_broker, data)
        if got == "silent" or (name in must_answer and got != "answered"):
            failures.append(f"header tags {name}: {got}; frame {data.hex()}")
        # the same garbage in the body's tag section
        data = api_versions_v3(body=APIV3_BODY[:-1] + tags)
        got, ans = _send(fuzz_broker, data)
        if got == "silent" or (name in must_answer and got != "answered"):
            failures.append(f"body tags {name}: {got}; frame {data.hex()}")
    assert not failures, "\n".join(failures)
    health.check("tagged fields")
