"""Kafka Connect's REST API (app.py) and its embedded HTTP server (server.py)."""

from .app import ConnectRestApp, create_app
from .loggers import Loggers
from .server import ConnectRestServer

__all__ = ["ConnectRestApp", "create_app", "ConnectRestServer", "Loggers"]
