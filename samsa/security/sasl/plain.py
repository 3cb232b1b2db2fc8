"""SASL/PLAIN (RFC 4616) against the users of the listener's PlainLoginModule config
(`user_<name>="<password>"`), as Kafka's PlainServerCallbackHandler. Passwords are compared in
constant time; the failure messages are Kafka's."""

from __future__ import annotations

import hmac

from . import AuthenticationFailed, InvalidCredentials

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def users_from_options(options: dict[str, str]) -> dict[str, str]:
    return {k[5:]: v for k, v in options.items() if k.startswith("user_") and len(k) > 5}


class PlainServer:
    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCredentials("SASL/PLAIN token is not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise InvalidCredentials(f"Invalid SASL/PLAIN response: expected 3 tokens, got "
                                     f"{len(parts)}")
        authzid, user, password = parts
        if not user:
            raise InvalidCredentials("Authentication failed: username not specified")
        if not password:
            raise InvalidCredentials("Authentication failed: password not specified")
        expected = self.users.get(user)
        # compare against something even for an unknown user: no timing hint of who exists
        ok = hmac.compare_digest((expected or "\0").encode(), password.encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization "
                                       "id that is different from username")
        self.authorization_id = user
        self.complete = True
        return b""
