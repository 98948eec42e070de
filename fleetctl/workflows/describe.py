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

Optional parts, each declared by a class attribute so the Temporal engine adds
activities only for the descriptions that use them:

- waves (``Unit.wave``) and ``gated``: before each wave ``gate`` says go, wait
  (then it is asked once more) or skip (a failure threshold reached, a
  maintenance window closed); after it ``wave_done`` records it;
- ``checked``: ``sites`` and, per site, ``check`` (on Temporal on that site's
  queue, where its credentials resolve) before open; any problem is the run's
  ``refusal``, and nothing was touched;
- ``session_scope = "run"``: on Temporal a worker keeps one session per run and
  site (coordinators its units share), not one per unit.

The request, the run's data, a unit's input and output and the result are
dataclasses of plain values (names, ids, thresholds, verdicts): on Temporal they
travel through a workflow's history, so they never hold a secret; a unit resolves
its own target's credentials and keys on the worker, from the inventory's
references. :func:`plain` and :func:`typed` turn them into JSON values and back.

:func:`run_local` is the in-process engine: ``open``, the units at most
``Opened.concurrency`` at once, ``close``. The Temporal engine runs the same
three through one parent workflow and one set of activities, found by the
description's name in the :func:`register`-ed descriptions.

With ``processes`` > 1, :func:`run_local` runs the units of a ``process_safe``
description in a pool of that many worker processes (every core of the machine),
each unit as a Temporal activity would: its data as JSON values, in its own
``session`` of one, its own event loop and connections; ``open``, the gates and
``close`` stay in the calling process. A worker that dies takes the pool with it
(``BrokenProcessPool``): its units and those of the workers torn down with it run
again in a new pool, up to ``Opened.attempts``, as Temporal runs a lost activity
again. Ctrl-C or SIGTERM stops the workers (each unit's ``finally`` runs) before
``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
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
    #: Its wave: units run in ascending waves, every unit of one wave ended before any of the next starts (a firmware
    #: campaign's canary, then its batches); a description that is ``gated`` is asked before each wave.
    wave: int = 0


@dataclass
class Opened(Generic[Run, In]):
    """What open made: the run's data, its units, and how to run them."""

    run: Run
    units: list[Unit[In]]
    kept: Any = None  # for close alone (the description's ``kept_type``), not given to the units
    concurrency: int = 250
    job: int | None = None  # the journal's job, for a person following the run (None: the workflow keeps no job)
    #: Attempts of a unit whose worker is lost (Temporal, or a worker process of :func:`run_local`'s pool); a unit that
    #: raises runs once.
    attempts: int = 3


@dataclass
class Outcome(Generic[Out]):
    """A unit's end: its output, or (``lost``) why it never completed (its every attempt lost, a surprise raised)."""

    key: str
    out: Out | None = None
    lost: str | None = None
    #: Never run: the gate of its wave said no (a threshold reached, outside a maintenance window); why.
    skipped: str | None = None


@dataclass
class Gate:
    """A gated description's answer before a wave: run it, wait first, or skip it (its units' outcomes say ``reason``)."""

    go: bool = True
    #: Wait this long, then ask once more (``waited=True``): in process a sleep, on Temporal a durable timer, so the wait
    #: outlives the workers. Ignored on that second asking.
    wait_s: float = 0.0
    #: What the command says while the run waits (stderr).
    waiting: str = ""
    #: Why the wave's units are not run (``go`` False).
    reason: str = ""
    #: When not None, what the gates carry from now on (the description's ``tally_type``): a wave skipped for the window.
    tally: Any = None


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
    #: How the in-process engine waits when a gate says wait (a test gives a fake clock's); Temporal has its own timer.
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    #: Where the in-process engine says what a gate's wait is for (the command's stderr); None: silent.
    say: Callable[[str], None] | None = None


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
    #: Whether ``gate`` is asked before each wave and ``wave_done`` told after it (on Temporal: two more activities per wave,
    #: so only descriptions that use them say so).
    gated: ClassVar[bool] = False
    #: What a gated run carries from wave to wave (a dataclass: failed so far, halted ...), made by ``wave_done`` and the
    #: gates; never the outcomes so far, which would fill a Temporal history once per wave.
    tally_type: ClassVar[Any] = type(None)
    #: "batch": a session per batch (all of a run's units in process; one unit's activity on Temporal). "run": on Temporal a
    #: worker keeps one session per run and site for every unit of that run it works (coordinators shared by a site's
    #: servers: a rack's power, a switch's sessions, an Ansible batch); its ``units`` are then the first unit's only, and a
    #: description that needs the site's reads them itself (the targets the run holds locked: ``ctx.owner``).
    session_scope: ClassVar[str] = "batch"
    #: Whether ``sites`` and ``check`` run before open (on Temporal ``check`` runs on each site's queue: where that site's
    #: credentials resolve), and any problem refuses the run through ``refusal``.
    checked: ClassVar[bool] = False
    #: Whether :func:`run_local` may run the units in worker processes (``processes`` > 1): each unit then gets its data
    #: as JSON values and its own ``session`` of one, with nothing of the calling process (as on Temporal), and must
    #: find its targets, credentials and store itself. Its description's module is imported by the worker to find it.
    process_safe: ClassVar[bool] = False

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

    def gate(self, ctx: Context, run: Run, wave: int, tally: Any, *, waited: bool) -> Gate:
        """Before wave ``wave`` (``gated`` descriptions): go, wait, or skip it; ``tally``: what the earlier waves left (None
        before the first); ``waited``: asked again after the wait this gate asked for."""
        return Gate()

    def wave_done(self, ctx: Context, run: Run, wave: int, outcomes: list[Outcome[Out]], tally: Any) -> Any:
        """After wave ``wave`` ran (``gated`` descriptions): what is recorded per wave (``outcomes``: that wave's); the new tally."""
        return tally

    def sites(self, ctx: Context, request: Req) -> list[str]:
        """The sites whose workers ``check`` the request (``checked`` descriptions); the store only."""
        return []

    def check(self, ctx: Context, request: Req, site: str) -> list[Any]:
        """What would stop the run on ``site`` (JSON values), read where that site's credentials resolve; touches nothing."""
        return []

    def refusal(self, problems: list[Any]) -> FleetError:
        """The refusal of a run whose checks found ``problems`` (raised by the command, on either engine)."""
        return FleetError(f"{self.name} refused: " + "; ".join(str(p) for p in problems[:5]))

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
              ctx: Context | None = None, processes: int = 1) -> Res:  # fmt: skip
    """Run a description in this process: open, the units (bounded), close; its result.

    A unit that raises is that unit's ``lost`` outcome, never the run's end.
    Ctrl-C (KeyboardInterrupt, or SIGTERM turned into it) closes the run as
    interrupted with the units done so far, then goes on out.

    ``processes`` > 1 (a ``process_safe`` description): the units run in a pool of that many worker processes, at most
    one unit per worker at a time (see the module's docstring); ``ctx.progress`` and ``ctx.shared`` stay here.

    Raises:
        FleetError: open refused (nothing was touched).
    """
    return asyncio.run(arun_local(description, request, progress=progress, ctx=ctx, processes=processes))


