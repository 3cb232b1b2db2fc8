"""Validly encoded requests carrying out-of-range values: every integer field of every advertised
API (lowest and highest version) set in turn to its type's minimum and maximum, -2, -1, 0 and 1
(timeouts, offsets, partition indexes, epochs, counts, byte limits, ...).

Kafka answers these with an error code in the response (or, for a few, closes); it never fails
internally. What must hold: answered with the right correlation id or closed, no Traceback, the
broker alive and serving a real client, RSS bounded. APIs that may legitimately wait (a fetch
whose max wait grew, a join waiting for its rebalance) may stay silent for the short wait here.
"""

from __future__ import annotations

import datetime
import random
import time

import pytest
from kio.index import load_request_schema

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker

from ._mutate import boundary_values, encode_with, int_paths, sample, with_value
from ._support import DATA_TOPIC, RSS_ABUSE_BOUND_MB, Health, correlation_of, rss_mb
from .test_bodies import ANSWER_WAIT_S, MAY_WAIT, Sender, advertised, fuzz_versions

pytestmark = pytest.mark.timeout(300)

BUDGET_S = 60.0
MAX_FRAMES = 2500


def test_out_of_range_integer_values(fuzz_broker: SamsaBroker, health: Health,
                                     rng: random.Random) -> None:
    records = encode_batch([(b"k", b"v", [], int(time.time() * 1000))])
    plan = []
    for key, (lo, hi) in sorted(advertised(fuzz_broker).items()):
        for v in fuzz_versions(key, lo, hi):
            cls = load_request_schema(key, v)
            base = sample(cls, DATA_TOPIC, records)
            for path, ktype in int_paths(cls):
                for value in boundary_values(ktype):
                    if ktype.startswith("timedelta"):
                        value = datetime.timedelta(milliseconds=value) if abs(value) < 2**40 \
                            else None
                        if value is None:
                            continue
                    plan.append((key, v, f"{'.'.join(map(str, path))}={value}", base, path, value))
    rng.shuffle(plan)
    plan = plan[:MAX_FRAMES]
    sender = Sender(fuzz_broker.bootstrap)
    failures: list[str] = []
    stats = {"answered": 0, "closed": 0, "silent": 0}
    start = time.monotonic()
    sent = 0
    for key, v, label, base, path, value in plan:
        if time.monotonic() - start > BUDGET_S:
            break
        fr = encode_with(key, v, with_value(base, path, value), 0x7A7A)
        got, ans = sender.send(fr, ANSWER_WAIT_S)
        sent += 1
        stats[got] += 1
        where = f"api {key} v{v} {label}: frame {fr[:240].hex()}"
        if got == "answered" and ans is not None and correlation_of(ans) != 0x7A7A:
            failures.append(f"wrong correlation id for {where}")
        if got == "silent" and key not in MAY_WAIT:
            failures.append(f"no answer and no close within {ANSWER_WAIT_S}s for {where}")
        if got != "answered" or sent % 50 == 0:
            proc = fuzz_broker.proc
            if proc is None or proc.poll() is not None:
                failures.append(f"BROKER DIED after {where}")
                break
            if rss_mb(health.pid) >= RSS_ABUSE_BOUND_MB:
                failures.append(f"RSS over the bound after {where}")
                break
            text = fuzz_broker.log_text()[health.log_mark :]
            if "Traceback" in text and not any(f.startswith("Traceback") for f in failures):
                tb = text[text.index("Traceback") :].splitlines()
                exc = next((ln for ln in tb[1:] if ln and not ln.startswith(" ")), "")
                failures.append(f"Traceback ({exc}) after {where}")
    sender.reset()
    print(f"out-of-range values: {sent}/{len(plan)} frames in {time.monotonic() - start:.1f}s, "
          f"{stats}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:15])
    health.check("out-of-range values")
