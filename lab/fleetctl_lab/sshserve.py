"""One way for the lab to open an SSH listener: the asked port, else an ephemeral one."""

from __future__ import annotations

import logging
from typing import Any


async def serve_ssh(factory: Any, host: str, port: int, *, what: str, log: logging.Logger, **kwargs: Any) -> Any:
    """``asyncssh.create_server`` on host:port; on an ephemeral port of host when that one is taken.

    A second lab (another user, a test run) may hold the port on an address;
    the caller publishes the port actually bound.
    """
    import asyncssh

    for p in dict.fromkeys((port, 0)):
        try:
            return await asyncssh.create_server(factory, host, p, **kwargs)
        except OSError as e:
            if p == 0:
                raise
            log.debug("%s: cannot bind %s:%s (%s); using an ephemeral port", what, host, p, e)
    raise AssertionError("unreachable")


async def close_all(servers: list[Any]) -> None:
    """Close the listeners and wait (a second each at most) until they are closed; empty the list."""
    import asyncio
    import contextlib

    for srv in servers:
        srv.close()
    for srv in servers:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(srv.wait_closed(), 1.0)
    servers.clear()
