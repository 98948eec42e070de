"""The health sweep's reading, described once (:mod:`fleetctl.workflows.describe`): a unit per shard of targets.

The command opens and closes the sweep run (:func:`fleetctl.sweep.engine.run`:
the run row, its end, interrupted or not, the pruning); in between, through its
``collect`` hook, the sweep's targets are read by this description's units:

- ``open``: the targets in shards by site, of up to ``shard`` servers each (a
  site's switches with its first shard). One unit per BMC would cost the
  engine more than reading the BMC: a shard costs it one unit for hundreds;
- ``unit``: a shard read and judged into the run (:func:`~fleetctl.sweep.engine.sweep_targets`,
  the very function the in-process sweep runs over all its targets), with its
  own recorder; it returns the run's summary of its targets (counts, new,
  resolved, persisting). An attempt after a lost one first deletes what the
  lost one wrote of its targets into the run;
- ``close``: the shards' summaries merged.

The criteria the host checks judge boards by travel in the request, read once
by the command (``$FLEETCTL_BURNIN_CRITERIA`` or the bundled file, as burn-in
reads them): every worker judges by the command's, not by its own copy.

In process with ``processes`` > 1 (:func:`local_collector`), the same units run
in a pool of worker processes (:func:`~fleetctl.workflows.describe.run_local`),
one shard per process, each shard read exactly as a Temporal worker reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import math
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select

from fleetctl.errors import FleetError
from fleetctl.holders import Holder
from fleetctl.store import get_engine, immediate
from fleetctl.store import tables as T
from fleetctl.sweep.engine import Recorder, SweepOptions, sweep_targets
from fleetctl.targets import resolve, resolve_switches
from fleetctl.workflows.describe import Context, Description, Opened, Outcome, Unit, arun_local, default_processes, register

SHARD_TARGETS = 1000  # servers per unit
SHARDS_AT_ONCE = 1  # shards a worker (a process) reads at once, each with the sweep's own concurrency
#: Servers a worker process is started for, at least, when --processes is not given: a process costs ~1 s of CPU to start
#: (its imports), more than a few dozen BMCs take to read, and one process reads ~250 BMCs at once.
SERVERS_PER_PROCESS = 250
#: --processes at most (a sanity bound: each is a Python process of its own).
MAX_PROCESSES = 256


@dataclass
class SweepRequest:
    """The targets, the run the command opened, its options, and the criteria (as the command read them; None: each
    reader's own, when the command's copy could not be read: the host checks then say so, as in process)."""

    run_id: int
    started: str  # the run's start (ISO 8601): its findings' first_seen and last_seen
    options: SweepOptions
    servers: list[str]
    switches: list[str]
    shard: int = SHARD_TARGETS
    criteria: dict[str, Any] | None = None


@dataclass
class SweepRunData:
    """What every shard needs (not the targets: each shard carries its own, and a fleet's names would fill the history
    once per shard)."""

    run_id: int
    started: str
    options: SweepOptions
    criteria: dict[str, Any] | None = None


@dataclass
class Shard:
    servers: list[str]
    switches: list[str]


@dataclass
class ShardSummary:
    """What a shard's reading added to the run: the counts by status and the findings' summaries (as ``Recorder`` keeps them)."""

    counts: dict[str, int] = field(default_factory=dict)
    new: list[dict[str, Any]] = field(default_factory=list)
    resolved: list[dict[str, Any]] = field(default_factory=list)
    persisting: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # shards never read (close's summary): "KEY: why"


def _sites(kind: str, table: Any, names: list[str]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    with get_engine().connect() as c:
        for i in range(0, len(names), 1000):
            q = (select(table.c.name, T.site.c.name.label("site")).join(T.rack, T.rack.c.id == table.c.rack_id)
                 .join(T.site, T.site.c.id == T.rack.c.site_id).where(table.c.name.in_(names[i : i + 1000])))  # fmt: skip
            out.update({(kind, r.name): r.site for r in c.execute(q)})
    return out


def _dated(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summaries that travelled as JSON: their ``first_seen`` a datetime again, as the recorder has it."""
    for r in rows:
        if isinstance(r.get("first_seen"), str):
            r["first_seen"] = dt.datetime.fromisoformat(r["first_seen"])
    return rows


