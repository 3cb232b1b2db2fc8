"""The long fuzz run, behind SAMSA_FUZZ_LONG=1 (figures in docs/benchmarks.md, "Fuzzing").

1. Property-based (hypothesis) against the request decoding path the server uses
   (samsa.protocol.codec.decode_request, which runs the request guard first once it exists):
   structure-aware mutations of valid requests of every served API and version. Property: decoding
   returns or raises; it never takes the process down (decoding runs in a worker process, restarted
   after a death, so every killer frame is recorded).
2. A campaign against a live broker: the mutation plan of test_bodies.py over many seeds, the broker
   restarted after every death; every distinct failure (death, Traceback, silence) is reported once.
3. A property on Produce against a live broker (SAMSA_FUZZ_EXAMPLES / 4 batches): drawn records,
   mutated or not, in every codec, with valid header and CRC: success moves the log end by exactly
   the batch's count, a refusal is CORRUPT_MESSAGE / INVALID_RECORD and moves nothing, and a
   consumer reading everything accepted (CRC checks on) meets no corrupt record.

    SAMSA_FUZZ_LONG=1 [SAMSA_FUZZ_EXAMPLES=20000] [SAMSA_FUZZ_LONG_S=300] [SAMSA_FUZZ_SEED=n] \
        pytest -s tests/fuzz/test_long.py
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import time
from functools import cache

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from samsa.protocol import apis
from samsa.protocol.records import encode_batch

from ._campaign import Campaign
from ._mutate import BIG, Request, build_request, mutations, read_uvarint, uvarint
from ._support import DATA_TOPIC, SEED

pytestmark = [
    pytest.mark.skipif(os.environ.get("SAMSA_FUZZ_LONG") != "1", reason="set SAMSA_FUZZ_LONG=1"),
    pytest.mark.slow,
    pytest.mark.timeout(0),
]

EXAMPLES = int(os.environ.get("SAMSA_FUZZ_EXAMPLES", "20000"))
LIVE_BUDGET_S = float(os.environ.get("SAMSA_FUZZ_LONG_S", "300"))
RECORDS = encode_batch([(b"k", b"v" * 30, [("h", b"x")], 1_700_000_000_000)])
SERVED = sorted((k, v) for k, (lo, hi) in apis.SUPPORTED.items() for v in range(lo, hi + 1))


@cache
def sample_request(key: int, version: int) -> Request:
    return build_request(key, version, DATA_TOPIC, RECORDS, correlation_id=0x5A5A)


class Worker:
    """The decode worker process; restarted when a frame kills it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.deaths = 0

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        return subprocess.Popen([sys.executable, "-m", "tests.fuzz._decode_worker"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env)

    def decode(self, key: int, version: int, frame: bytes) -> tuple[int, str]:
        """(status, message); status -1 when the worker died on this frame."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(struct.pack(">hhI", key, version, len(frame)) + frame)
            self.proc.stdin.flush()
            head = self.proc.stdout.read(3)
            if len(head) < 3:
                raise BrokenPipeError
            status, n = struct.unpack(">BH", head)
            return status, self.proc.stdout.read(n).decode(errors="replace")
        except BrokenPipeError:
            self.proc.wait(30)
            code = self.proc.returncode
            self.proc = None
            self.deaths += 1
            return -1, f"worker died (exit {code})"

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


@st.composite
def mutated_frames(draw: st.DrawFn) -> tuple[int, int, str, bytes]:
    """(key, version, label, frame payload without length prefix)."""
    key, version = draw(st.sampled_from(SERVED))
    req = sample_request(key, version)
    body = bytearray(req.body.body)
    marks = req.body.marks
    kind = draw(st.sampled_from(["flip", "count", "length", "truncate", "splice", "tagged"]
                                if marks else ["flip", "truncate", "splice"]))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            if body:
                p = draw(st.integers(0, len(body) - 1))
                body[p] ^= 1 << draw(st.integers(0, 7))
    elif kind in ("count", "length"):
        candidates = [m for m in marks if (m.kind[0] == "a") == (kind == "count")] or marks
        mk = draw(st.sampled_from(candidates))
        if mk.kind in ("a32", "s32"):
            new = struct.pack(">i", draw(st.sampled_from([-1, -2, 0x7FFFFFFF, -(2**31), 0, 1, BIG])
                                         | st.integers(-(2**31), 2**31 - 1)))
            old = 4
        elif mk.kind == "s16":
            new = struct.pack(">h", draw(st.integers(-(2**15), 2**15 - 1)))
            old = 2
        else:
            raw = draw(st.sampled_from([0, 1, 2**31, 2**32 - 1, 2**35]) | st.integers(0, 2**40))
            new = uvarint(raw) if draw(st.booleans()) else b"\xff" * draw(st.integers(1, 12))
            old = read_uvarint(bytes(body), mk.pos)[1] - mk.pos
        body = body[: mk.pos] + new + body[mk.pos + old :]
    elif kind == "truncate":
        body = body[: draw(st.integers(0, len(body)))]
    elif kind == "splice":
        p = draw(st.integers(0, len(body)))
        body = body[:p] + draw(st.binary(max_size=64)) + body[p:]
    else:  # a tag section with garbage where the body ends (flexible versions)
        body = body[:-1] + draw(st.binary(max_size=32))
    return key, version, kind, req.header + bytes(body)


def test_decode_path_survives_mutations() -> None:
    worker = Worker()
    stats = {"decoded": 0, "guard rejected": 0, "other exception": 0, "died": 0}
    killers: dict[str, str] = {}
    others: dict[str, str] = {}
    start = time.monotonic()

    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_frames())
    def prop(case: tuple[int, int, str, bytes]) -> None:
        key, version, kind, frame = case
        status, msg = worker.decode(key, version, frame)
        name = {0: "decoded", 1: "guard rejected", 2: "other exception", -1: "died"}[status]
        stats[name] += 1
        if status == -1:
            killers.setdefault(f"api {key} v{version} {kind}",
                               (struct.pack(">i", len(frame)) + frame)[:200].hex())
        elif status == 2:
            others.setdefault(msg.split(":")[0] + f" (api {key})", msg[:160])

    try:
        prop()
    finally:
        worker.close()
    took = time.monotonic() - start
    print(f"\ndecode property: {sum(stats.values())} frames in {took:.0f}s, seed {SEED}, {stats}")
    for k, v in list(others.items())[:20]:
        print(f"  exception after the guard: {k}: {v}")
    for k, v in list(killers.items())[:20]:
        print(f"  KILLER {k}: {v}")
    assert not killers, f"{len(killers)} kinds of frames kill the decoding process"


def test_live_broker_campaign() -> None:
    rng = random.Random(SEED)
    items: list[tuple[int, str, bytes]] = []
    rounds = 0
    while len(items) < 40_000:  # plenty for the budget; the campaign stops when time is up
        rounds += 1
        for key, (lo, hi) in sorted(apis.SUPPORTED.items()):
            for v in sorted({lo, hi, rng.randint(lo, hi)}):
                req = sample_request(key, v)
                items += [(key, f"api {key} v{v} {label}", fr) for label, fr in mutations(req, rng)]
    rng.shuffle(items)
    c = Campaign()
    start = time.monotonic()
    c.run(items, LIVE_BUDGET_S, correlation_id=0x5A5A)
    print(f"\nlive campaign: {time.monotonic() - start:.0f}s, seed {SEED}\n{c.report()}")
    assert not c.findings, c.report()


@st.composite
def mutated_batches(draw: st.DrawFn) -> tuple[str, bytes, int]:
    """(label, records field, the header's record count): a batch of 1-5 drawn records whose
    record bytes are then mutated (or not), compressed with a drawn codec, header and CRC32C made
    valid around whatever the payload holds."""
    from .test_batches import batch, compress, record, zz

    n = draw(st.integers(1, 5))
    recs = b""
    for i in range(n):
        nh = draw(st.integers(0, 2))
        headers = zz(nh) + b"".join(zz(2) + b"h" + bytes([48 + j]) + zz(1) + b"x" for j in range(nh))
        recs += record(key=draw(st.none() | st.binary(max_size=20)),
                       value=draw(st.none() | st.binary(max_size=200)), headers=headers,
                       offset_delta=i)
    body = bytearray(recs)
    kind = draw(st.sampled_from(["none", "flip", "insert", "delete", "varint", "truncate"]))
    if kind == "flip" and body:
        for _ in range(draw(st.integers(1, 4))):
            body[draw(st.integers(0, len(body) - 1))] ^= 1 << draw(st.integers(0, 7))
    elif kind == "insert":
        p = draw(st.integers(0, len(body)))
        body[p:p] = draw(st.binary(min_size=1, max_size=8))
    elif kind == "delete" and body:
        p = draw(st.integers(0, len(body) - 1))
        del body[p : p + draw(st.integers(1, 8))]
    elif kind == "varint" and body:
        p = draw(st.integers(0, len(body) - 1))
        body[p : p + 1] = zz(draw(st.integers(-(2**40), 2**40)))
    elif kind == "truncate":
        body = body[: draw(st.integers(0, len(body)))]
    codec = draw(st.integers(0, 4))
    count = n if draw(st.integers(0, 9)) else draw(st.integers(-1, n + 3))
    return f"{kind} codec {codec}", batch(compress(codec, bytes(body)), count=count, codec=codec), count


def test_live_batch_property() -> None:
    """Mutated record batches produced to a live broker: every answer is success with the log end
    moved by exactly the batch's count, or CORRUPT_MESSAGE / INVALID_RECORD with the log end
    unchanged; the connection stays open; and a consumer that reads everything accepted (with CRC
    checks) meets no corrupt record: nothing invalid is ever served."""
    from confluent_kafka import Consumer, TopicPartition

    from ._support import produce_request, start_broker
    from .test_batches import Conn

    b = start_broker()
    conn = Conn(b.bootstrap)
    stats: dict[str, int] = {}
    bad: list[str] = []
    start = time.monotonic()

    @seed(SEED)
    @settings(max_examples=EXAMPLES // 4, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_batches())
    def prop(case: tuple[str, bytes, int]) -> None:
        label, data, count = case
        before = conn.log_end(DATA_TOPIC)
        resp = conn.call(0, 9, lambda c: produce_request(DATA_TOPIC, data, correlation_id=c))
        if resp is None:
            bad.append(f"connection closed on {label}: {data[:160].hex()}")
            return
        code = int(resp.responses[0].partition_responses[0].error_code)  # type: ignore[attr-defined]
        stats[str(code)] = stats.get(str(code), 0) + 1
        after = conn.log_end(DATA_TOPIC)
        ok = (code == 0 and after == before + count) or (code in (2, 87) and after == before)
        if not ok:
            bad.append(f"{label}: error {code}, log end +{after - before}, count {count}: "
                       f"{data[:160].hex()}")

    try:
        prop()
        end = conn.log_end(DATA_TOPIC)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "fuzz-long",
                      "enable.auto.commit": False, "check.crcs": True,
                      "enable.partition.eof": True})
        c.assign([TopicPartition(DATA_TOPIC, 0, 0)])
        read, errors = 0, []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == -191:  # _PARTITION_EOF
                    break
                errors.append(str(m.error()))
                continue
            read += 1
        c.close()
        alive = b.proc is not None and b.proc.poll() is None
        tb = "Traceback" in b.log_text()
    finally:
        b.close()
    print(f"\nbatch property: {sum(stats.values())} batches in {time.monotonic() - start:.0f}s, "
          f"seed {SEED}, answers {stats}, log end {end}, consumer read {read}, "
          f"consumer errors {len(errors)}")
    assert alive and not tb
    assert not bad, "\n".join(bad[:20])
    assert not errors, errors[:10]
    assert read == end, f"the consumer read {read} of the {end} records stored (a corrupt batch " \
        "stops it)"
