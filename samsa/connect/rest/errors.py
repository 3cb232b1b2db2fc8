"""Connect's REST error bodies: `{"error_code": <HTTP status>, "message": ...}` for every failure,
and the mapping from the herder's exceptions to statuses (Kafka's ConnectExceptionMapper)."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

from ..errors import (
    AlreadyExistsException,
    BadRequestException,
    ConflictException,
    NotFoundException,
)

JSON = "application/json"


class RestError(Exception):
    """A failure with its HTTP status (Kafka's ConnectRestException)."""

    def __init__(self, status: int, message: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def json_response(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status_code=status, media_type=JSON)


def error_response(status: int, message: str | None) -> Response:
    return json_response({"error_code": status, "message": message}, status)


def status_of(exc: BaseException) -> int:
    """The HTTP status Kafka Connect answers for an exception from the herder."""
    if isinstance(exc, RestError):
        return exc.status
    if isinstance(exc, NotFoundException):
        return 404
    if isinstance(exc, AlreadyExistsException | ConflictException):
        return 409
    if isinstance(exc, BadRequestException):
        return 400
    return 500


def message_of(exc: BaseException) -> str | None:
    if isinstance(exc, RestError):
        return exc.message
    text = str(exc)
    return text if text else None
