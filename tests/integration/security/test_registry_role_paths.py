"""The registry's role levels against encoded paths: the level a request needs is decided on the
path the registry's routes see (decoded), so a read-only user cannot register a schema by
writing `versions` into the subject segment as `%2Fversions`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from samsa.testing import SamsaBroker
from samsa.testing.registry import InProcessRegistry

pytestmark = pytest.mark.timeout(120)

AVRO = json.dumps({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]})
CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    d: Path = tmp_path_factory.mktemp("reg-roles")
    users = d / "users"
    users.write_text("reader: reader-pw,read-only\nwriter: writer-pw,read-write\n")
    auth = {"authentication.method": "BASIC", "authentication.roles": "read-only,read-write",
            "samsa.registry.users.file": str(users)}
    with SamsaBroker() as b, InProcessRegistry(b.bootstrap, props=auth) as reg:
        yield reg.url


def test_reader_cannot_register_through_an_encoded_slash(registry: str) -> None:
    body = json.dumps({"schema": AVRO})
    with httpx.Client(base_url=registry, timeout=30) as c:
        r = c.post("/subjects/sneaky%2Fversions", content=body, headers=CT,
                   auth=("reader", "reader-pw"))
        assert r.status_code == 403, r.text
        assert r.json()["error_code"] == 40301
        r = c.post("/subjects//versions", content=body, headers=CT, auth=("reader", "reader-pw"))
        assert r.status_code == 403, r.text
        # nothing was registered
        subjects = c.get("/subjects", auth=("reader", "reader-pw")).json()
        assert "sneaky" not in subjects and "" not in subjects
        # a real lookup stays a read; a writer registers through the same encoded path
        r = c.post("/subjects/sneaky", content=body, headers=CT, auth=("reader", "reader-pw"))
        assert r.status_code == 404 and r.json()["error_code"] == 40401
        r = c.post("/subjects/sneaky%2Fversions", content=body, headers=CT,
                   auth=("writer", "writer-pw"))
        assert r.status_code == 200 and "id" in r.json()