async def arun_local(description: Description[Req, Run, In, Out, Res], request: Req, *, progress: UnitProgress | None = None,
                     ctx: Context | None = None, processes: int = 1) -> Res:  # fmt: skip
    """:func:`run_local` in a running event loop (a command that runs other work beside it)."""
    ctx = ctx or Context("process", str(Holder.me()))
    if processes > 1 and not description.process_safe:
        raise ValueError(f"the {description.name} workflow's units cannot run in worker processes (not process_safe)")
    if description.checked:
        problems = [p for site in description.sites(ctx, request) for p in description.check(ctx, request, site)]
        if problems:
            raise description.refusal(problems)
    opened = description.open(ctx, request)
    outcomes: list[Outcome[Out]] = []
    try:
        if processes > 1:
            with _Pool(processes) as pool:
                await _units(description, ctx, opened, outcomes, progress, pool)
        else:
            await _units(description, ctx, opened, outcomes, progress)
    except BaseException:  # Ctrl-C: asyncio.run cancels this task; the run is closed as interrupted, then it goes on out
        description.close(ctx, opened.run, opened.kept, outcomes, interrupted=True)
        raise
    order = {u.key: i for i, u in enumerate(opened.units)}
    outcomes.sort(key=lambda o: order.get(o.key, len(order)))
    return description.close(ctx, opened.run, opened.kept, outcomes, interrupted=False)


