"""Kafka Connect's REST API (app.py) and its embedded HTTP server (server.py)."""

from .app import ConnectRestApp
from .loggers import Loggers
from .server import ConnectRestServer

__all__ = ["ConnectRestApp", "ConnectRestServer", "Loggers"]
