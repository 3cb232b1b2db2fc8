"""Registry CLIENT settings the Confluent way, shared by every registry client in Samsa (the
`samsa schemas` CLI, the Connect converters, the Spark decode helpers, the pipeline):

- credentials: `basic.auth.credentials.source` = URL (default: `http://user:pass@host` in the
  URL), USER_INFO (`basic.auth.user.info` = user:password, also `schema.registry.basic.auth.user.info`)
  or SASL_INHERIT (the Kafka client's `sasl.jaas.config` username/password);
- TLS: `schema.registry.ssl.truststore.location` / `.certificates` (PEM), `...keystore.location`
  (PEM key + chain) or `...keystore.certificate.chain` + `...keystore.key`, `...key.password`,
  `...endpoint.identification.algorithm` (empty: no host name check); confluent-kafka's own
  `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, `ssl.key.password` work too.

`RegistryClientSettings.confluent_conf()` is a SchemaRegistryClient config; `open()` sends a
request with urllib (CLI, Spark workers)."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from samsa.config import ConfigError

SOURCE = "basic.auth.credentials.source"
USER_INFO = "basic.auth.user.info"
_P = "schema.registry."
SOURCES = ("URL", "USER_INFO", "SASL_INHERIT")


def _pem_path(text: str, name: str) -> str:
    """Inline PEM for clients that only take paths: a private file for the process's life."""
    fd, path = tempfile.mkstemp(prefix=f"samsa-registry-{name}-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    return path


@dataclass(frozen=True)
class RegistryClientSettings:
    url: str
    auth: tuple[str, str] | None = None
    ca_file: str | None = None
    ca_pem: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    @classmethod
    def parse(cls, url: str, props: Mapping[str, Any] | None = None) -> RegistryClientSettings:
        """From a URL (the first of a comma-separated list) and Confluent client properties."""
        p = {k: str(v) for k, v in (props or {}).items() if v is not None}

        def get(*names: str) -> str | None:
            for n in names:
                if p.get(n):
                    return p[n]
            return None

        first = url.split(",")[0].strip().rstrip("/")
        parsed = urllib.parse.urlsplit(first)
        source = (get(_P + SOURCE, SOURCE) or "URL").upper()
        if source not in SOURCES:
            raise ConfigError(f"Invalid value {source} for configuration {SOURCE}: String must be "
                              f"one of: {', '.join(SOURCES)}")
        auth: tuple[str, str] | None = None
        if source == "USER_INFO":
            info = get(_P + USER_INFO, USER_INFO)
            if info is not None:
                user, sep, pw = info.partition(":")
                if not sep:
                    raise ConfigError(f"{USER_INFO} must be in the form of {{username}}:{{password}}")
                auth = (user, pw)
        elif source == "SASL_INHERIT":
            auth = _sasl_credentials(p)
        elif parsed.username is not None:
            auth = (urllib.parse.unquote(parsed.username),
                    urllib.parse.unquote(parsed.password or ""))
        if parsed.username is not None:  # never send the credentials in the URL itself
            netloc = parsed.hostname or ""
            netloc = f"[{netloc}]" if ":" in netloc else netloc
            netloc += f":{parsed.port}" if parsed.port else ""
            first = urllib.parse.urlunsplit(parsed._replace(netloc=netloc))
        for t in (get(_P + "ssl.truststore.type"), get(_P + "ssl.keystore.type")):
            if t and t.upper() != "PEM":
                raise ConfigError(f"schema.registry.ssl.*.type={t}: Samsa's registry clients read "
                                  f"PEM stores only")
        if get(_P + "ssl.keystore.password") and not get(_P + "ssl.key.password"):
            raise ConfigError("schema.registry.ssl.keystore.password is for JKS/PKCS12 key stores: "
                              "with PEM set schema.registry.ssl.key.password")
        chain, key = get(_P + "ssl.keystore.certificate.chain"), get(_P + "ssl.keystore.key")
        keystore = get(_P + "ssl.keystore.location")
        cert_file = get("ssl.certificate.location") or keystore
        key_file = get("ssl.key.location") or keystore
        if chain and key:
            cert_file, key_file = _pem_path(chain, "chain"), _pem_path(key, "key")
        alg = get(_P + "ssl.endpoint.identification.algorithm")
        hostname = not (_P + "ssl.endpoint.identification.algorithm" in p and (alg or "") == "")
        return cls(first, auth, get(_P + "ssl.truststore.location", "ssl.ca.location"),
                   get(_P + "ssl.truststore.certificates"), cert_file, key_file,
                   get(_P + "ssl.key.password", "ssl.key.password"), hostname)

    # ---- for confluent-kafka's SchemaRegistryClient --------------------------------------------
    def confluent_conf(self, url: str | None = None) -> dict[str, Any]:
        conf: dict[str, Any] = {"url": url or self.url}
        if url is not None and "@" in url:  # credentials are passed apart, never in the URL
            conf["url"] = self.url
        if self.auth is not None:
            conf["basic.auth.user.info"] = f"{self.auth[0]}:{self.auth[1]}"
        ca = self.ca_file or (_pem_path(self.ca_pem, "ca") if self.ca_pem else None)
        if ca:
            conf["ssl.ca.location"] = ca
        if self.cert_file:
            conf["ssl.certificate.location"] = self.cert_file
            if self.key_file:
                conf["ssl.key.location"] = self.key_file
            if self.key_password:
                conf["ssl.key.password"] = self.key_password
        if not self.check_hostname:
            raise ConfigError("schema.registry.ssl.endpoint.identification.algorithm= (no host name "
                              "check) is not supported by confluent-kafka's registry client")
        return conf

    # ---- for urllib --------------------------------------------------------------------------
    @cached_property
    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file) if self.ca_file \
            else ssl.create_default_context()
        if self.ca_pem:
            ctx.load_verify_locations(cadata=self.ca_pem)
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file, self.key_password)
        if not self.check_hostname:
            ctx.check_hostname = False
        return ctx

    def headers(self) -> dict[str, str]:
        if self.auth is None:
            return {}
        token = base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def open(self, method: str, path: str, data: bytes | None = None,
             headers: Mapping[str, str] | None = None, timeout: float = 30.0) -> Any:
        """urllib.request.urlopen of `path` (relative to the URL) with credentials and TLS;
        raises urllib's HTTPError / URLError as urlopen does."""
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={**self.headers(), **(headers or {})})
        ctx = self.ssl_context if self.url.startswith("https:") else None
        return urllib.request.urlopen(req, timeout=timeout, context=ctx)


def _sasl_credentials(p: Mapping[str, str]) -> tuple[str, str] | None:
    if p.get("sasl.username"):
        return p["sasl.username"], p.get("sasl.password", "")
    jaas = p.get("sasl.jaas.config")
    if not jaas:
        return None
    from samsa.security.sasl.jaas import parse_jaas

    _, opts = parse_jaas(jaas)
    if "username" not in opts:
        return None
    return opts["username"], opts.get("password", "")


def client_settings(url: str, props: Mapping[str, Any] | None = None) -> RegistryClientSettings:
    return RegistryClientSettings.parse(url, props)
