"""The registry's own Kafka clients (the `_schemas` store) from Confluent's `kafkastore.*`
settings: `kafkastore.bootstrap.servers` (entries may carry a protocol, `SASL_SSL://host:9094`),
`kafkastore.security.protocol`, `kafkastore.sasl.mechanism`, `kafkastore.sasl.jaas.config`,
`kafkastore.ssl.*` (PEM, or PKCS12 key stores), turned into librdkafka settings."""

from __future__ import annotations

from typing import Any

from samsa.config import ConfigError

from .auth import Lookup

P = "kafkastore."
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def bootstrap(get: Lookup, default: str) -> str:
    """kafkastore.bootstrap.servers without protocol prefixes, keeping the entries of
    kafkastore.security.protocol when some are prefixed (Confluent's rule)."""
    raw = get(P + "bootstrap.servers")
    if not raw:
        return default
    protocol = (get(P + "security.protocol") or "PLAINTEXT").upper()
    plain, matching = [], []
    for item in (x.strip() for x in raw.split(",") if x.strip()):
        proto, sep, hostport = item.partition("://")
        if not sep:
            plain.append(item)
        elif proto.upper() == protocol:
            matching.append(hostport)
    chosen = matching or plain
    if not chosen:
        raise ConfigError(f"kafkastore.bootstrap.servers has no {protocol} endpoint "
                          f"(kafkastore.security.protocol={protocol})")
    return ",".join(chosen)


def client_config(get: Lookup) -> dict[str, Any]:
    """librdkafka security settings for the store's producer, consumers and admin client."""
    out: dict[str, Any] = {}
    protocol = (get(P + "security.protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"Invalid value {protocol} for configuration "
                          f"kafkastore.security.protocol")
    out["security.protocol"] = protocol
    if protocol.startswith("SASL"):
        mech = (get(P + "sasl.mechanism") or "GSSAPI").upper()
        if mech == "GSSAPI":
            raise ConfigError("kafkastore.sasl.mechanism: set PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
                              "or OAUTHBEARER (Samsa has no GSSAPI)")
        out["sasl.mechanism"] = mech
        jaas = get(P + "sasl.jaas.config")
        if jaas:
            from samsa.security.sasl.jaas import parse_jaas

            _, opts = parse_jaas(jaas)
            if mech == "OAUTHBEARER":
                # the unsecured login module: its claims become librdkafka's unsecured JWT
                sub = opts.get("unsecuredLoginStringClaim_sub")
                if sub:
                    out["enable.sasl.oauthbearer.unsecure.jwt"] = True
                    out["sasl.oauthbearer.config"] = f"principal={sub}"
            else:
                if "username" in opts:
                    out["sasl.username"] = opts["username"]
                if "password" in opts:
                    out["sasl.password"] = opts["password"]
    if protocol.endswith("SSL"):
        out.update(_ssl(get))
    return out


def _ssl(get: Lookup) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ts_type = (get(P + "ssl.truststore.type") or "PEM").upper()
    ks_type = (get(P + "ssl.keystore.type") or "PEM").upper()
    if ts_type != "PEM":
        raise ConfigError(f"kafkastore.ssl.truststore.type={ts_type}: use PEM trust stores")
    if get(P + "ssl.truststore.location"):
        out["ssl.ca.location"] = get(P + "ssl.truststore.location")
    if get(P + "ssl.truststore.certificates"):
        out["ssl.ca.pem"] = get(P + "ssl.truststore.certificates")
    location = get(P + "ssl.keystore.location")
    if ks_type == "PKCS12":
        if location:
            out["ssl.keystore.location"] = location
            if get(P + "ssl.keystore.password"):
                out["ssl.keystore.password"] = get(P + "ssl.keystore.password")
    elif ks_type == "PEM":
        if location:  # one file with the key and the chain (Kafka's PEM key store)
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
        if get(P + "ssl.keystore.certificate.chain"):
            out["ssl.certificate.pem"] = get(P + "ssl.keystore.certificate.chain")
        if get(P + "ssl.keystore.key"):
            out["ssl.key.pem"] = get(P + "ssl.keystore.key")
    else:
        raise ConfigError(f"kafkastore.ssl.keystore.type={ks_type}: use PEM or PKCS12 key stores")
    if get(P + "ssl.key.password"):
        out["ssl.key.password"] = get(P + "ssl.key.password")
    alg = get(P + "ssl.endpoint.identification.algorithm")
    if alg is not None:
        out["ssl.endpoint.identification.algorithm"] = alg.strip().lower() or "none"
    return out
