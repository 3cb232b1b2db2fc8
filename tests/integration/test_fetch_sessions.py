"""Incremental fetch sessions (KIP-227) over the raw protocol: create, incremental fetches that
return only partitions with news, forgotten partitions, and the session errors."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker
from tests.wire import Wire

pytestmark = pytest.mark.timeout(60)


def _fetch(w: Wire, sid: int, epoch: int, parts: list[int], forgotten: list[int] | None = None):  # type: ignore[no-untyped-def]
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": sid, "session_epoch": epoch,
            "topics": [{"topic": "sess", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "log_start_offset": -1, "current_leader_epoch": -1} for p in parts]}] if parts else [],
            "forgotten_topics_data": [{"topic": "sess", "partitions": forgotten}] if forgotten else [],
            "rack_id": ""}
    return w.request(1, 11, body)


def _parts(resp) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(p.partition_index for t in resp.responses for p in t.partitions)


def test_incremental_fetch_session(samsa_broker: SamsaBroker) -> None:
    bs = samsa_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("sess", 3, 1)])["sess"].result(10)
    w = Wire(bs)
    full = _fetch(w, 0, 0, [0, 1, 2])
    assert full.error_code == 0 and full.session_id != 0
    assert _parts(full) == [0, 1, 2]  # a full fetch answers every partition
    sid = full.session_id
    idle = _fetch(w, sid, 1, [])
    assert idle.error_code == 0 and _parts(idle) == []  # nothing changed: nothing listed
    p = Producer({"bootstrap.servers": bs})
    p.produce("sess", value=b"x", partition=1)
    p.flush(10)
    news = _fetch(w, sid, 2, [])
    assert _parts(news) == [1] and news.responses[0].partitions[0].records
    _fetch(w, sid, 3, [], forgotten=[1])
    p.produce("sess", value=b"y", partition=1)
    p.flush(10)
    assert _parts(_fetch(w, sid, 4, [])) == []  # partition 1 was forgotten
    assert _fetch(w, sid, 9, []).error_code == 71  # INVALID_FETCH_SESSION_EPOCH
    assert _fetch(w, 12345, 1, []).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
    closed = _fetch(w, sid, -1, [0])  # close the session: a sessionless full fetch
    assert closed.session_id == 0 and _parts(closed) == [0]
    assert _fetch(w, sid, 5, []).error_code == 70
