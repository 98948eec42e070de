"""Per-server locks: a compare-and-set on the server row's reservation.

``with acquire(conn_factory, names, purpose=...)`` reserves servers for one
worker; a second worker, in this process or another, on this machine or
another, sees "locked by WHO since WHEN for WHAT". The lock is a row update
that succeeds only where ``reservation IS NULL``, so it works the same on
SQLite and PostgreSQL. A worker that dies leaves its lock: `fleetctl server
unlock` (or ``break_stale``) recovers it once its owner is gone.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import select, update

from fleetctl.errors import Locked
from fleetctl.store import immediate


def owner_id() -> str:
    """Who holds a lock: user, host and pid, so a dead owner can be recognised."""
    from fleetctl.inventory.service import actor

    return f"{actor()}:{socket.gethostname()}:{os.getpid()}"


def _owner_alive(owner: str) -> bool | None:
    """Whether the process holding a lock still runs (None: another host, unknown)."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[1] != socket.gethostname():
        return None
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


def try_lock(engine: Any, names: list[str], *, purpose: str, owner: str | None = None) -> tuple[list[str], dict[str, str]]:
    """Lock what can be locked; return (locked, {name: why not})."""
    from fleetctl.models.base import utcnow
    from fleetctl.store import tables as T

    owner = owner or owner_id()
    got, refused = [], {}
    for name in names:
        with immediate(engine) as conn:
            n = conn.execute(
                update(T.server)
                .where(T.server.c.name == name, T.server.c.reservation.is_(None))
                .values(reservation=owner, reserved_at=utcnow(), reserved_for=purpose)
            ).rowcount
            if n == 1:
                got.append(name)
                continue
            row = conn.execute(
                select(T.server.c.reservation, T.server.c.reserved_at, T.server.c.reserved_for).where(T.server.c.name == name)
            ).first()
        if row is None:
            refused[name] = "no such server"
        else:
            since = row.reserved_at.isoformat(timespec="seconds") if row.reserved_at else "?"
            refused[name] = f"locked by {row.reservation} since {since} for {row.reserved_for}"
    return got, refused


def release(engine: Any, names: list[str], *, owner: str | None = None) -> None:
    from fleetctl.store import tables as T

    owner = owner or owner_id()
    with immediate(engine) as conn:
        for name in names:
            conn.execute(
                update(T.server).where(T.server.c.name == name, T.server.c.reservation == owner)
                .values(reservation=None, reserved_at=None, reserved_for=None)
            )  # fmt: skip


@contextmanager
def acquire(engine: Any, names: list[str], *, purpose: str) -> Iterator[list[str]]:
    """Lock all of ``names`` or none; release on exit (also on error or Ctrl-C)."""
    owner = owner_id()
    got, refused = try_lock(engine, names, purpose=purpose, owner=owner)
    if refused:
        release(engine, got, owner=owner)
        first = next(iter(refused.items()))
        raise Locked(f"{first[0]} is {first[1]}" + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""))
    try:
        yield got
    finally:
        release(engine, got, owner=owner)


def break_lock(engine: Any, name: str, *, force: bool = False) -> str | None:
    """Clear a lock whose owner is gone (or any, with force); return the old owner."""
    from fleetctl.store import tables as T

    with immediate(engine) as conn:
        row = conn.execute(select(T.server.c.reservation).where(T.server.c.name == name)).first()
        if row is None or row.reservation is None:
            return None
        alive = _owner_alive(row.reservation)
        if alive and not force:
            raise Locked(f"{name} is locked by {row.reservation}, which is still running; stop it, or give --force")
        if alive is None and not force:
            raise Locked(f"{name} is locked by {row.reservation} on another host; give --force if you know it is gone")
        conn.execute(
            update(T.server).where(T.server.c.name == name, T.server.c.reservation == row.reservation)
            .values(reservation=None, reserved_at=None, reserved_for=None)
        )  # fmt: skip
        return row.reservation