async def _units(description: Description[Any, Run, In, Out, Any], ctx: Context, opened: Opened[Run, In], outcomes: list[Outcome[Out]],
                 progress: UnitProgress | None, pool: _Pool | None = None) -> None:  # fmt: skip
    bound = asyncio.Semaphore(max(1, opened.concurrency))
    run_json = plain(opened.run, description.run_type) if pool is not None else None

    async def pooled(u: Unit[In]) -> Out:
        """The unit in a worker process; run again in a new pool when a worker died under it (at most ``attempts``)."""
        assert pool is not None
        data = plain(u.data, description.unit_type)
        for attempt in range(1, max(1, opened.attempts) + 1):
            try:
                out = await pool.call(_unit_in_worker, type(description).__module__, description.name, ctx.owner, attempt, run_json, data)
            except BrokenProcessPool:
                if attempt >= opened.attempts:
                    raise
                continue
            return typed(description.out_type, out)
        raise AssertionError("unreachable")  # (the loop returns or raises)

    async def one(u: Unit[In]) -> None:
        async with bound:
            if progress:
                progress(u.key, "running", None)
            try:
                out = await (pooled(u) if pool is not None else description.unit(ctx, opened.run, u.data))
            except Exception as e:  # noqa: BLE001 - one target's surprise is that target's outcome, never the run's end
                outcomes.append(Outcome(u.key, lost=f"{type(e).__name__}: {e}"))
                if progress:
                    progress(u.key, "done", None)
                return
            outcomes.append(Outcome(u.key, out))
            if progress:
                progress(u.key, "done", out)

    # In a pool every unit has its session in its worker; none is opened here.
    session = description.session(ctx, opened.run, [u.data for u in opened.units]) if pool is None else _no_session()
    async with session as shared:
        ctx.shared = shared
        tally: Any = None
        for wave, units in waves(opened.units):
            if description.gated:
                gate = description.gate(ctx, opened.run, wave, tally, waited=False)
                if gate.wait_s > 0:
                    if ctx.say is not None and gate.waiting:
                        ctx.say(gate.waiting)
                    await ctx.sleep(gate.wait_s)
                    gate = description.gate(ctx, opened.run, wave, gate.tally if gate.tally is not None else tally, waited=True)
                tally = gate.tally if gate.tally is not None else tally
                if not gate.go:
                    outcomes += [Outcome(u.key, skipped=gate.reason or "not attempted") for u in units]
                    continue
            before = len(outcomes)
            await asyncio.gather(*(one(u) for u in units))
            if description.gated:
                tally = description.wave_done(ctx, opened.run, wave, outcomes[before:], tally)


@contextlib.asynccontextmanager
async def _no_session() -> AsyncIterator[Any]:
    yield None


# --- worker processes -----------------------------------------------------------------------

#: Seconds the workers get to end their units after SIGTERM (a unit's ``finally`` may write a last batch: the store's
#: busy timeout is 30 s), before SIGKILL.
STOP_GRACE_S = 35.0


class _Pool:
    """A ProcessPoolExecutor (spawn: no inherited event loop, connection or lock) that a dead worker does not end.

    A worker that dies breaks the executor (every unit in it fails with ``BrokenProcessPool``, and the executor
    terminates the other workers: its queues may be in a dirty state): the next call gets a new executor.
    """

    def __init__(self, processes: int) -> None:
        import multiprocessing

        self.processes = processes
        self.context = multiprocessing.get_context("spawn")
        self.executor = self._new()
        self.old: list[ProcessPoolExecutor] = []

    def _new(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.processes, mp_context=self.context, initializer=_worker_init, initargs=(os.getpid(),))

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        executor = self.executor
        future = asyncio.get_running_loop().run_in_executor(executor, fn, *args)
        workers = _processes(executor)  # those started so far (a submit may start one more): known before any can die
        try:
            return await future
        except BrokenProcessPool:
            if self.executor is executor:  # the first unit to see it renews the pool; the others find it renewed
                self.old.append(executor)
                self.executor = self._new()
            # A broken executor fails its futures first and stops its other workers after (SIGTERM): such a worker
            # stops in order and writes what it holds. Its unit runs again only once every one of them is gone, so a
            # lost attempt never writes after its retry began (a verdict twice in one run, tests/e2e/
            # test_sweep_processes.py's worker killed mid-sweep).
            workers += [p for p in _processes(executor) if p not in workers]  # any started since, if still listed
            await asyncio.to_thread(stop_workers, workers, signal_first=False)
            raise

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            for executor in [*self.old, self.executor]:  # (a broken one's workers are gone already)
                executor.shutdown(wait=True)
            return
        # Interrupted (Ctrl-C, SIGTERM, the run's task cancelled): no new unit starts, each running one is told to stop
        # (SIGTERM: its worker cancels it, its ``finally`` runs), and the caller closes the run once every worker is gone,
        # so none writes into a run said to be over.
        workers = [p for executor in [*self.old, self.executor] for p in _processes(executor)]  # (shutdown forgets them)
        for executor in [*self.old, self.executor]:
            executor.shutdown(wait=False, cancel_futures=True)
        stop_workers(workers)


