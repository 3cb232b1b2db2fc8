"""Durability of the registry: state is the _schemas log, so after kill -9 of the broker (with the
registry embedded in `samsa serve`) or of a standalone registry, subjects, versions, ids and configs
are unchanged and a new schema gets a fresh id. A second registry forwards writes to the leader."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from samsa.testing import SamsaBroker, free_port
from samsa.testing.registry import SamsaRegistry, wait_http

pytestmark = pytest.mark.timeout(180)
CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def schema(n: int) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": [
        {"name": f"f{i}", "type": "int", "default": 0} for i in range(n)]})


def snapshot(url: str) -> dict[str, Any]:
    with httpx.Client(base_url=url, headers=CT, timeout=30) as c:
        subjects = c.get("/subjects").json()
        out: dict[str, Any] = {"subjects": subjects, "config": c.get("/config").json()}
        for s in subjects:
            versions = c.get(f"/subjects/{s}/versions").json()
            out[s] = [c.get(f"/subjects/{s}/versions/{v}").json() for v in versions]
            cfg = c.get(f"/config/{s}")
            out[f"{s}/config"] = cfg.json() if cfg.status_code == 200 else None
        out["deleted"] = c.get("/subjects?deleted=true").json()
        return out


def populate(url: str) -> int:
    with httpx.Client(base_url=url, headers=CT, timeout=30) as c:
        ids = []
        for subject in ("a-value", "b-value"):
            for n in (1, 2, 3):
                r = c.post(f"/subjects/{subject}/versions", json={"schema": schema(n)})
                assert r.status_code == 200, r.text
                ids.append(r.json()["id"])
        proto = 'syntax = "proto3"; package p; message M { string s = 1; }'
        r = c.post("/subjects/p-value/versions", json={"schema": proto, "schemaType": "PROTOBUF"})
        ids.append(r.json()["id"])
        assert c.put("/config/a-value", json={"compatibility": "FULL"}).status_code == 200
        assert c.put("/config", json={"compatibility": "FORWARD"}).status_code == 200
        assert c.delete("/subjects/b-value/versions/1").status_code == 200
        c.post("/subjects/gone/versions", json={"schema": schema(5)})
        c.delete("/subjects/gone")
        top = c.post("/subjects/gone2/versions", json={"schema": schema(9)}).json()["id"]
        c.delete("/subjects/gone2")
        assert c.delete("/subjects/gone2?permanent=true").status_code == 200
        return max(ids + [top])


def test_embedded_registry_survives_broker_kill_9() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with SamsaBroker(overrides={"schema.registry.enable": "true",
                                "schema.registry.listeners": url}) as broker:
        wait_http(url, 30)
        max_id = populate(url)
        before = snapshot(url)
        broker.kill()
        broker.start()
        wait_http(url, 30)
        assert snapshot(url) == before
        with httpx.Client(base_url=url, headers=CT, timeout=30) as c:
            new = c.post("/subjects/c-value/versions", json={"schema": schema(7)}).json()["id"]
            assert new > max_id  # the permanently deleted top id is not handed out again
            assert c.post("/subjects/a-value/versions", json={"schema": schema(2)}).json()["id"] == \
                before["a-value"][1]["id"]


def test_standalone_registry_kill_9_and_follower_forwarding(samsa_broker: SamsaBroker) -> None:
    leader = SamsaRegistry(samsa_broker.bootstrap).start()
    follower = SamsaRegistry(samsa_broker.bootstrap, leader_url=leader.url).start()
    try:
        max_id = populate(leader.url)
        before = snapshot(leader.url)
        assert snapshot(follower.url) == before
        # writes through the follower land on the leader and are readable on both at once
        with httpx.Client(base_url=follower.url, headers=CT, timeout=30) as c:
            r = c.post("/subjects/via-follower/versions", json={"schema": schema(4)})
            assert r.status_code == 200, r.text
            fid = r.json()["id"]
            assert fid > max_id
            assert c.get("/subjects/via-follower/versions/1").json()["id"] == fid
            bad = c.post("/subjects/a-value/versions", json={"schema": json.dumps({"type": "string"})})
            assert bad.status_code == 409 and bad.json()["error_code"] == 409
        assert httpx.get(f"{leader.url}/subjects/via-follower/versions/1").json()["id"] == fid
        before = snapshot(leader.url)
        leader.kill()
        with httpx.Client(base_url=follower.url, headers=CT, timeout=30) as c:
            assert c.get("/subjects/via-follower/versions/1").json()["id"] == fid  # reads keep working
            r = c.post("/subjects/x-value/versions", json={"schema": schema(1)})
            assert r.status_code == 500 and r.json()["error_code"] == 50003
        leader.start()
        assert snapshot(leader.url) == before
        new = httpx.post(f"{leader.url}/subjects/y-value/versions", json={"schema": schema(8)},
                         headers=CT).json()["id"]
        assert new > fid
    finally:
        follower.close()
        leader.close()
