"""A small client of the Confluent schema registry REST API (Samsa's or Confluent's), with the
registry client settings Confluent's serializers take (`basic.auth.user.info` with
`basic.auth.credentials.source=USER_INFO`, `schema.registry.ssl.ca.location`)."""

from __future__ import annotations

import threading
import urllib.parse
from typing import Any

import httpx

TIMEOUT_S = 10.0


class RegistryError(Exception):
    """An answer other than 2xx: the registry's error code and message (Confluent's JSON body)."""

    def __init__(self, status: int, code: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def q(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


class RegistryClient:
    def __init__(self, url: str, config: dict[str, str] | None = None) -> None:
        config = config or {}
        self.url = url.rstrip("/")
        auth = None
        info = config.get("basic.auth.user.info")
        if info and config.get("basic.auth.credentials.source", "USER_INFO").upper() == "USER_INFO":
            user, _, password = info.partition(":")
            auth = httpx.BasicAuth(user, password)
        verify: Any = config.get("schema.registry.ssl.ca.location") or True
        self._http = httpx.Client(base_url=self.url, auth=auth, timeout=TIMEOUT_S, verify=verify)
        self._by_id: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def request(self, method: str, path: str, body: Any = None) -> Any:
        try:
            r = self._http.request(method, path, json=body,
                                   headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        except httpx.HTTPError as e:
            raise RegistryError(503, None, f"schema registry at {self.url} unreachable: {e}") from None
        try:
            doc = r.json()
        except ValueError:
            doc = None
        if r.status_code // 100 != 2:
            if isinstance(doc, dict):
                raise RegistryError(r.status_code, doc.get("error_code"), str(doc.get("message")))
            raise RegistryError(r.status_code, None, f"HTTP {r.status_code} from the schema registry")
        return doc

    def subjects(self) -> list[str]:
        return sorted(self.request("GET", "/subjects"))

    def versions(self, subject: str) -> list[int]:
        return list(self.request("GET", f"/subjects/{q(subject)}/versions"))

    def version(self, subject: str, version: int | str) -> dict[str, Any]:
        doc: dict[str, Any] = self.request("GET", f"/subjects/{q(subject)}/versions/{version}")
        return doc

    def schema_by_id(self, schema_id: int) -> dict[str, Any]:
        """The schema with this id (cached: ids are immutable)."""
        with self._lock:
            hit = self._by_id.get(schema_id)
        if hit is None:
            hit = self.request("GET", f"/schemas/ids/{schema_id}")
            with self._lock:
                if len(self._by_id) > 1024:
                    self._by_id.clear()
                self._by_id[schema_id] = hit
        return hit

    def serialized_protobuf(self, schema_id: int) -> dict[str, Any]:
        doc: dict[str, Any] = self.request("GET", f"/schemas/ids/{schema_id}?format=serialized")
        return doc

    def compatibility(self, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{q(subject)}?defaultToGlobal=true"
        doc = self.request("GET", path)
        return str(doc.get("compatibilityLevel") or doc.get("compatibility") or "")

    def set_compatibility(self, subject: str, level: str) -> None:
        self.request("PUT", f"/config/{q(subject)}", {"compatibility": level})

    def register(self, subject: str, schema: str, schema_type: str) -> int:
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        return int(self.request("POST", f"/subjects/{q(subject)}/versions", body)["id"])

    def check(self, subject: str, schema: str, schema_type: str) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        doc: dict[str, Any] = self.request(
            "POST", f"/compatibility/subjects/{q(subject)}/versions/latest?verbose=true", body)
        return doc

    def close(self) -> None:
        self._http.close()
