"""Binding the listening socket of an embedded HTTP server (admin, Connect REST, registry).

The socket is bound here and handed to uvicorn (`serve(sockets=[sock])`) because uvicorn, when it
binds itself and the port is taken, logs and calls sys.exit(): inside a broker or Connect worker
that would end the whole process. Bound here, a busy port is an OSError the caller reports.
"""

from __future__ import annotations

import socket


def bind_tcp(host: str, port: int, what: str) -> socket.socket:
    """A TCP socket bound to host:port (port 0: a free one; read it with getsockname), with
    SO_REUSEADDR, not yet listening (uvicorn listens on it). An OSError naming `what` and the
    address (with the original errno) if the bind fails."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"{what} could not listen on {host}:{port}: {e.strerror}") from None
    return sock
