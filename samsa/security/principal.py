"""KafkaPrincipal: the identity requests are authorized as. A connection starts as User:ANONYMOUS
(Kafka's principal for PLAINTEXT and for SSL without a client certificate); TLS client
certificates and SASL authentication replace it."""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    token_authenticated: bool = False

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`Type:name` as ACLs and `super.users` write it (the name may contain colons)."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected a principal of the form Type:name, got {text!r}")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
