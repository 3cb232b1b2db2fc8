"""The broker: listeners, connections, request dispatch and API handlers."""
