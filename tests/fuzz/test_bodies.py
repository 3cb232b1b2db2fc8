"""Mutated request bodies for every API the broker advertises, at its lowest and highest version.

The broker's own ApiVersions answer lists the APIs; for each, a valid request (one element in every
array, a value in every field) is built with kio and mutated: bit flips, array counts set to
0xFFFFFFFF / 0x7FFFFFFF / 0x80000000 / -2 (and huge or unterminated compact varints), strings and
bytes lengthened to 40,000 bytes or given lengths past the frame's end, truncation at every length
field and at random points. The frame's own length always matches what is sent.

What must hold: every mutated request is answered (with its correlation id) or its connection is
closed; the broker stays alive, a real client keeps working, RSS stays bounded, no Traceback.
Requests that may legitimately wait (a Fetch or JoinGroup whose mutated timeouts grew) are allowed
to stay silent for the short wait used here; any other silence is reported.
"""

from __future__ import annotations

import random
import struct
import time
from socket import socket

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker

from ._mutate import build_request, mutations
from ._support import (
    DATA_TOPIC,
    RSS_ABUSE_BOUND_MB,
    Health,
    api_versions_request,
    connect,
    correlation_of,
    read_answer,
    rss_mb,
)

pytestmark = pytest.mark.timeout(300)

BUDGET_S = 90.0  # time bound of the whole mutation run (the count is bounded too: ~2,000 frames)
ANSWER_WAIT_S = 2.0
# APIs whose mutated requests may wait longer than ANSWER_WAIT_S by design (long poll, rebalance,
# produce with acks=0 never answers, a wait for a coordinator, ...).
MAY_WAIT = {0, 1, 11, 14, 68}


def advertised(broker: SamsaBroker) -> dict[int, tuple[int, int]]:
    s = connect(broker.bootstrap)
    s.sendall(api_versions_request(1, version=3))
    ans = read_answer(s, 10)
    s.close()
    assert ans is not None
    resp_cls = load_response_schema(18, 3)
    hdr, n = entity_reader(resp_cls.__header_schema__)(ans, 0)
    resp, _ = entity_reader(resp_cls)(ans, n)
    assert int(resp.error_code) == 0
    return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}


def fuzz_versions(key: int, lo: int, hi: int) -> list[int]:
    """The lowest and highest advertised versions kio has a schema for (ApiVersions lists
    Produce from v0 as Kafka 4.0 does, though v0-v2 are refused and kio knows them not)."""
    known = []
    for v in range(lo, hi + 1):
        try:
            load_request_schema(key, v)
            known.append(v)
        except Exception:  # noqa: BLE001 - kio raises its own UnknownEntity
            continue
    return sorted({known[0], known[-1]}) if known else []


class Sender:
    """One connection reused until the broker closes it."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.sock: socket | None = None

    def send(self, data: bytes, wait: float) -> tuple[str, bytes | None]:
        if self.sock is None:
            self.sock = connect(self.bootstrap)
        try:
            self.sock.sendall(data)
            ans = read_answer(self.sock, wait)
        except TimeoutError:
            self.reset()
            return "silent", None
        except OSError:
            self.reset()
            return "closed", None
        if ans is None:
            self.reset()
            return "closed", None
        return "answered", ans

    def reset(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None


def test_mutated_bodies_of_every_advertised_api(fuzz_broker: SamsaBroker, health: Health,
                                               rng: random.Random) -> None:
    apis_ = advertised(fuzz_broker)
    assert len(apis_) >= 20
    records = encode_batch([(b"k", b"v" * 30, [("h", b"x")], int(time.time() * 1000))])
    plan: list[tuple[int, int, str, bytes]] = []
    for key, (lo, hi) in sorted(apis_.items()):
        for v in fuzz_versions(key, lo, hi):
            req = build_request(key, v, DATA_TOPIC, records, correlation_id=0x5A5A)
            assert req.marks_verified, f"marking encoder differs from kio for api {key} v{v}"
            plan += [(key, v, label, fr) for label, fr in mutations(req, rng)]
    rng.shuffle(plan)
    sender = Sender(fuzz_broker.bootstrap)
    failures: list[str] = []
    stats = {"answered": 0, "closed": 0, "silent": 0}
    silent_ok: dict[int, int] = {}
    peak = 0.0
    start = time.monotonic()
    sent = 0
    for key, v, label, fr in plan:
        if time.monotonic() - start > BUDGET_S:
            break
        got, ans = sender.send(fr, ANSWER_WAIT_S)
        sent += 1
        stats[got] += 1
        where = f"api {key} v{v} {label}: frame {fr[:200].hex()}{'...' if len(fr) > 200 else ''}"
        if got == "answered" and ans is not None and correlation_of(ans) != 0x5A5A:
            failures.append(f"wrong correlation id {correlation_of(ans)} for {where}")
        if got == "silent":
            if key in MAY_WAIT:
                silent_ok[key] = silent_ok.get(key, 0) + 1
            else:
                failures.append(f"no answer and no close within {ANSWER_WAIT_S}s for {where}")
        if sent % 50 == 0 or got != "answered":
            proc = fuzz_broker.proc
            if proc is None or proc.poll() is not None:
                failures.append(f"BROKER DIED after {where}")
                break
            peak = max(peak, rss_mb(health.pid))
            if peak >= RSS_ABUSE_BOUND_MB:
                failures.append(f"RSS {peak:.0f} MB after {where}")
                break
    sender.reset()
    print(f"mutated bodies: {sent}/{len(plan)} frames in {time.monotonic() - start:.1f}s, "
          f"{stats}, allowed silent per api {silent_ok}, peak RSS {peak:.0f} MB")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:15])
    health.check("mutated bodies")


def test_correct_requests_still_answered_after_mutations(fuzz_broker: SamsaBroker,
                                                        health: Health) -> None:
    """The unmutated request of every advertised API (lowest and highest version) is answered
    with its correlation id on one connection, or, for the APIs that may wait, at least not
    closed on."""
    apis_ = advertised(fuzz_broker)
    records = encode_batch([(b"k", b"v", [], int(time.time() * 1000))])
    failures = []
    for key, (lo, hi) in sorted(apis_.items()):
        for v in fuzz_versions(key, lo, hi):
            req = build_request(key, v, DATA_TOPIC, records, correlation_id=77)
            s = connect(fuzz_broker.bootstrap)
            s.sendall(req.frame())
            try:
                ans = read_answer(s, ANSWER_WAIT_S)
                if ans is None:
                    failures.append(f"api {key} v{v}: closed on a valid request; "
                                    f"frame {req.frame()[:300].hex()}")
                elif struct.unpack_from(">i", ans)[0] != 77:
                    failures.append(f"api {key} v{v}: wrong correlation id")
            except TimeoutError:
                if key not in MAY_WAIT:
                    failures.append(f"api {key} v{v}: no answer; frame {req.frame()[:300].hex()}")
            s.close()
    assert not failures, "\n".join(failures)
    health.check("valid requests of every api")
