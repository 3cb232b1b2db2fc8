"""A Samsa broker with TLS and SASL listeners for tests, and the client settings to reach it in
each client's dialect (librdkafka, Java properties for `--command-config` files, Spark's
`kafka.` options, Connect worker settings).

    from samsa.testing.secure import SecureBroker
    with SecureBroker(tmp_path, users={"alice": "alice-pw"}) as sb:
        Producer({"bootstrap.servers": sb.sasl_ssl, **sb.librdkafka("alice")})
        sb.write_properties(tmp_path / "client.properties", sb.java("alice"))

Listeners: PLAINTEXT (the admin's back door, SamsaBroker waits on it), SASL_SSL (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with unsecured tokens) and SSL (client certificates
required, principal `User:CN=<name>,OU=eng,O=acme`). SCRAM users get the same passwords as PLAIN
ones. `acls=True` turns on the StandardAuthorizer with `admin`, the certificate `CN=admin` and the
PLAINTEXT listener's `ANONYMOUS` as super users.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

from samsa.testing import SamsaBroker, free_port
from samsa.testing.tls import TlsFiles, client_dn

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
DEFAULT_USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def jaas(module: str, **options: str) -> str:
    """A one-entry JAAS config: `<module> required k="v" ...;`."""
    opts = " ".join(f'{k}="{v}"' for k, v in options.items())
    return f"{module} required {opts};"


def write_properties(path: str | Path, props: dict[str, Any]) -> Path:
    """A Java .properties file (one key=value a line)."""
    path = Path(path)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class SecureBroker:
    """A SamsaBroker with PLAINTEXT, SASL_SSL and SSL listeners and certificates made now."""

    def __init__(self, root: str | Path, users: dict[str, str] | None = None,
                 clients: tuple[str, ...] = ("alice", "admin"), acls: bool = False,
                 extra: dict[str, str] | None = None) -> None:
        self.root = Path(root)
        self.users = dict(users or DEFAULT_USERS)
        self.tls = TlsFiles.create(self.root / "tls", clients=clients)
        self.plain_port, self.sasl_ssl_port, self.ssl_port = free_port(), free_port(), free_port()
        listeners = (f"PLAINTEXT://127.0.0.1:{self.plain_port},"
                     f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port},SSL://127.0.0.1:{self.ssl_port}")
        user_opts = {f"user_{u}": p for u, p in self.users.items()}
        self.overrides: dict[str, str] = {
            "listeners": listeners, "advertised.listeners": listeners,
            **self.tls.broker_ssl("none", prefix="listener.name.sasl_ssl."),
            **self.tls.broker_ssl("required", prefix="listener.name.ssl."),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas(PLAIN_MODULE, **user_opts),
            "num.partitions": "1",
        }
        if acls:
            self.overrides |= {
                "authorizer.class.name":
                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": f"User:admin;User:ANONYMOUS;User:{client_dn('admin')}"}
        self.overrides |= extra or {}
        self.broker = SamsaBroker(data_dir=self.root / "data", port=self.plain_port,
                                  overrides=self.overrides)

    # ---- addresses -----------------------------------------------------------------------
    @property
    def plaintext(self) -> str:
        return f"127.0.0.1:{self.plain_port}"

    @property
    def sasl_ssl(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def ssl(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> SecureBroker:
        self.broker.start()
        self._scram_users()
        return self

    def _scram_users(self) -> None:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": self.plaintext})
        ups: list[Any] = [UserScramCredentialUpsertion(u, ScramCredentialInfo(m, 4096), p.encode())
               for u, p in self.users.items()
               for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
        for f in admin.alter_user_scram_credentials(ups).values():
            f.result(timeout=30)

    def close(self) -> None:
        self.broker.close()

    def __enter__(self) -> SecureBroker:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- client settings ------------------------------------------------------------------
    def java(self, user: str | None = None, mechanism: str = "PLAIN",
             password: str | None = None, cert: str | None = None) -> dict[str, str]:
        """Kafka (Java) client properties: SASL_SSL as `user` with `mechanism`, or SSL with
        client certificate `cert` when no user is given. The trust store is PEM."""
        props = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.tls.ca_file)}
        if user is None:
            return {"security.protocol": "SSL", **props, **self.java_keystore(cert)}
        pw = self.users.get(user, "") if password is None else password
        if mechanism == "OAUTHBEARER":
            module = jaas(OAUTH_MODULE, unsecuredLoginStringClaim_sub=user)
        else:
            module = jaas(PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE,
                          username=user, password=pw)
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                "sasl.jaas.config": module, **props}

    def java_keystore(self, cert: str | None) -> dict[str, str]:
        """ssl.keystore.* for client certificate `cert` as one PEM file (key + chain)."""
        if cert is None:
            return {}
        crt, key = self.tls.clients[cert]
        pem = self.root / "tls" / f"{cert}.keystore.pem"
        pem.write_bytes(key.read_bytes() + crt.read_bytes())
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pem)}

    def librdkafka(self, user: str | None = None, mechanism: str = "PLAIN",
                   password: str | None = None, cert: str | None = None) -> dict[str, Any]:
        """The same settings in librdkafka's names (confluent-kafka, kcat)."""
        from samsa.client_security import librdkafka_config

        return librdkafka_config(self.java(user, mechanism, password, cert))

    def bootstrap_for(self, props: dict[str, Any]) -> str:
        """The listener matching the settings' security.protocol."""
        return {"SASL_SSL": self.sasl_ssl, "SSL": self.ssl}.get(
            str(props.get("security.protocol", "PLAINTEXT")), self.plaintext)

    def spark_options(self, user: str | None = None, mechanism: str = "PLAIN",
                      cert: str | None = None) -> dict[str, str]:
        """Spark Kafka connector options (`kafka.` + the Java properties)."""
        props = self.java(user, mechanism, cert=cert)
        return {"kafka.bootstrap.servers": self.bootstrap_for(props),
                **{f"kafka.{k}": v for k, v in props.items()}}

    def connect_worker_props(self, user: str = "admin", mechanism: str = "PLAIN",
                             clients: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
        """Connect worker settings reaching the SASL_SSL listener: the worker's own clients as
        `user` (top-level settings), connectors' producers/consumers and admin clients as given
        in `clients` ({"producer": java props, "consumer": ..., "admin": ...}), else as `user`
        too (Kafka's workers need producer.* / consumer.* for their connectors' clients)."""
        own = self.java(user, mechanism)
        out = {"bootstrap.servers": self.sasl_ssl, **own}
        for kind in ("producer", "consumer", "admin"):
            for k, v in ((clients or {}).get(kind, own)).items():
                out[f"{kind}.{k}"] = v
        return out

    def rest_https_props(self, client_auth: str = "none") -> dict[str, str]:
        """listeners.https.ssl.* for a Connect REST listener on 127.0.0.1 (the broker's
        certificate: it names 127.0.0.1), trusting this CA for client certificates."""
        return {"listeners.https.ssl.keystore.type": "PEM",
                "listeners.https.ssl.keystore.location": str(self.tls.server_file),
                "listeners.https.ssl.truststore.type": "PEM",
                "listeners.https.ssl.truststore.location": str(self.tls.ca_file),
                "listeners.https.ssl.client.auth": client_auth}

    def client_cert(self, name: str) -> tuple[str, str]:
        """(certificate file, key file) of client `name`, e.g. for httpx's `cert=`."""
        crt, key = self.tls.clients[name]
        return str(crt), str(key)
