"""SASL authentication (KIP-43, KIP-152): the per-connection state machine (authenticator.py) and
one server per mechanism: PLAIN (plain.py), SCRAM-SHA-256/512 (scram.py), OAUTHBEARER
(oauthbearer.py). A mechanism server turns client tokens into server tokens until it is complete;
it raises AuthenticationFailed (message sent to the client as is) or InvalidCredentials (the client
gets Kafka's generic "invalid credentials" message, so a reply never tells who exists)."""

from __future__ import annotations

from typing import Protocol


class AuthenticationFailed(Exception):
    """Kafka's SaslAuthenticationException: its message goes to the client."""


class InvalidCredentials(Exception):
    """Kafka's SaslException: the client gets only the generic message (no user enumeration)."""


class MechanismServer(Protocol):
    complete: bool
    authorization_id: str
    # When the credential stops being valid (OAUTHBEARER token exp), epoch ms; None if never.
    credential_expiry_ms: int | None

    def evaluate(self, token: bytes) -> bytes: ...
