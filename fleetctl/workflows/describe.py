"""One description of a workflow, run by either engine: the in-process loop here, or Temporal (``fleetctl.scaleout.run_wf``).

A workflow is described once, by a :class:`Description`:

- ``open(ctx, request)``: the refusals (a :class:`~fleetctl.errors.FleetError`:
  nothing was touched), the job, the locks, the plan made once; returns an
  :class:`Opened`: the run's shared data and its units, each one target's work
  with the site whose workers may do it;
- ``unit(ctx, run, data)``: one target's work, a dataclass in and a dataclass
  out. On Temporal a unit whose worker is lost runs again on another: it must
  find what the lost attempt recorded (a store row, a journal entry) before it
  acts again;
- ``close(ctx, run, kept, outcomes, interrupted)``: the counts, the job's
  rows, the locks released; called once, also when the run is interrupted
  (Ctrl-C in process, a cancelled workflow on Temporal), with the units done
  so far. ``kept`` is what open made for close alone (the locks it took, what
  an earlier pass did): on Temporal it is not carried to every unit.

The request, the run's data, a unit's input and output and the result are
dataclasses of plain values (names, ids, thresholds, verdicts): on Temporal they
travel through a workflow's history, so they never hold a secret; a unit resolves
its own target's credentials and keys on the worker, from the inventory's
references. :func:`plain` and :func:`typed` turn them into JSON values and back.

:func:`run_local` is the in-process engine: ``open``, the units at most
``Opened.concurrency`` at once, ``close``. The Temporal engine runs the same
three through one parent workflow and one set of activities, found by the
description's name in the :func:`register`-ed descriptions.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

from fleetctl.errors import FleetError
from fleetctl.holders import Holder

Req = TypeVar("Req")  # the request: what the command asks
Run = TypeVar("Run")  # the run's data, made by open and given to each unit and to close
In = TypeVar("In")  # a unit's input
Out = TypeVar("Out")  # a unit's output
Res = TypeVar("Res")  # the result, made by close

#: Says where a unit stands, for a live view: (unit key, "running" | "done", its output or None).
UnitProgress = Callable[[str, str, Any], None]


@dataclass
class Unit(Generic[In]):
    """One target's work: its key (a server's name, a shard's), the site whose workers may reach it, its input."""

    key: str
    site: str
    data: In
    #: A bound on the unit (Temporal's start-to-close) beyond what the unit itself enforces.
    timeout_s: float = 3600.0
    #: On Temporal, the id of a child workflow that runs the unit (``burnin:<server>``: Temporal refuses a second one
    #: while it runs, so no two runs work a target at once); empty: the unit is an activity of the parent.
    workflow_id: str = ""


@dataclass
class Opened(Generic[Run, In]):
    """What open made: the run's data, its units, and how to run them."""

    run: Run
    units: list[Unit[In]]
    kept: Any = None  # for close alone (the description's ``kept_type``), not given to the units
    concurrency: int = 250
    job: int | None = None  # the journal's job, for a person following the run (None: the workflow keeps no job)
    #: Attempts of a unit whose worker is lost (Temporal; in process a unit runs once).
    attempts: int = 3


@dataclass
class Outcome(Generic[Out]):
    """A unit's end: its output, or (``lost``) why it never completed (its every attempt lost, a surprise raised)."""

    key: str
    out: Out | None = None
    lost: str | None = None


@dataclass
class Context:
    """Where a step of a description runs, and who it acts as."""

    engine: str  # "process" or "temporal"
    #: Who holds the run's locks: this process (in process), or the workflow (on Temporal: the run outlives a worker).
    owner: str
    workflow_id: str = ""
    attempt: int = 1  # a unit's attempt (Temporal; 1 in process)
    progress: Any = None  # the command's live view (in process only; on Temporal the command follows the status query)
    shared: Any = None  # what the description's session gave the units of one batch


class Description(ABC, Generic[Req, Run, In, Out, Res]):
    """A workflow, described once: its types, open, unit, close (see the module's docstring)."""

    #: Its name: the key of the registry, and what the Temporal workflow's input names.
    name: ClassVar[str]
    #: The types a value is read back into after it travelled as JSON: taken from the subclass's parameters
    #: (``Description[Req, Run, In, Out, Res]``) by ``__init_subclass__``, never written twice.
    request_type: ClassVar[type]
    run_type: ClassVar[type]
    unit_type: ClassVar[type]
    out_type: ClassVar[type]
    result_type: ClassVar[type]
    kept_type: ClassVar[Any] = type(None)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is Description:
                for attr, arg in zip(("request_type", "run_type", "unit_type", "out_type", "result_type"), get_args(base), strict=True):
                    setattr(cls, attr, arg)

    @abstractmethod
    def open(self, ctx: Context, request: Req) -> Opened[Run, In]:
        """The refusals, the job and the locks, the plan made once; the units.

        Raises:
            FleetError: a refusal (nothing was touched): its class and message reach the command on either engine.
        """

    @abstractmethod
    async def unit(self, ctx: Context, run: Run, data: In) -> Out:
        """One target's work. Safe to run again after a lost attempt: it first reads what that attempt recorded."""

    @abstractmethod
    def close(self, ctx: Context, run: Run, kept: Any, outcomes: list[Outcome[Out]], *, interrupted: bool) -> Res:
        """The run's end: counts, the job's rows, the locks released (``interrupted``: Ctrl-C, a cancelled workflow)."""

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: Run, units: list[In]) -> AsyncIterator[Any]:
        """What a batch of units shares on one engine (all of a run's in process, one on a Temporal worker), as
        ``ctx.shared``: burn-in watches the batch's BMCs' sensors once. None by default."""
        yield None


