"""Connect's exception hierarchy (org.apache.kafka.connect.errors), so connectors signal the same
intent: retriable vs fatal, bad data vs bad config."""

from __future__ import annotations


class ConnectException(Exception):
    """A failure of a connector, task, converter or transform; fails the task unless tolerated."""


class RetriableException(ConnectException):
    """A transient failure: the runtime retries the operation (errors.retry.timeout)."""


class DataException(ConnectException):
    """Data that does not fit its schema or cannot be converted."""


class ConfigException(ConnectException):
    """An invalid configuration value."""

    def __init__(self, name: str, value: object = None, message: str | None = None) -> None:
        """ConfigException("free text"), or (name, value, why) as Kafka words it."""
        self.name = name
        self.value = value
        if message is None and value is None:
            text = name
        elif value is None:
            text = message or name
        else:
            text = f"Invalid value {value} for configuration {name}" + (f": {message}" if message else "")
        super().__init__(text)


class NotFoundException(ConnectException):
    """A connector, task or plugin that does not exist (REST 404)."""


class AlreadyExistsException(ConnectException):
    """A connector created twice (REST 409)."""


class BadRequestException(ConnectException):
    """A request the REST API refuses with 400 (invalid config, offsets of a running connector)."""


class ConflictException(ConnectException):
    """A request that cannot be served right now (REST 409): a rebalance in progress, stale
    configuration."""


class NotLeaderException(ConnectException):
    """Distributed mode: only the leader worker can serve this request; REST forwards it to
    `leader_url` (None while no leader is known: 409)."""

    def __init__(self, message: str, leader_url: str | None) -> None:
        super().__init__(message)
        self.leader_url = leader_url
