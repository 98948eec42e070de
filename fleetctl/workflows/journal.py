"""The journal of every workflow: a Job and its steps, server by server, in the store.

One journal for all workflows. A fleet-wide BMC operation (``fleetctl power
on``, ``inspect``, ...) is a Job with one step row per server, written when
the sweep ends (:meth:`Journal.record`). Provisioning is a Job whose steps
are written as they happen: ``running`` before a step acts, ``succeeded`` or
``failed`` after, with what it did (:meth:`Journal.start_step`,
:meth:`Journal.note`, :meth:`Journal.end_step`), and read back to resume
(:meth:`Journal.passes`).

Rows travel as typed values (:class:`JobState`, :class:`StepState`,
:class:`StepRecord`, :class:`StepResult`); the text of the columns is made
here. Every write is its own short transaction (``BEGIN IMMEDIATE`` on
SQLite). A workflow running in an event loop writes through
:class:`AsyncJournal`: the same writes, on one writer thread, so a database
locked by another process makes the servers that need to write wait, never
the loop (and with it every other server).

A job records who runs it (``args["owner"]``: ``user:host:pid``, as a lock's
holder). A ``running`` job whose process of this host is gone (killed) is
marked ``interrupted`` by :func:`mark_interrupted`, which ``fleetctl jobs``
and every new job call first; a job of another host is left ``running``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import json
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import insert, select, update

from fleetctl.lifecycle.locks import Holder, owner_id
from fleetctl.lifecycle.machine import move
from fleetctl.lifecycle.states import ServerState as S
from fleetctl.store import immediate
from fleetctl.store import tables as T
from fleetctl.times import utcnow

T_ = TypeVar("T_")

# The working states a server walks through during a workflow, in order.
CHAIN = [S.PREPARING, S.INSTALLING, S.CONFIGURING, S.VALIDATING, S.READY]
WORKING = frozenset({S.PREPARING, S.INSTALLING, S.CONFIGURING, S.VALIDATING})

OWNER_ARG = "owner"  # the job's args key naming its process (user:host:pid)
OUTPUT_MAX = 20000  # characters of a step's output kept in its row
ERROR_MAX = 1000  # characters of a server's last_error


class JobState(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class StepState(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True)
class StepRecord:
    """A step row as read back from the journal."""

    id: int
    server_id: int
    name: str  # without the workflow's prefix
    state: StepState
    output: Any  # the JSON document it journaled, decoded (None: nothing)
    finished_at: dt.datetime | None


@dataclass
class Pass:
    """A server's current pass: its ``begin`` row and its steps' last rows (by step name)."""

    begin: int | None = None
    steps: dict[str, StepRecord] = field(default_factory=dict)

    def done(self) -> set[str]:
        return {n for n, r in self.steps.items() if r.state == StepState.SUCCEEDED}

    def interrupted(self) -> dict[str, Any]:
        """{step left running: what it had noted ({} when nothing)}."""
        return {n: (r.output or {}) for n, r in self.steps.items() if r.state == StepState.RUNNING}


@dataclass(frozen=True)
class StepResult:
    """One server's outcome of a one-shot operation, for :meth:`Journal.record`."""

    server_id: int
    ok: bool
    elapsed: float
    output: str | None = None  # already summarised as text
    error: str | None = None


def dump(value: Any) -> str | None:
    """A step's output as the journal keeps it: sorted JSON, at most OUTPUT_MAX characters."""
    if value is None:
        return None
    return json.dumps(value, default=str, sort_keys=True)[:OUTPUT_MAX]


def summary(value: Any) -> str | None:
    """A driver's result (a pydantic model, a dict, anything) as a step's output text."""
    if value is None:
        return None
    try:
        if hasattr(value, "model_dump"):
            return json.dumps(value.model_dump(mode="json"), sort_keys=True)[:OUTPUT_MAX]
        return json.dumps(value, default=str, sort_keys=True)[:OUTPUT_MAX]
    except (TypeError, ValueError):
        return str(value)[:OUTPUT_MAX]


