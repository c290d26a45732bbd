"""`attnmt serve`: bind the port, load the runs, run uvicorn until interrupted.

The port is bound before the runs load, so a port in use is reported at once (one line, exit
2) instead of after seconds of loading models; uvicorn then serves on that very socket.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from attnmt.serve.schemas import Limits
from attnmt.utils import UserError

BACKLOG = 2048  # uvicorn's own default

if TYPE_CHECKING:  # torch: loaded once the port is bound
    from attnmt.loading import ModelSpec


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port; an unknown host or a port in use is a UserError.

    It listens from here on, before the runs load and uvicorn starts: a client that connects as
    soon as the start-up line names the port waits in the backlog instead of being refused."""
    if not 0 <= port <= 65535:
        raise UserError(f"expected 0-65535, got {port}", field="port")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        raise UserError(f"{host}: cannot resolve it ({error.strerror})", field="host") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart may reuse a port in TIME_WAIT
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port} ({error.strerror})", field="port") from None
    sock.listen(BACKLOG)
    return sock


def serve(
    models: Sequence[ModelSpec],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: Limits | None = None,
    glossary: str | None = None,
) -> None:
    """Serve `models` (each a run, an export or an ensemble) at http://host:port until SIGINT/SIGTERM;
    `glossary`: a glossary file for the requests that send none (`Catalog.load`)."""
    import uvicorn

    from attnmt.serve.app import create_app
    from attnmt.serve.catalog import Catalog

    sock = bind(host, port)
    try:
        catalog = Catalog.load(models, glossary)
        app = create_app(catalog, limits)
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        print(
            f"attnmt: serving {', '.join(catalog.runs)} at http://{shown}:{bound_port} "
            f"(API documentation at /docs; Ctrl-C stops)",
            file=sys.stderr,
            flush=True,
        )
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        server.run(sockets=[sock])
    finally:
        sock.close()
