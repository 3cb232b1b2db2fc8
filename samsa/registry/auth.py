"""HTTP basic authentication and role checks for the registry's REST API, with Confluent Schema
Registry's settings (`authentication.method=BASIC`, `authentication.realm`, `authentication.roles`,
`authentication.skip.paths`) and Jetty's users file (`name: password[,role...]`, found through a
JAAS file's `PropertyFileLoginModule file="..."` entry for the realm, or `samsa.registry.users.file`).

Roles give levels (Samsa's mapping, docs/security.md): read-only may read and test, read-write
may also register, delete and set a subject's compatibility, admin may also change the global
compatibility and modes. Failures answer as Confluent's registry: 401 with a
`WWW-Authenticate: Basic` challenge, 403 for a role not allowed at all, 40301 for an operation
the user's roles do not grant."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import re
import shlex
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.config import ConfigError

log = logging.getLogger("samsa.registry.auth")

Lookup = Callable[[str], str | None]
CONTENT_TYPE = b"application/vnd.schemaregistry.v1+json"

READ, WRITE, ADMIN = 1, 2, 3
LEVEL_SETTINGS = (("samsa.registry.admin.roles", "admin", ADMIN),
                  ("samsa.registry.readwrite.roles", "read-write", WRITE),
                  ("samsa.registry.readonly.roles", "read-only", READ))
USERS_FILE = "samsa.registry.users.file"
JAAS_FILE = "java.security.auth.login.config"
JAAS_ENV = "SCHEMA_REGISTRY_OPTS"
DEFAULT_REALM = "SchemaRegistry"


@dataclass(frozen=True)
class User:
    name: str
    credential: str  # as written in the users file (plain text or MD5:<hex>)
    roles: frozenset[str]

    def check(self, password: str) -> bool:
        cred = self.credential
        if cred.startswith("MD5:"):
            digest = hashlib.md5(password.encode(), usedforsecurity=False).hexdigest()
            return hmac.compare_digest(digest, cred[4:].lower())
        return hmac.compare_digest(cred.encode(), password.encode())


def parse_users(text: str, source: str = "users file") -> dict[str, User]:
    """Jetty's PropertyUserStore file: `name: credential[,role...]` lines (`=` also separates,
    `#`/`!` comment); credentials plain or `MD5:<hex>` (OBF: and CRYPT: are refused)."""
    users: dict[str, User] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        m = re.match(r"([^:=\s]+)\s*[:=]\s*(.*)$", line)
        if m is None:
            raise ConfigError(f"{source} line {n}: expected 'name: password[,role...]'")
        parts = [p.strip() for p in m.group(2).split(",")]
        cred = parts[0]
        if cred.startswith(("OBF:", "CRYPT:")):
            raise ConfigError(f"{source} line {n}: {cred.split(':')[0]}: passwords are not "
                              f"supported by Samsa (use plain text or MD5:<hex>)")
        users[m.group(1)] = User(m.group(1), cred, frozenset(p for p in parts[1:] if p))
    return users


def jaas_users_file(jaas_text: str, realm: str, source: str = "JAAS file") -> str:
    """The `file` option of the realm's login module in a JAAS file (`Realm { Module required
    file="..."; };`)."""
    from samsa.security.sasl.jaas import parse_jaas

    for m in re.finditer(r"([\w.$-]+)\s*\{(.*?)\}\s*;", jaas_text, re.S):
        if m.group(1) != realm:
            continue
        _, opts = parse_jaas(m.group(2).strip())
        if "file" not in opts:
            raise ConfigError(f"{source}: the {realm} entry has no file=\"...\" option")
        return opts["file"]
    raise ConfigError(f"{source}: no login entry named {realm!r} (authentication.realm)")


def _jaas_from_env() -> str | None:
    for arg in shlex.split(os.environ.get(JAAS_ENV, "")):
        if arg.startswith(f"-D{JAAS_FILE}="):
            return arg.split("=", 1)[1]
    return None


def _csv(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


@dataclass
class BasicAuth:
    realm: str
    users: dict[str, User]
    allowed_roles: frozenset[str] | None  # None: any role (`*`)
    levels: dict[str, int]  # role -> level
    skip_paths: tuple[str, ...]

    @classmethod
    def from_settings(cls, get: Lookup) -> BasicAuth | None:
        """None when authentication.method is NONE (the default); ConfigError when BASIC cannot
        work (no users file, a file that does not load)."""
        method = (get("authentication.method") or "NONE").upper()
        if method == "NONE":
            return None
        if method != "BASIC":
            raise ConfigError(f"authentication.method={method}: Samsa's registry supports NONE "
                              f"and BASIC")
        realm = get("authentication.realm") or DEFAULT_REALM
        path = get(USERS_FILE)
        if not path:
            jaas = get(JAAS_FILE) or _jaas_from_env()
            if not jaas:
                raise ConfigError(f"authentication.method=BASIC needs users: set {USERS_FILE}, or "
                                  f"a JAAS file ({JAAS_FILE}, or -D{JAAS_FILE}=... in "
                                  f"${JAAS_ENV}) with a {realm} entry naming the users file")
            try:
                path = jaas_users_file(Path(jaas).read_text(), realm, jaas)
            except OSError as e:
                raise ConfigError(f"cannot read the JAAS file {jaas}: {e.strerror}") from None
        try:
            users = parse_users(Path(path).read_text(), path)
        except OSError as e:
            raise ConfigError(f"cannot read the registry users file {path}: {e.strerror}") from None
        roles = _csv(get("authentication.roles") or "*")
        allowed = None if any(r in ("*", "**") for r in roles) else frozenset(roles)
        levels: dict[str, int] = {}
        for key, default, level in reversed(LEVEL_SETTINGS):
            for role in _csv(get(key) if get(key) is not None else default):
                levels[role] = max(level, levels.get(role, 0))
        return cls(realm, users, allowed, levels, tuple(_csv(get("authentication.skip.paths"))))

    def skipped(self, path: str) -> bool:
        for p in self.skip_paths:
            if p == path or (p.endswith("/*") and (path + "/").startswith(p[:-1])):
                return True
        return False

    def authenticate(self, header: str | None) -> tuple[User | None, str]:
        """(user, "") or (None, why) for an Authorization header."""
        if not header:
            return None, "no credentials"
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic":
            return None, "not basic authentication"
        try:
            name, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None, "malformed credentials"
        user = self.users.get(name)
        if not sep or user is None or not user.check(password):
            return None, f"bad credentials for {name!r}"
        return user, ""

    def level(self, user: User) -> int | None:
        """The user's level; None if no role of the user is in authentication.roles."""
        roles = user.roles if self.allowed_roles is None else user.roles & self.allowed_roles
        if not roles:
            return None
        return max((self.levels.get(r, 0) for r in roles), default=0)


_REGISTER = re.compile(r"/subjects/.*/versions/?")


def required(method: str, path: str) -> tuple[int, str]:
    """(level, Confluent-style "operation on resource") a request needs. `path` is the raw
    path (a subject's own '/' is %2F there); the kind of request is decided on the decoded path,
    as the registry's routes see it (a raw `/subjects/x%2Fversions` POST is a registration)."""
    parts = [p for p in path.split("/") if p]
    decoded = urllib.parse.unquote(path)
    dparts = [p for p in decoded.split("/") if p]
    head = dparts[0] if dparts else ""
    subject = urllib.parse.unquote(parts[1]) if len(parts) > 1 else None
    on = f"Subject: {subject}" if subject else "Global"
    if method in ("GET", "HEAD", "OPTIONS"):
        return READ, f"Read on {on}"
    if head == "compatibility" or (head == "subjects" and method == "POST"
                                   and len(dparts) > 1 and not _REGISTER.fullmatch(decoded)):
        return READ, f"Read on {on}"  # compatibility tests and lookups write nothing
    if head == "subjects" and method == "POST":
        return WRITE, f"Write on {on}"
    if head == "subjects" and method == "DELETE":
        return WRITE, f"Delete on {on}"
    if head == "config" and subject:
        return WRITE, f"AlterCompatibility on {on}"
    if head == "config":
        return ADMIN, "AlterCompatibility on Global"
    if head == "mode":
        return ADMIN, f"AlterMode on {on}"
    return ADMIN, f"{method} on {on}"


ASGI = Callable[..., Awaitable[None]]


class AuthMiddleware:
    """An ASGI wrapper that answers 401/403 before the registry sees a request it may not serve;
    the authenticated user's name goes into scope["user_name"] (forwarding keeps the header)."""

    def __init__(self, app: ASGI, auth: BasicAuth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.auth.skipped(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = None
        for k, v in scope.get("headers", []):
            if k == b"authorization":
                header = v.decode("latin-1")
        user, why = self.auth.authenticate(header)
        if user is None:
            log.info("401 for %s %s from %s: %s", scope["method"], scope["path"],
                     (scope.get("client") or ("?",))[0], why)
            await _answer(send, 401, {"error_code": 401, "message": "Unauthorized"},
                          [(b"www-authenticate", f'Basic realm="{self.auth.realm}"'.encode())])
            return
        level = self.auth.level(user)
        if level is None:
            await _answer(send, 403, {"error_code": 403, "message": "Forbidden"})
            return
        raw = scope.get("raw_path") or scope["path"].encode()
        need, what = required(scope["method"], raw.decode("latin-1").split("?", 1)[0])
        if level < need:
            await _answer(send, 403, {"error_code": 40301,
                                      "message": f"User is denied operation {what}"})
            return
        await self.app({**scope, "user_name": user.name}, receive, send)


async def _answer(send: Any, status: int, body: dict[str, Any],
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    raw = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", CONTENT_TYPE),
                            (b"content-length", str(len(raw)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": raw})