def _load(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:  # an output cut at OUTPUT_MAX: what it noted is lost, the step runs again anyway
        return None


class Journal:
    """Job, steps and state moves in the store; every write its own short transaction.

    Blocking: call it from a thread, or through :class:`AsyncJournal` from a
    coroutine.
    """

    def __init__(self, engine: Any, job_id: int, actor: str, *, kind: str, prefix: str = "") -> None:
        self.engine = engine
        self.job_id = job_id
        self.actor = actor
        self.kind = kind
        self.prefix = prefix  # step names are written as prefix + name ("provision.firmware")

    @classmethod
    def open(cls, engine: Any, *, kind: str, target: str, args: dict[str, Any], actor: str, prefix: str = "") -> Journal:
        """Begin a job (``running``), recording its process; first mark this host's killed jobs interrupted."""
        from fleetctl.models import Job

        mark_interrupted(engine)
        args = {**args, OWNER_ARG: owner_id()}
        with immediate(engine) as conn:
            job_id = conn.execute(
                insert(Job.__table__).values(kind=kind, target=target, state=JobState.RUNNING.value, actor=actor, args=args,
                                             created_at=utcnow())  # fmt: skip
            ).inserted_primary_key[0]  # type: ignore[index]
        return cls(engine, job_id, actor, kind=kind, prefix=prefix)

    # --- reading back ---------------------------------------------------

    def passes(self, server_ids: Iterable[int]) -> dict[int, Pass]:
        """Per server: its current pass (the last ``begin`` row of this kind of job, and the steps after it)."""
        ids = list(server_ids)
        out = {sid: Pass() for sid in ids}
        if not ids:
            return out
        s = T.job_step.c
        q = (
            select(s.id, s.server_id, s.name, s.state, s.output, s.finished_at)
            .join(T.job, T.job.c.id == s.job_id)
            .where(T.job.c.kind == self.kind, s.server_id.in_(ids), s.name.like(f"{self.prefix}%"))
            .order_by(s.id)
        )
        with self.engine.connect() as conn:
            for r in conn.execute(q):
                p = out[r.server_id]
                step = r.name.removeprefix(self.prefix)
                if step == "begin":
                    p.begin, p.steps = r.id, {}
                else:
                    p.steps[step] = StepRecord(r.id, r.server_id, step, StepState(r.state), _load(r.output), r.finished_at)
        return out

    # --- steps ------------------------------------------------------------

    def _step_row(self, server_id: int, name: str, state: StepState, *, output: Any = None, error: str | None = None,
                  finished: bool = False) -> int:  # fmt: skip
        from fleetctl.models import JobStep

        now = utcnow()
        with immediate(self.engine) as conn:
            return conn.execute(
                insert(JobStep.__table__).values(
                    job_id=self.job_id, server_id=server_id, name=self.prefix + name, state=state.value, started_at=now,
                    finished_at=now if finished else None, output=dump(output), error=error,
                )
            ).inserted_primary_key[0]  # type: ignore[index]

    def begin_pass(self, server_id: int, detail: dict[str, Any]) -> None:
        """Start a new pass over a server: steps journaled before it no longer count as done."""
        self._step_row(server_id, "begin", StepState.SUCCEEDED, output=detail, finished=True)

    def start_step(self, server_id: int, name: str, *, noted: Any = None) -> int:
        """A step's row, ``running``; its id.

        ``noted``: what the interrupted row of this step had noted, when it is
        resumed. The new row starts with it, so a run killed again before the
        step notes anything (while it asks the BMC whether its power-on
        happened, say) does not lose it: the next run resumes from it too.
        """
        return self._step_row(server_id, name, StepState.RUNNING, output=noted or None)

    def note(self, step_id: int, output: Any) -> None:
        """Write what a step is about to do (or has learned) before it goes on."""
        with immediate(self.engine) as conn:
            conn.execute(update(T.job_step).where(T.job_step.c.id == step_id).values(output=dump(output)))

    def end_step(self, step_id: int, state: StepState, *, output: Any = None, error: str | None = None) -> None:
        with immediate(self.engine) as conn:
            conn.execute(
                update(T.job_step).where(T.job_step.c.id == step_id).values(
                    state=state.value, finished_at=utcnow(), output=dump(output), error=error
                )
            )

    def record(self, results: Iterable[StepResult], *, pins: dict[str, str], state: JobState, error: str | None) -> None:
        """A one-shot operation's outcome in one transaction: a step row per server (named as the job's
        kind), the certificates learned, and the job finished."""
        from fleetctl.models import JobStep

        now = utcnow()
        rows = [
            {"job_id": self.job_id, "server_id": r.server_id, "name": self.prefix + self.kind,
             "state": (StepState.SUCCEEDED if r.ok else StepState.FAILED).value,
             "started_at": now - dt.timedelta(seconds=r.elapsed), "finished_at": now, "error": r.error, "output": r.output}
            for r in results
        ]  # fmt: skip
        with immediate(self.engine) as conn:
            if rows:
                conn.execute(insert(JobStep.__table__), rows)
            for name, fp in pins.items():
                _pin(conn, name, fp)
            conn.execute(update(T.job).where(T.job.c.id == self.job_id).values(state=state.value, finished_at=utcnow(), error=error))

    def finish(self, state: JobState, error: str | None) -> None:
        with immediate(self.engine) as conn:
            conn.execute(update(T.job).where(T.job.c.id == self.job_id).values(state=state.value, finished_at=utcnow(), error=error))

    # --- the servers ---------------------------------------------------------

    def pin(self, name: str, fingerprint: str) -> None:
        """Trust on first use: record a BMC's certificate only where nothing was pinned yet."""
        with immediate(self.engine) as conn:
            _pin(conn, name, fingerprint)

    def advance(self, name: str, wanted: S, *, reason: str) -> S:
        """Walk the server along the chain of working states up to ``wanted``; return the state now."""
        with immediate(self.engine) as conn:
            current = S(conn.execute(select(T.server.c.state).where(T.server.c.name == name)).scalar_one())
            if current == wanted:
                return current
            if current not in WORKING:
                move(conn, name, S.PREPARING, actor=self.actor, reason=reason, expected=current)
                current = S.PREPARING
            while current != wanted and current in CHAIN and CHAIN.index(current) < CHAIN.index(wanted):
                nxt = CHAIN[CHAIN.index(current) + 1]
                move(conn, name, nxt, actor=self.actor, reason=reason, expected=current)
                current = nxt
            return current

    def fail(self, name: str, error: str, *, reason: str) -> None:
        """The server to ``failed`` with ``last_error`` (audited by the move, with ``reason``); already failed: the error replaced."""
        with immediate(self.engine) as conn:
            current = conn.execute(select(T.server.c.state).where(T.server.c.name == name)).scalar_one()
            if current != S.FAILED:
                move(conn, name, S.FAILED, actor=self.actor, reason=reason, expected=current, error=error[:ERROR_MAX])
            else:
                conn.execute(update(T.server).where(T.server.c.name == name).values(last_error=error[:ERROR_MAX]))

    def set_target(self, name: str, target: S | None) -> None:
        with immediate(self.engine) as conn:
            conn.execute(update(T.server).where(T.server.c.name == name).values(target_state=target.value if target else None))


def job_owner(args: Any) -> Any:
    """The :class:`~fleetctl.lifecycle.locks.Holder` that runs (or ran) a job, from its args; None when not recorded."""
    owner = args.get(OWNER_ARG) if isinstance(args, dict) else None
    return Holder.parse(owner) if isinstance(owner, str) else None


def _gone(holder: Any) -> str:
    return f"workflow {holder.workflow} is closed" if holder.workflow is not None else f"process {holder} is gone"


def mark_interrupted(engine: Any) -> list[int]:
    """Mark ``interrupted`` every ``running`` job whose process, on this host, is gone (or whose workflow on
    Temporal is closed: terminated, say, so that its own close never ran); their ids.

    A job killed with SIGKILL (or whose machine rebooted) never wrote its end.
    Its steps are left as they are: a step left ``running`` is what a resumed
    run reads to know what was interrupted. A job of another host, or one that
    recorded no process, is left ``running`` (``jobs list`` shows its host).
    """
    j = T.job.c
    with engine.connect() as conn:
        rows = conn.execute(select(j.id, j.args).where(j.state == JobState.RUNNING.value)).all()
    gone = []
    for r in rows:
        holder = job_owner(r.args)
        if holder is not None and holder.alive() is False:
            gone.append((r.id, holder))
    marked = []
    for job_id, holder in gone:
        with immediate(engine) as conn:
            n = conn.execute(
                update(T.job).where(j.id == job_id, j.state == JobState.RUNNING.value).values(
                    state=JobState.INTERRUPTED.value, finished_at=utcnow(), error=f"interrupted: its {_gone(holder)}")
            ).rowcount  # fmt: skip
        if n:
            marked.append(job_id)
    return marked


def _pin(conn: Any, name: str, fingerprint: str) -> None:
    conn.execute(update(T.server).where(T.server.c.name == name, T.server.c.bmc_fingerprint.is_(None)).values(bmc_fingerprint=fingerprint))


class AsyncJournal:
    """A :class:`Journal` for coroutines: each write runs on one writer thread, in the order asked.

    Awaiting a write waits for it to be in the store (a step that notes what
    it is about to do goes on only once that is written), but never blocks
    the event loop: a database locked by another process holds up the servers
    that need to write, while the others go on with their devices. Threads
    (Ansible's event reader) queue notes with :meth:`note_soon` without waiting.
    :meth:`close` waits for every queued write.
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleetctl-journal")

    @property
    def job_id(self) -> int:
        return self.journal.job_id

    async def _call(self, fn: Callable[..., T_], /, *args: Any, **kw: Any) -> T_:
        return await asyncio.get_running_loop().run_in_executor(self._writer, partial(fn, *args, **kw))

    def note_soon(self, step_id: int, output: Any) -> None:
        """:meth:`Journal.note`, queued from any thread (Ansible's event reader) without waiting for it."""
        self._writer.submit(self.journal.note, step_id, output)

    def close(self) -> None:
        self._writer.shutdown(wait=True)

    async def drain(self) -> None:
        """Wait until every write queued so far is in the store (without closing the journal)."""
        await self._call(lambda: None)

    async def passes(self, server_ids: Iterable[int]) -> dict[int, Pass]:
        return await self._call(self.journal.passes, list(server_ids))

    async def begin_pass(self, server_id: int, detail: dict[str, Any]) -> None:
        await self._call(self.journal.begin_pass, server_id, detail)

    async def start_step(self, server_id: int, name: str, *, noted: Any = None) -> int:
        return await self._call(self.journal.start_step, server_id, name, noted=noted)

    async def note(self, step_id: int, output: Any) -> None:
        await self._call(self.journal.note, step_id, output)

    async def end_step(self, step_id: int, state: StepState, *, output: Any = None, error: str | None = None) -> None:
        await self._call(self.journal.end_step, step_id, state, output=output, error=error)

    async def pin(self, name: str, fingerprint: str) -> None:
        await self._call(self.journal.pin, name, fingerprint)

    async def advance(self, name: str, wanted: S, *, reason: str) -> S:
        return await self._call(self.journal.advance, name, wanted, reason=reason)

    async def fail(self, name: str, error: str, *, reason: str) -> None:
        await self._call(self.journal.fail, name, error, reason=reason)

    async def set_target(self, name: str, target: S | None) -> None:
        await self._call(self.journal.set_target, name, target)
