"""Certificates made at test time (trustme) for TLS brokers and clients, as PEM files.

    from samsa.testing.tls import TlsFiles, ssl_listener_overrides
    tls = TlsFiles.create(tmp_path)                       # a CA, a server cert, client certs
    overrides, ssl_port = ssl_listener_overrides(tls, plain_port, client_auth="required")
    with SamsaBroker(port=plain_port, overrides=overrides) as b:
        Producer({"bootstrap.servers": f"127.0.0.1:{ssl_port}", **tls.confluent("alice")})

The server certificate is for 127.0.0.1 and localhost. Client certificates have the subject
`CN=<name>,OU=eng,O=acme` (so the DEFAULT principal is `User:CN=alice,OU=eng,O=acme`).
"""

from __future__ import annotations

import datetime as dt
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.testing import free_port

ORG, UNIT = "acme", "eng"


def client_dn(name: str) -> str:
    """The RFC 2253 subject DN of client certificate `name` (Kafka's DEFAULT principal name)."""
    return f"CN={name},OU={UNIT},O={ORG}"


@dataclass
class TlsFiles:
    """PEM files in `root`: ca.pem (trust store), server.pem (key + chain: a PEM key store),
    and per client <name>.crt / <name>.key."""

    root: Path
    ca: Any  # trustme.CA
    ca_file: Path
    server_file: Path
    clients: dict[str, tuple[Path, Path]] = field(default_factory=dict)

    @classmethod
    def create(cls, root: str | Path, clients: tuple[str, ...] = ("alice",)) -> TlsFiles:
        import trustme

        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(organization_name=ORG, organization_unit_name="ca")
        ca_file = root / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        out = cls(root, ca, ca_file, root / "server.pem")
        out.renew_server()
        for name in clients:
            out.add_client(name)
        return out

    def renew_server(self, path: Path | None = None, *, days: int = 30,
                     expired: bool = False, ca: Any = None) -> Path:
        """(Re)write a server key store (key + chain) at `path` (default: server.pem); `expired`
        makes one that ended yesterday, `ca` another issuer (an untrusted one)."""
        now = dt.datetime.now(dt.UTC)
        start, end = ((now - dt.timedelta(days=2), now - dt.timedelta(days=1)) if expired
                      else (now - dt.timedelta(minutes=5), now + dt.timedelta(days=days)))
        leaf = (ca or self.ca).issue_cert("127.0.0.1", "localhost", common_name="samsa-broker",
                                          organization_name=ORG, organization_unit_name=UNIT,
                                          not_before=start, not_after=end)
        path = path or self.server_file
        tmp = path.with_suffix(".tmp")
        leaf.private_key_and_cert_chain_pem.write_to_path(str(tmp))
        tmp.replace(path)  # atomically: a broker reloading it never sees half a file
        return path

    def add_client(self, name: str, *, expired: bool = False, ca: Any = None) -> tuple[Path, Path]:
        """A client certificate CN=<name>,OU=eng,O=acme (+ key), issued by this CA unless `ca`."""
        now = dt.datetime.now(dt.UTC)
        start, end = ((now - dt.timedelta(days=2), now - dt.timedelta(days=1)) if expired
                      else (now - dt.timedelta(minutes=5), now + dt.timedelta(days=30)))
        leaf = (ca or self.ca).issue_cert(f"{name}.clients.example", common_name=name,
                                          organization_name=ORG, organization_unit_name=UNIT,
                                          not_before=start, not_after=end)
        crt, key = self.root / f"{name}.crt", self.root / f"{name}.key"
        crt.write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(key))
        self.clients[name] = (crt, key)
        return crt, key

    # ---- broker side -------------------------------------------------------------------
    def broker_ssl(self, client_auth: str = "none", prefix: str = "") -> dict[str, str]:
        """ssl.* overrides for a PEM key store (with `prefix`, e.g. listener.name.ssl.)."""
        return {f"{prefix}ssl.keystore.type": "PEM",
                f"{prefix}ssl.keystore.location": str(self.server_file),
                f"{prefix}ssl.truststore.type": "PEM",
                f"{prefix}ssl.truststore.location": str(self.ca_file),
                f"{prefix}ssl.client.auth": client_auth}

    # ---- client side -------------------------------------------------------------------
    def confluent(self, client: str | None = None) -> dict[str, str]:
        """librdkafka (confluent-kafka) settings: security.protocol=SSL, CA, client cert."""
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(self.ca_file)}
        if client is not None:
            crt, key = self.clients[client]
            conf |= {"ssl.certificate.location": str(crt), "ssl.key.location": str(key)}
        return conf

    def kcat(self, client: str | None = None) -> list[str]:
        return [a for k, v in self.confluent(client).items() for a in ("-X", f"{k}={v}")]

    def kafka_python(self, client: str | None = None) -> dict[str, Any]:
        conf: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": str(self.ca_file),
                                "ssl_check_hostname": True}
        if client is not None:
            crt, key = self.clients[client]
            conf |= {"ssl_certfile": str(crt), "ssl_keyfile": str(key)}
        return conf

    def ssl_context(self, client: str | None = None) -> ssl.SSLContext:
        """A client SSLContext (aiokafka: security_protocol="SSL", ssl_context=...)."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if client is not None:
            crt, key = self.clients[client]
            ctx.load_cert_chain(str(crt), str(key))
        return ctx


def ssl_listener_overrides(tls: TlsFiles, plain_port: int, client_auth: str = "none",
                           ssl_port: int | None = None,
                           extra: dict[str, str] | None = None) -> tuple[dict[str, str], int]:
    """Broker overrides for a PLAINTEXT listener on `plain_port` (SamsaBroker waits on it) and
    an SSL one; returns them and the SSL port. Settings are per listener (listener.name.ssl.)."""
    ssl_port = ssl_port or free_port()
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}",
                 **tls.broker_ssl(client_auth, prefix="listener.name.ssl."), **(extra or {})}
    return overrides, ssl_port
