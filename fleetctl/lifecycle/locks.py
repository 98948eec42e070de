"""Per-server locks: a compare-and-set on the server row's reservation.

``with acquire(conn_factory, names, purpose=...)`` reserves servers for one
worker; a second worker, in this process or another, on this machine or
another, sees "locked by WHO since WHEN for WHAT". The lock is a row update
that succeeds only where ``reservation IS NULL``, so it works the same on
SQLite and PostgreSQL. A worker that dies leaves its lock: `fleetctl server
unlock` (or ``break_stale``) recovers it once its owner is gone.

Who holds a lock travels as a :class:`~fleetctl.holders.Holder` (defined
below the store, which reads reservations too; whether it still runs is asked
through the checks the engines register there, so the lock knows no engine)
and a refusal as a :class:`Refused` (holder, since, purpose); the text is made
from them only where a person reads it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update

from fleetctl.errors import Locked
from fleetctl.holders import Holder, actor
from fleetctl.store import immediate
from fleetctl.store import tables as T
from fleetctl.times import utcnow


@dataclass(frozen=True)
class Refused:
    """Why a server could not be locked: who holds it since when for what (holder None: no such server)."""

    server: str
    holder: Holder | None = None
    since: dt.datetime | None = None
    purpose: str | None = None

    @property
    def stale(self) -> bool:
        """Held by a process of this host that is gone: safe to recover."""
        return self.holder is not None and self.holder.alive() is False

    def __str__(self) -> str:
        if self.holder is None:
            return "no such server"
        # Stored in UTC; SQLite gives it back without its zone, PostgreSQL in the session's: say UTC on both.
        utc = (self.since.replace(tzinfo=dt.UTC) if self.since.tzinfo is None else self.since.astimezone(dt.UTC)) if self.since else None
        since = utc.isoformat(timespec="seconds") if utc else "?"
        return f"locked by {self.holder} since {since} for {self.purpose}"

    @property
    def advice(self) -> str:
        """What the operator can do. Never ``--force`` while the holder runs: two workflows would then work one server."""
        if self.holder is None:
            return ""
        alive = self.holder.alive()
        if self.holder.workflow is not None:
            if alive is False:
                return "its workflow is closed: the next run recovers the lock (or `fleetctl server unlock` now)"
            if alive is None:
                return (f"held by Temporal workflow {self.holder.workflow}, whose status cannot be read here (FLEETCTL_TEMPORAL): "
                        "wait for it to end, or leave that server out")  # fmt: skip
            return "its workflow is running (`fleetctl jobs cancel` stops it): wait for it to end, or leave that server out"
        if alive is False:
            return "its process is gone: the next run recovers the lock (or `fleetctl server unlock` now)"
        if alive is None and self.holder.host is not None:
            return (f"held from host {self.holder.host}: wait for it to end, or leave that server out "
                    f"(only if that process is gone: `fleetctl server unlock {self.server} --force`)")  # fmt: skip
        if alive is None:
            return ("held by hand: wait for it to end, or leave that server out "
                    f"(only if nobody works it: `fleetctl server unlock {self.server} --force`)")  # fmt: skip
        return "it is still running: wait for it to end, or leave that server out"

    def message(self) -> str:
        """``NAME is locked by ... since ... for ...: advice``, for a person."""
        return f"{self.server} is {self}" + (f": {self.advice}" if self.advice else "")


def _refusal(refused: dict[str, Refused]) -> Locked:
    """One Locked error for the servers that could not be locked: the first in full, and how many more."""
    first = next(iter(refused.values()))
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    return Locked(f"{first.server} is {first}{more}" + (f": {first.advice}" if first.advice else ""))


def owner_id() -> str:
    """Who holds a lock: user, host and pid, so a dead owner can be recognised."""
    return str(Holder.me())


def try_lock(engine: Any, names: list[str], *, purpose: str, owner: str | None = None) -> tuple[list[str], dict[str, Refused]]:
    """Lock what can be locked; return (locked, {name: why not})."""
    owner = owner or owner_id()
    got: list[str] = []
    refused: dict[str, Refused] = {}
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
            refused[name] = Refused(name)
        else:
            refused[name] = Refused(name, Holder.parse(row.reservation), row.reserved_at, row.reserved_for)
    return got, refused


def release(engine: Any, names: list[str], *, owner: str | None = None) -> None:

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
        raise _refusal(refused)
    try:
        yield got
    finally:
        release(engine, got, owner=owner)


def break_lock(engine: Any, name: str, *, force: bool = False) -> Holder | None:
    """Clear a lock whose owner is gone (or any, with force); return the old holder."""

    with engine.connect() as conn:
        row = conn.execute(
            select(T.server.c.reservation, T.server.c.reserved_at, T.server.c.reserved_for).where(T.server.c.name == name)
        ).first()
    if row is None or row.reservation is None:
        return None
    holder = Holder.parse(row.reservation)
    alive = holder.alive()  # outside the write transaction: for a workflow it asks Temporal
    if alive is not False and not force:
        # A live holder: wait or leave the server out (never --force: two operators would work one server);
        # a holder on another host (which we cannot see) may be broken with --force once known gone.
        raise Locked(Refused(name, holder, row.reserved_at, row.reserved_for).message())
    with immediate(engine) as conn:
        n = conn.execute(
            update(T.server).where(T.server.c.name == name, T.server.c.reservation == row.reservation)
            .values(reservation=None, reserved_at=None, reserved_for=None)
        ).rowcount  # fmt: skip
    return holder if n else None  # (taken by someone else meanwhile: not the lock that was judged)


def lock_recovering(engine: Any, names: list[str], *, purpose: str, reason: str,
                    owner: str | None = None) -> tuple[list[str], dict[str, Refused]]:  # fmt: skip
    """:func:`try_lock`, then recover the locks of processes of this host that are gone (each an Event) and try those again.

    A workflow killed with its servers locked leaves its locks; the re-run that
    resumes it takes them back here. Returns (locked, {name: why not}).
    """


    owner = owner or owner_id()
    got, busy = try_lock(engine, names, purpose=purpose, owner=owner)
    stale = [n for n, why in busy.items() if why.stale]
    if not stale:
        return got, busy
    for n in stale:
        old = break_lock(engine, n)
        was = busy[n].holder
        gone = "workflow closed" if was is not None and was.workflow is not None else "process gone"
        with immediate(engine) as c:
            c.execute(insert(T.event).values(at=utcnow(), actor=actor(), action="server.unlock", object_kind="server", object_name=n,
                                             detail=f"stale lock of {old} ({gone}) recovered", reason=reason))  # fmt: skip
    got2, busy2 = try_lock(engine, stale, purpose=purpose, owner=owner)
    return got + got2, {**{n: w for n, w in busy.items() if n not in stale}, **busy2}


@contextmanager
def acquire_recovering(engine: Any, names: list[str], *, purpose: str, reason: str) -> Iterator[list[str]]:
    """:func:`acquire`, recovering stale locks first (:func:`lock_recovering`); all of ``names`` or none."""
    owner = owner_id()
    got, refused = lock_recovering(engine, names, purpose=purpose, reason=reason, owner=owner)
    if refused:
        release(engine, got, owner=owner)
        # Not "--force": the holder is alive (or on another host); two workflows on one server is what the lock prevents.
        raise _refusal(refused)
    try:
        yield got
    finally:
        release(engine, got, owner=owner)


def lock_all_recovering(engine: Any, names: list[str], *, purpose: str, reason: str, owner: str) -> list[str]:
    """:func:`lock_recovering`, all of ``names`` or none, for a run that locks in one step and releases in another
    (a described workflow's open and close; ``owner`` then names the run, a workflow on Temporal).

    Raises:
        Locked: a server is held by someone else (none is then locked).
    """
    got, refused = lock_recovering(engine, names, purpose=purpose, reason=reason, owner=owner)
    if refused:
        release(engine, got, owner=owner)
        raise _refusal(refused)
    return got
