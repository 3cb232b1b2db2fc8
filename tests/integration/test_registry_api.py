"""The registry's REST API: Confluent's status codes, error codes and payloads for good and bad
requests, deletes, configs, modes and compatibility checks; the registry keeps serving."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from samsa.testing import SamsaBroker
from samsa.testing.registry import InProcessRegistry

pytestmark = pytest.mark.timeout(120)
CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


@pytest.fixture(scope="module")
def http(samsa_broker: SamsaBroker) -> Iterator[httpx.Client]:
    with InProcessRegistry(samsa_broker.bootstrap, max_request_bytes=1 << 20) as r, \
            httpx.Client(base_url=r.url, headers=CT, timeout=30) as c:
        yield c


def avro(*fields: tuple[Any, ...]) -> str:
    out = []
    for f in fields:
        field = {"name": f[0], "type": f[1]}
        if len(f) > 2:
            field["default"] = f[2]
        out.append(field)
    return json.dumps({"type": "record", "name": "R", "fields": out})


def reg(http: httpx.Client, subject: str, schema: str, **extra: Any) -> httpx.Response:
    return http.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})


def err(r: httpx.Response, status: int, code: int) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    assert r.headers["content-type"].startswith("application/vnd.schemaregistry.v1+json")
    return str(body["message"])


def test_register_get_and_lookup(http: httpx.Client) -> None:
    r = reg(http, "api-a", avro(("x", "int")))
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    assert reg(http, "api-a", json.dumps(json.loads(avro(("x", "int"))), indent=2)).json()["id"] == sid
    assert http.get("/subjects/api-a/versions").json() == [1]
    v = http.get("/subjects/api-a/versions/latest").json()
    assert v == {"subject": "api-a", "version": 1, "id": sid, "schema": avro(("x", "int")).replace(" ", "")}
    assert http.get("/subjects/api-a/versions/1/schema").json() == json.loads(avro(("x", "int")))
    assert http.get(f"/schemas/ids/{sid}").json() == {"schema": v["schema"]}
    assert http.get(f"/schemas/ids/{sid}/versions").json() == [{"subject": "api-a", "version": 1}]
    assert http.get(f"/schemas/ids/{sid}/subjects").json() == ["api-a"]
    # the same schema under another subject keeps its id
    assert reg(http, "api-b", avro(("x", "int"))).json()["id"] == sid
    found = http.post("/subjects/api-a", json={"schema": avro(("x", "int"))}).json()
    assert found["id"] == sid and found["version"] == 1
    assert "api-a" in http.get("/subjects").json()
    assert sorted(http.get("/schemas/types").json()) == ["AVRO", "JSON", "PROTOBUF"]
    plain = httpx.post(f"{str(http.base_url).rstrip('/')}/subjects/api-a/versions",
                       json={"schema": avro(("x", "int"))}, headers={"Content-Type": "application/json"})
    assert plain.json()["id"] == sid


def test_not_found_errors(http: httpx.Client) -> None:
    reg(http, "api-nf", avro(("x", "int")))
    err(http.get("/subjects/nope/versions"), 404, 40401)
    err(http.get("/subjects/nope/versions/1"), 404, 40401)
    assert "not found" in err(http.get("/subjects/api-nf/versions/7"), 404, 40402)
    err(http.get("/schemas/ids/99999"), 404, 40403)
    err(http.post("/subjects/api-nf", json={"schema": avro(("y", "string"))}), 404, 40403)
    err(http.post("/subjects/nope", json={"schema": avro(("y", "string"))}), 404, 40401)
    for bad in ("0", "-2", "abc", "2147483648"):
        err(http.get(f"/subjects/api-nf/versions/{bad}"), 422, 42202)
    err(http.get("/no/such/path"), 404, 404)


def test_invalid_schemas_are_42201(http: httpx.Client) -> None:
    cases = [{"schema": "{not json"}, {"schema": '{"type":"record","name":"X"}'}, {"schema": ""},
             {"schema": "message A { strin a = 1; }", "schemaType": "PROTOBUF"},
             {"schema": '{"type":"objekt"}', "schemaType": "JSON"},
             {"schema": '"string"', "schemaType": "XML"},
             {"schema": avro(("x", "int")), "references": [{"name": "a", "subject": "nope", "version": 1}]}]
    for body in cases:
        msg = err(http.post("/subjects/api-bad/versions", json=body), 422, 42201)
        assert "Invalid schema" in msg
    bad_proto = 'syntax = "proto3"; message A { strin a = 1; }'
    msg = err(http.post("/subjects/api-bad/versions", json={"schema": bad_proto, "schemaType": "PROTOBUF"}),
              422, 42201)
    assert '"strin" is not defined' in msg


def test_bad_requests(http: httpx.Client) -> None:
    base = str(http.base_url).rstrip("/") + "/"
    r = httpx.post(f"{base}subjects/api-ct/versions", content=b'{"schema":"\\"int\\""}',
                   headers={"Content-Type": "text/plain"})
    err(r, 415, 415)
    err(http.post("/subjects/api-ct/versions", content=b"{not json"), 400, 400)
    err(http.post("/subjects/api-ct/versions", content=b"[1,2]"), 422, 422)
    huge = json.dumps({"schema": json.dumps({"type": "record", "name": "H", "fields": [],
                                             "doc": "x" * (2 << 20)})})
    err(http.post("/subjects/api-ct/versions", content=huge.encode()), 413, 413)
    err(http.delete("/subjects/api-ct/versions/1"), 404, 40401)
    assert http.get("/subjects").status_code == 200  # still serving


def test_incompatible_is_409_and_compatibility_endpoint(http: httpx.Client) -> None:
    assert reg(http, "api-c", avro(("x", "int"))).status_code == 200
    msg = err(reg(http, "api-c", avro(("x", "string"))), 409, 409)
    assert "incompatible" in msg and "api-c" in msg
    r = http.post("/compatibility/subjects/api-c/versions/latest?verbose=true",
                  json={"schema": avro(("x", "string"))}).json()
    assert r["is_compatible"] is False and r["messages"]
    ok = http.post("/compatibility/subjects/api-c/versions/1", json={"schema": avro(("x", "long"))}).json()
    assert ok == {"is_compatible": True}
    long_x = {"schema": avro(("x", "long"))}
    err(http.post("/compatibility/subjects/api-c/versions/9", json=long_x), 404, 40402)
    err(http.post("/compatibility/subjects/nope/versions/1", json=long_x), 404, 40401)
    assert http.post("/compatibility/subjects/api-c/versions",
                     json={"schema": avro(("x", "long"))}).json()["is_compatible"] is True


def test_config_levels(http: httpx.Client) -> None:
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    reg(http, "api-cfg", avro(("x", "int")))
    err(http.get("/config/api-cfg"), 404, 40408)
    assert http.get("/config/api-cfg?defaultToGlobal=true").json()["compatibilityLevel"] == "BACKWARD"
    assert http.put("/config/api-cfg", json={"compatibility": "none"}).json() == {"compatibility": "NONE"}
    assert http.get("/config/api-cfg").json()["compatibilityLevel"] == "NONE"
    assert reg(http, "api-cfg", avro(("x", "string"))).status_code == 200  # NONE allows anything
    err(http.put("/config/api-cfg", json={"compatibility": "SIDEWAYS"}), 422, 42203)
    assert http.delete("/config/api-cfg").json()["compatibilityLevel"] == "NONE"
    err(http.get("/config/api-cfg"), 404, 40408)
    assert http.put("/config", json={"compatibility": "FULL"}).status_code == 200
    assert http.get("/config").json()["compatibilityLevel"] == "FULL"
    http.delete("/config")
    assert http.get("/config").json()["compatibilityLevel"] == "BACKWARD"


def test_soft_and_permanent_deletes(http: httpx.Client) -> None:
    s1 = reg(http, "api-del", avro(("x", "int"))).json()["id"]
    s2 = reg(http, "api-del", avro(("x", "int"), ("y", "string", "d"))).json()["id"]
    err(http.delete("/subjects/api-del/versions/1?permanent=true"), 404, 40407)
    assert http.delete("/subjects/api-del/versions/1").json() == 1
    err(http.delete("/subjects/api-del/versions/1"), 404, 40406)
    err(http.get("/subjects/api-del/versions/1"), 404, 40402)
    assert http.get("/subjects/api-del/versions/1?deleted=true").json()["id"] == s1
    assert http.get("/subjects/api-del/versions").json() == [2]
    assert http.get("/subjects/api-del/versions?deleted=true").json() == [1, 2]
    assert http.get(f"/schemas/ids/{s1}").status_code == 200  # ids of soft-deleted versions stay readable
    err(http.delete("/subjects/api-del?permanent=true"), 404, 40405)
    assert http.delete("/subjects/api-del").json() == [2]
    err(http.delete("/subjects/api-del"), 404, 40404)
    err(http.get("/subjects/api-del/versions"), 404, 40401)
    assert "api-del" not in http.get("/subjects").json()
    assert "api-del" in http.get("/subjects?deleted=true").json()
    assert http.delete("/subjects/api-del?permanent=true").json() == [1, 2]
    err(http.get(f"/schemas/ids/{s2}"), 404, 40403)
    # a new schema after a permanent delete never reuses an id
    s3 = reg(http, "api-del", avro(("z", "int"))).json()["id"]
    assert s3 > s2
    assert http.get("/subjects/api-del/versions").json() == [1]


def test_references_block_deletes(http: httpx.Client) -> None:
    base = {"type": "record", "name": "Base", "namespace": "r", "fields": [{"name": "a", "type": "int"}]}
    reg(http, "r.Base", json.dumps(base))
    user = {"type": "record", "name": "User", "namespace": "r", "fields": [{"name": "b", "type": "r.Base"}]}
    uid = reg(http, "api-ref", json.dumps(user),
              references=[{"name": "r.Base", "subject": "r.Base", "version": 1}]).json()["id"]
    got = http.get(f"/schemas/ids/{uid}").json()
    assert got["references"] == [{"name": "r.Base", "subject": "r.Base", "version": 1}]
    assert http.get("/subjects/r.Base/versions/1/referencedby").json() == [uid]
    err(http.delete("/subjects/r.Base/versions/1"), 422, 42206)
    err(http.delete("/subjects/r.Base"), 422, 42206)
    err(http.get("/subjects/nope/versions/1/referencedby"), 404, 40401)


def test_modes(http: httpx.Client) -> None:
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    reg(http, "api-mode", avro(("x", "int")))
    assert http.put("/mode/api-mode", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert "read-only" in err(reg(http, "api-mode", avro(("x", "int"), ("y", "int", 0))), 422, 42205)
    err(http.put("/mode/api-mode", json={"mode": "SIDEWAYS"}), 422, 42204)
    http.delete("/mode/api-mode")
    err(http.get("/mode/api-mode"), 404, 40409)
    err(http.put("/mode", json={"mode": "IMPORT"}), 422, 42205)  # not empty
    # IMPORT on an empty subject: explicit ids and versions
    assert http.put("/mode/api-import", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    r = reg(http, "api-import", avro(("q", "int")), id=5000, version=3)
    assert r.json() == {"id": 5000}, r.text
    assert http.get("/subjects/api-import/versions").json() == [3]
    err(reg(http, "api-mode", avro(("q", "int")), id=6000), 422, 42205)  # ids only in IMPORT mode
    http.delete("/mode/api-import")
    assert reg(http, "api-after-import", avro(("w", "int"))).json()["id"] > 5000


def test_normalize(http: httpx.Client) -> None:
    a = json.dumps({"type": "record", "name": "N", "fields": [{"name": "a", "type": "int"}]})
    b = json.dumps({"name": "N", "fields": [{"type": "int", "name": "a"}], "type": "record"})
    s1 = http.post("/subjects/api-norm/versions?normalize=true", json={"schema": a}).json()["id"]
    s2 = http.post("/subjects/api-norm/versions?normalize=true", json={"schema": b}).json()["id"]
    assert s1 == s2
    assert http.get("/subjects/api-norm/versions").json() == [1]