class SweepWorkflow(Description[SweepRequest, SweepRunData, Shard, ShardSummary, ShardSummary]):
    """The sweep's reading: a unit per shard."""

    name = "sweep"
    # A shard finds its targets, credentials and expectations in the store itself (as on a Temporal worker).
    process_safe = True

    def __init__(self) -> None:
        self.shards_at_once = asyncio.Semaphore(SHARDS_AT_ONCE)

    def open(self, ctx: Context, request: SweepRequest) -> Opened[SweepRunData, Shard]:
        """The shards, by site: the run itself is the command's (it was opened before, and is closed after). ``shard`` 0:
        one shard of every target, wherever it is (in process: one reader, with the sweep's own concurrency)."""
        run = SweepRunData(request.run_id, request.started, request.options, request.criteria)
        if not request.shard:
            return Opened(run, [Unit("all", "", Shard(request.servers, request.switches))], concurrency=1, attempts=1)
        size = max(1, int(request.shard))
        site_of = {**_sites("server", T.server, request.servers), **_sites("switch", T.switch, request.switches)}
        by_site: dict[str, dict[str, list[str]]] = {}
        for kind, names in (("server", request.servers), ("switch", request.switches)):
            for n in names:
                by_site.setdefault(site_of[(kind, n)], {"server": [], "switch": []})[kind].append(n)
        units: list[Unit[Shard]] = []
        opts = request.options
        for site, got in sorted(by_site.items()):
            servers = got["server"]
            for k in range(max(1, math.ceil(len(servers) / size))):
                part = Shard(servers[k * size : (k + 1) * size], got["switch"] if k == 0 else [])
                # The shard's bound: its BMCs in waves of the sweep's concurrency, each wave at most twice the per-target
                # timeout (and its retries), plus the setup.
                waves = max(1, -(-len(part.servers) // max(1, opts.concurrency)))
                units.append(Unit(f"{site}/{k}", site, part, 300 + 4 * waves * opts.per_target_timeout))
        return Opened(run, units, concurrency=max(1, len(units)), attempts=3)

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: SweepRunData, units: list[Shard]) -> AsyncIterator[Any]:
        """In process, the command's own (:func:`local_collector`): its recorder and the targets it resolved."""
        yield ctx.shared

    async def unit(self, ctx: Context, run: SweepRunData, data: Shard) -> ShardSummary:
        """Read and judge a shard's targets into the run; the run's summary of them (in process the command's recorder
        has them already: the summary is then empty)."""
        engine = get_engine()
        here: Here | None = ctx.shared
        if here is not None:  # in process: the command's recorder and targets, nothing read or resolved again
            await sweep_targets(engine, here.rec, here.servers, here.switches, run.options, ctx.progress, criteria=here.criteria)
            return ShardSummary()
        with engine.connect() as c:
            servers = resolve(c, data.servers) if data.servers else []
            switches = resolve_switches(c, data.switches) if data.switches else []
        names = [*data.servers, *data.switches]
        if ctx.attempt > 1:  # a lost worker's attempt: its rows of this run are replaced
            with immediate(engine) as c:
                for i in range(0, len(names), 500):
                    chunk = names[i : i + 500]
                    c.execute(delete(T.sweep_target).where(T.sweep_target.c.run_id == run.run_id, T.sweep_target.c.name.in_(chunk)))
                    c.execute(delete(T.finding).where(T.finding.c.run_id == run.run_id, T.finding.c.target.in_(chunk)))
        criteria = None
        if run.criteria is not None:
            from fleetctl.burnin.criteria import CriteriaFile

            criteria = CriteriaFile.model_validate(run.criteria)
        async with self.shards_at_once:
            rec = Recorder(engine, run.run_id, dt.datetime.fromisoformat(run.started))
            try:
                await sweep_targets(engine, rec, servers, switches, run.options, ctx.progress, criteria=criteria)
            finally:  # cancelled with the run (the command interrupted): what was read stays, as in process
                rec.flush()
        return ShardSummary(rec.counts, rec.new, rec.resolved, rec.persisting, rec.findings)

    def close(self, ctx: Context, run: SweepRunData, kept: None, outcomes: list[Outcome[ShardSummary]], *,
              interrupted: bool) -> ShardSummary:  # fmt: skip
        """The shards' summaries in one (the command merges it into its run's recorder, and ends the run)."""
        out = ShardSummary()
        for o in outcomes:
            if o.out is None:
                out.lost.append(f"{o.key}: {o.lost}")
                continue
            for k, v in o.out.counts.items():
                out.counts[k] = out.counts.get(k, 0) + v
            for key in ("new", "resolved", "persisting", "findings"):
                getattr(out, key).extend(_dated(getattr(o.out, key)))
        return out


SWEEP = register(SweepWorkflow())


@dataclass
class Here:
    """In process, what the command has already: its run's recorder, the targets it resolved, the criteria (None: in force)."""

    rec: Recorder
    servers: list[Any]
    switches: list[Any]
    criteria: Any = None


Collect = Callable[[Recorder], Coroutine[Any, Any, None]]


def processes_for(servers: int, processes: int | None) -> int:
    """The worker processes a sweep of ``servers`` BMCs runs in: ``processes`` as asked (None: the cores this process may
    use, one per SERVERS_PER_PROCESS servers at most), never more than one per server; 1: in this process."""
    if processes is None:
        processes = min(default_processes(), math.ceil(servers / SERVERS_PER_PROCESS))
    return max(1, min(processes, servers))


def shard_size(servers: int, processes: int) -> int:
    """Servers per shard when ``processes`` worker processes read ``servers``: an even share, but never more than
    :data:`SHARD_TARGETS`, as on Temporal. Shards are cut within a site, so even shares of unequal sites made a worker
    read one shard of 5,000 and the other 4,000 + 1,000 (10,000 + 500 on 2 processes: peak RSS 442 vs 258 MB, and
    the CPU with it); shards of at most 1,000 are handed to whichever worker is free (the pool's queue), and what a
    worker holds at once (its shard's expectations, cursors and verdicts) stops growing with the fleet."""
    return max(1, min(SHARD_TARGETS, math.ceil(servers / max(1, processes))))


def local_collector(servers: list[Any], switches: list[Any], options: SweepOptions,
                    progress: Callable[[int, int, str, str], None] | None = None, processes: int | None = 1) -> Collect:  # fmt: skip
    """``collect`` for :func:`fleetctl.sweep.engine.run` in process: the description run here (:func:`arun_local`).

    One process (``processes`` 1, or :func:`processes_for` says so): one shard of every target, read into the command's
    recorder (so a Ctrl-C keeps what was read, as the run's counts). More: a shard per process (by site, as on Temporal),
    each read by a worker process into the run with its own recorder and ``options.concurrency / processes`` BMCs at
    once; ``progress`` then follows the targets recorded in the store.
    """
    n = processes_for(len(servers), processes)

    async def collect(rec: Recorder) -> None:
        names, sw_names = [s.name for s in servers], [w.name for w in switches]
        if n <= 1:
            req = SweepRequest(rec.run_id, rec.now.isoformat(), options, names, sw_names, shard=0)
            ctx = Context("process", str(Holder.me()), progress=progress, shared=Here(rec, servers, switches))
            merge(rec, await arun_local(SWEEP, req, ctx=ctx))
            return
        per_process = dataclasses.replace(options, concurrency=max(1, math.ceil(options.concurrency / n)))
        req = SweepRequest(rec.run_id, rec.now.isoformat(), per_process, names, sw_names, shard=shard_size(len(names), n))
        watch = asyncio.create_task(_follow(rec.run_id, len(names) + len(sw_names), progress)) if progress else None
        try:
            merge(rec, await arun_local(SWEEP, req, ctx=Context("process", str(Holder.me())), processes=n))
        except BaseException:
            # Interrupted: the workers are stopped; the run's counts are what they recorded.
            with contextlib.suppress(Exception):
                rec.counts = {**{k: 0 for k in rec.counts}, **_recorded(rec.run_id)}
            raise
        finally:
            if watch is not None:
                watch.cancel()

    return collect


def _recorded(run_id: int) -> dict[str, int]:
    """The run's targets recorded so far, by status."""
    from sqlalchemy import func

    with get_engine().connect() as c:
        q = select(T.sweep_target.c.status, func.count()).where(T.sweep_target.c.run_id == run_id).group_by(T.sweep_target.c.status)
        return {str(status): int(n) for status, n in c.execute(q)}


async def _follow(run_id: int, total: int, progress: Callable[[int, int, str, str], None]) -> None:
    """The live view of a sweep read by worker processes: its targets recorded in the store, once a second (the workers
    write a batch every 2 s; a read does not wait for a writer in WAL)."""
    while True:
        await asyncio.sleep(1.0)
        with contextlib.suppress(Exception):  # a view, never the sweep's failure
            done = sum((await asyncio.to_thread(_recorded, run_id)).values())
            progress(done, total, "", "")


def merge(rec: Recorder, summary: ShardSummary) -> None:
    """A summary into the command's recorder (which writes the run's counts and reports its findings).

    Raises:
        FleetError: a shard was never read (its every attempt lost, or a surprise in process): the run then ends
            interrupted with what the others read, never as a finished sweep that skipped targets.
    """
    for k, v in summary.counts.items():
        rec.counts[k] = rec.counts.get(k, 0) + v
    for key in ("new", "resolved", "persisting", "findings"):
        getattr(rec, key).extend(_dated(getattr(summary, key)))
    if summary.lost:
        raise FleetError(f"the sweep could not read {len(summary.lost)} shard(s): {'; '.join(summary.lost)[:1000]}")


__all__ = ["MAX_PROCESSES", "SHARD_TARGETS", "SWEEP", "Here", "Shard", "ShardSummary", "SweepRequest", "SweepRunData", "SweepWorkflow",
           "local_collector", "merge", "processes_for", "shard_size"]  # fmt: skip