def _processes(executor: ProcessPoolExecutor) -> list[Any]:
    # The executor's own list of its workers: Python < 3.14 has no public way to stop them (terminate_workers).
    return list((getattr(executor, "_processes", None) or {}).values())


def stop_workers(processes: list[Any], grace_s: float = STOP_GRACE_S, *, signal_first: bool = True) -> None:
    """SIGTERM each worker process (``signal_first``; False: they were told already), wait for them all at most
    ``grace_s``, then SIGKILL what is left."""
    import time

    for p in processes if signal_first else ():
        with contextlib.suppress(Exception):
            if p.is_alive():
                p.terminate()
    deadline = time.monotonic() + grace_s
    for p in processes:
        with contextlib.suppress(Exception):
            p.join(max(0.0, deadline - time.monotonic()))
    for p in processes:
        with contextlib.suppress(Exception):
            if p.is_alive():
                p.kill()
                p.join(5)


def _worker_init(parent: int) -> None:
    """A worker process's start: the parent stops it, not the terminal's Ctrl-C, and it never outlives the parent."""
    # Ctrl-C reaches the whole foreground process group: the parent stops the workers in order (SIGTERM) instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # Linux: SIGTERM when the parent dies, even by SIGKILL (PR_SET_PDEATHSIG = 1)
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _unit_in_worker(module: str, name: str, owner: str, attempt: int, run: Any, data: Any) -> Any:
    """One unit in a worker process, as a Temporal activity runs it: its description found by name, its data typed back,
    its session of one, its output as JSON values. SIGTERM cancels it (its ``finally`` blocks run)."""
    importlib.import_module(module)  # registers the description
    desc = described(name)
    ctx = Context("process", owner, attempt=attempt)

    stopped = False

    def stop(task: asyncio.Task[Any]) -> None:
        nonlocal stopped
        stopped = True
        task.cancel()

    def quiet_once_stopped(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # A stopped unit's reads, cancelled mid-flight, may end on the connections their unit closed as it stopped ("Task
        # exception was never retrieved"): not news once the unit was told to stop (in process the command's exit drops
        # them unsaid); anything before that is said as asyncio says it.
        if not stopped:
            loop.default_exception_handler(context)

    async def main() -> Any:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop, task)  # (removed with the loop: SIGTERM kills again)
        loop.set_exception_handler(quiet_once_stopped)
        typed_run, typed_data = typed(desc.run_type, run), typed(desc.unit_type, data)
        async with desc.session(ctx, typed_run, [typed_data]) as shared:
            ctx.shared = shared
            out = await desc.unit(ctx, typed_run, typed_data)
        return plain(out, desc.out_type)

    try:
        return asyncio.run(main())
    finally:
        if stopped:
            # Told to stop (the parent interrupted, or the executor tearing a broken pool down): out, once the unit's
            # ``finally`` ran. Back in the executor's loop this worker would wait for work that never comes, and the
            # executor's join of its workers (and the parent's exit) would wait for it forever.
            os._exit(128 + signal.SIGTERM)


def default_processes() -> int:
    """The cores this process may run on (its CPU affinity: a container's or a taskset's share, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def waves(units: list[Unit[In]]) -> list[tuple[int, list[Unit[In]]]]:
    """The units by wave, in ascending order (each wave's in the order open gave them); no empty wave."""
    by: dict[int, list[Unit[In]]] = {}
    for u in units:
        by.setdefault(u.wave, []).append(u)
    return sorted(by.items())


__all__ = ["Context", "Description", "Gate", "Opened", "Outcome", "Unit", "arun_local", "default_processes", "described", "plain",
           "register", "run_local", "stop_workers", "typed", "waves"]  # fmt: skip
