"""HTTPS for the Connect REST API with Kafka Connect's settings (KIP-208): `listeners=https://...`
and the listener's TLS settings `listeners.https.ssl.*`, or the worker's top-level `ssl.*`
when no `listeners.https.` setting is given. Key stores are PEM (as for Samsa's brokers):
`ssl.keystore.location` (key + chain in one file) or `ssl.keystore.certificate.chain` +
`ssl.keystore.key`; `ssl.truststore.location` / `ssl.truststore.certificates` check client
certificates (`ssl.client.auth` none | requested | required) and, on the client side, the
other workers' certificates when a request is forwarded to the leader."""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PREFIX = "listeners.https."


class RestTlsError(ValueError):
    """TLS settings of the REST listener that cannot be used."""


def https_settings(props: Mapping[str, Any]) -> dict[str, str]:
    """The REST listener's ssl.* settings: the `listeners.https.` ones if any are set (as
    Kafka's worker: then only those), else the top-level ssl.* ones."""
    prefixed = {k[len(PREFIX):]: str(v) for k, v in props.items()
                if k.startswith(PREFIX + "ssl.")}
    if prefixed:
        return prefixed
    return {k: str(v) for k, v in props.items() if k.startswith("ssl.")}


@dataclass(frozen=True)
class RestTls:
    """Files uvicorn serves HTTPS with, and what the REST client trusts."""

    certfile: str
    keyfile: str
    key_password: str | None
    ca_file: str | None
    client_auth: str  # none | requested | required
    check_hostname: bool
    _tmp: Any = None  # keeps inline PEM files alive

    @classmethod
    def from_settings(cls, s: Mapping[str, str]) -> RestTls:
        ks_type = s.get("ssl.keystore.type", "PEM").upper()
        if ks_type != "PEM":
            raise RestTlsError(f"listeners.https.ssl.keystore.type={ks_type} is not supported: "
                               "use PEM (ssl.keystore.location with the key and the chain)")
        ts_type = s.get("ssl.truststore.type", "PEM").upper()
        if ts_type != "PEM" and ("ssl.truststore.location" in s):
            raise RestTlsError(f"listeners.https.ssl.truststore.type={ts_type} is not supported: "
                               "use PEM")
        tmp = None
        location = s.get("ssl.keystore.location")
        cert = key = location
        if location is None:
            chain, pem_key = s.get("ssl.keystore.certificate.chain"), s.get("ssl.keystore.key")
            if not chain or not pem_key:
                raise RestTlsError("an https listener needs listeners.https.ssl.keystore.location "
                                   "(or ssl.keystore.certificate.chain + ssl.keystore.key)")
            tmp = tempfile.TemporaryDirectory(prefix="samsa-connect-tls-")
            cert, key = str(Path(tmp.name, "chain.pem")), str(Path(tmp.name, "key.pem"))
            Path(cert).write_text(chain)
            Path(key).write_text(pem_key)
        ca = s.get("ssl.truststore.location")
        if ca is None and s.get("ssl.truststore.certificates"):
            tmp = tmp or tempfile.TemporaryDirectory(prefix="samsa-connect-tls-")
            ca = str(Path(tmp.name, "ca.pem"))
            Path(ca).write_text(s["ssl.truststore.certificates"])
        auth = s.get("ssl.client.auth", "none").lower()
        if auth not in ("none", "requested", "required"):
            raise RestTlsError(f"listeners.https.ssl.client.auth={auth}: expected none, "
                               "requested or required")
        algo = s.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        out = cls(str(cert), str(key), s.get("ssl.key.password"), ca, auth, algo == "https", tmp)
        out.server_context()  # fail at start-up, naming the setting, not on the first request
        return out

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            ctx.load_cert_chain(self.certfile, self.keyfile, password=self.key_password)
            if self.ca_file:
                ctx.load_verify_locations(self.ca_file)
        except (OSError, ssl.SSLError) as e:
            raise RestTlsError(f"cannot load the REST listener's key store: {e}") from None
        return ctx

    @property
    def cert_reqs(self) -> int:
        return {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}[self.client_auth]

    def uvicorn_options(self) -> dict[str, Any]:
        return {"ssl_certfile": self.certfile, "ssl_keyfile": self.keyfile,
                "ssl_keyfile_password": self.key_password, "ssl_ca_certs": self.ca_file,
                "ssl_cert_reqs": self.cert_reqs}

    def client_context(self) -> ssl.SSLContext:
        """For requests to other workers (forwarding to the leader): trust the trust store, and
        present this worker's certificate (needed where ssl.client.auth=required)."""
        ctx = ssl.create_default_context(cafile=self.ca_file)
        ctx.check_hostname = self.check_hostname
        ctx.load_cert_chain(self.certfile, self.keyfile, password=self.key_password)
        return ctx


def rest_tls(listener: str, props: Mapping[str, Any]) -> RestTls | None:
    """The TLS of a REST listener URL: None for http://."""
    if not listener.lower().startswith("https://"):
        return None
    return RestTls.from_settings(https_settings(props))
