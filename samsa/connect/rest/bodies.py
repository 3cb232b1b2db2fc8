"""Request bodies read the way Kafka Connect's Jackson mapping reads them. Kafka answers 500 for a
body that is not JSON or does not fit the expected type (its exception mapper has no case for
Jackson's errors) and 400 only for the checks its resources make; we do the same, with Python's
wording of the parse error. Scalars in a string map become strings (1 -> "1", true -> "true"), as
Jackson coerces them."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from .errors import RestError

MAX_BODY = 16 << 20
_JSON_TYPES = ("application/json", "text/json")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    if isinstance(value, bool):
        return "Boolean"
    if value is None:
        return "null"
    return "Number"


async def read_json(request: Request, max_body: int = MAX_BODY) -> Any:
    """The body as JSON; None when empty. 415 for a non-JSON content type (none given is taken as
    JSON), 413 past `max_body`, 500 when it does not parse."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype and ctype not in _JSON_TYPES and not ctype.endswith("+json"):
        raise RestError(415, "HTTP 415 Unsupported Media Type")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body:
        raise RestError(413, f"Request body is larger than {max_body} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            raise RestError(413, f"Request body is larger than {max_body} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    request._body = raw  # the stream is consumed: keep the bytes for forwarding
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: absurd nesting
        raise RestError(500, f"Cannot parse the request body as JSON: {e}") from None


def string_value(value: Any, where: str) -> str | None:
    """A JSON scalar as Jackson reads it into a String (null stays null)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    raise RestError(500, f"Cannot deserialize value of type `java.lang.String` from {_kind(value)} "
                         f"value (at {where})")


def string_map(value: Any, what: str = "the request body") -> dict[str, str | None]:
    """A JSON object of strings (values may be null); 500 for any other shape."""
    if not isinstance(value, dict):
        raise RestError(500, f"Cannot deserialize {what} as a map of strings from {_kind(value)} value")
    return {str(k): string_value(v, f"{what}[{json.dumps(k)}]") for k, v in value.items()}


def require_object(value: Any, what: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """A JSON object with only the known fields (Jackson fails on unrecognized ones)."""
    if not isinstance(value, dict):
        raise RestError(500, f"Cannot deserialize {what} from {_kind(value)} value")
    for key in value:
        if key not in fields:
            known = ", ".join(f'"{f}"' for f in fields)
            raise RestError(500, f'Unrecognized field "{key}" in {what} (known properties: {known})')
    return value