_REGISTRY: dict[str, Description[Any, Any, Any, Any, Any]] = {}


def register(description: Description[Any, Any, Any, Any, Any]) -> Description[Any, Any, Any, Any, Any]:
    """Make a description known by its name (a worker runs only those it knows); a second one of a name is refused."""
    known = _REGISTRY.get(description.name)
    if known is not None and type(known) is not type(description):
        raise ValueError(f"two workflow descriptions are named {description.name!r}: {type(known).__name__}, {type(description).__name__}")
    _REGISTRY[description.name] = description
    return description


def described(name: str) -> Description[Any, Any, Any, Any, Any]:
    """The registered description of that name.

    Raises:
        FleetError: none is (a worker of another version than the command's).
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise FleetError(f"no workflow is described as {name!r} here (known: {', '.join(sorted(_REGISTRY)) or 'none'})") from None


def plain(value: Any, cls: Any = None) -> Any:
    """A dataclass (or anything pydantic can dump) as JSON values: what a workflow's history holds."""
    from pydantic import TypeAdapter

    return TypeAdapter(cls if cls is not None else type(value)).dump_python(value, mode="json")


def typed(cls: Any, value: Any) -> Any:
    """JSON values back into ``cls`` (a dataclass, with nested ones): what a worker or the command reads."""
    from pydantic import TypeAdapter

    return TypeAdapter(cls).validate_python(value)


# --- the in-process engine ----------------------------------------------------------------


def run_local(description: Description[Req, Run, In, Out, Res], request: Req, *, progress: UnitProgress | None = None,
              ctx: Context | None = None) -> Res:  # fmt: skip
    """Run a description in this process: open, the units (bounded), close; its result.

    A unit that raises is that unit's ``lost`` outcome, never the run's end.
    Ctrl-C (KeyboardInterrupt, or SIGTERM turned into it) closes the run as
    interrupted with the units done so far, then goes on out.

    Raises:
        FleetError: open refused (nothing was touched).
    """
    return asyncio.run(arun_local(description, request, progress=progress, ctx=ctx))


async def arun_local(description: Description[Req, Run, In, Out, Res], request: Req, *, progress: UnitProgress | None = None,
                     ctx: Context | None = None) -> Res:  # fmt: skip
    """:func:`run_local` in a running event loop (a command that runs other work beside it)."""
    ctx = ctx or Context("process", str(Holder.me()))
    opened = description.open(ctx, request)
    outcomes: list[Outcome[Out]] = []
    try:
        await _units(description, ctx, opened, outcomes, progress)
    except BaseException:  # Ctrl-C: asyncio.run cancels this task; the run is closed as interrupted, then it goes on out
        description.close(ctx, opened.run, opened.kept, outcomes, interrupted=True)
        raise
    order = {u.key: i for i, u in enumerate(opened.units)}
    outcomes.sort(key=lambda o: order.get(o.key, len(order)))
    return description.close(ctx, opened.run, opened.kept, outcomes, interrupted=False)


async def _units(description: Description[Any, Run, In, Out, Any], ctx: Context, opened: Opened[Run, In], outcomes: list[Outcome[Out]],
                 progress: UnitProgress | None) -> None:  # fmt: skip
    gate = asyncio.Semaphore(max(1, opened.concurrency))

    async def one(u: Unit[In]) -> None:
        async with gate:
            if progress:
                progress(u.key, "running", None)
            try:
                out = await description.unit(ctx, opened.run, u.data)
            except Exception as e:  # noqa: BLE001 - one target's surprise is that target's outcome, never the run's end
                outcomes.append(Outcome(u.key, lost=f"{type(e).__name__}: {e}"))
                if progress:
                    progress(u.key, "done", None)
                return
            outcomes.append(Outcome(u.key, out))
            if progress:
                progress(u.key, "done", out)

    async with description.session(ctx, opened.run, [u.data for u in opened.units]) as shared:
        ctx.shared = shared
        await asyncio.gather(*(one(u) for u in opened.units))


__all__ = ["Context", "Description", "Opened", "Outcome", "Unit", "arun_local", "described", "plain", "register", "run_local",
           "typed"]  # fmt: skip
