"""Connection URLs the sinks accept, JDBC-style (what Confluent's connectors are configured with)
and libpq/SQLAlchemy-style: which database, where, and as whom."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from ...errors import ConnectException

SUPPORTED = ("jdbc:postgresql://host:port/db", "postgresql://...", "postgres://...",
             "jdbc:duckdb:<path>", "duckdb:///<path>", "duckdb:<path>", ":memory:")
# JDBC driver property -> libpq keyword (the ones with a direct counterpart)
_PG_PARAMS = {"user": "user", "password": "password", "sslmode": "sslmode",
              "connectTimeout": "connect_timeout", "connect_timeout": "connect_timeout",
              "ApplicationName": "application_name", "applicationName": "application_name",
              "application_name": "application_name", "options": "options",
              "sslrootcert": "sslrootcert", "sslcert": "sslcert", "sslkey": "sslkey"}


@dataclass
class ParsedUrl:
    kind: str  # "postgresql" | "duckdb"
    params: dict[str, str] = field(default_factory=dict)  # libpq keywords, or {"path": ...}

    def safe(self) -> str:
        """The URL's target without secrets, for messages."""
        if self.kind == "duckdb":
            return f"duckdb:{self.params.get('path')}"
        p = self.params
        return f"postgresql://{p.get('host', '')}:{p.get('port', '')}/{p.get('dbname', '')}"


def parse_url(url: str, user: str | None = None, password: str | None = None) -> ParsedUrl:
    text = (url or "").strip()
    if text == ":memory:":
        return ParsedUrl("duckdb", {"path": ":memory:"})
    lower = text.lower()
    if lower.startswith("jdbc:duckdb:"):
        return ParsedUrl("duckdb", {"path": text[len("jdbc:duckdb:"):] or ":memory:"})
    if lower.startswith("duckdb:"):
        rest = text[len("duckdb:"):]
        if rest.startswith("//"):
            rest = rest[2:]  # duckdb:///abs/path -> /abs/path, duckdb://rel -> rel
        return ParsedUrl("duckdb", {"path": unquote(rest) or ":memory:"})
    if lower.startswith("jdbc:postgresql:"):
        text = text[len("jdbc:"):]
        lower = text.lower()
    if lower.startswith(("postgresql://", "postgres://")):
        return ParsedUrl("postgresql", _pg_params(text, user, password))
    raise ConnectException(f"Unsupported connection URL {_redact(url)!r}: expected one of "
                           + ", ".join(SUPPORTED))


def _pg_params(text: str, user: str | None, password: str | None) -> dict[str, str]:
    parts = urlsplit(text)
    params: dict[str, str] = {"host": parts.hostname or "127.0.0.1",
                              "port": str(parts.port or 5432),
                              "dbname": unquote(parts.path.lstrip("/")) or "postgres"}
    if parts.username:
        params["user"] = unquote(parts.username)
    if parts.password:
        params["password"] = unquote(parts.password)
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if k in _PG_PARAMS:
            params[_PG_PARAMS[k]] = v
        elif k == "currentSchema":
            params["options"] = f"-c search_path={v}"
    if user:
        params["user"] = user
    if password:
        params["password"] = password
    return params


def _redact(url: str) -> str:
    """A URL as it may appear in a message: no password."""
    try:
        parts = urlsplit(url)
        if parts.password:
            url = url.replace(":" + parts.password + "@", ":***@")
    except ValueError:
        pass
    out = []
    for piece in url.split("&"):
        out.append(piece.split("=", 1)[0] + "=***" if "password=" in piece.lower() else piece)
    return "&".join(out)
