"""`fleetctl firmware update`, described once (:mod:`fleetctl.workflows.describe`): run in process or on Temporal alike.

- the command checks every input (exit 2, nothing touched) and hands the
  campaign on as plain data (:class:`FirmwareRequest`): the waves of server
  names, the options, the threshold and the window as the operator gave them;
- ``open`` (the control queue on Temporal): the servers locked (a stale lock
  of a dead run recovered, an event each; a server another run holds is left
  out and reported), the campaign's job, the waves (a unit per server, of the
  id ``firmware:<server>`` on Temporal: no two runs flash a server at once),
  the threshold's count of failed servers, and each unit's time limit, bounded
  from the server's baseline and boards (no BMC is read to plan: the run plans
  once);
- ``gate`` before each wave: halted once the failed servers reach the
  threshold; outside the maintenance window, a wait for it (in process a
  sleep, on Temporal a durable timer), or the wave and those after it not
  attempted (``--no-wait``);
- ``unit`` (a worker of the server's site on Temporal): the server's BMC and
  credential resolved where it runs, then :meth:`Campaign.op
  <fleetctl.workflows.firmware_campaign.Campaign.op>` through the BMC driver's
  own sweep: every flash journaled before it is sent, and an attempt after a
  lost one first settles what that one left running (never a flash twice);
- ``wave_done``: the wave's ``firmware.update`` job, a row per server, the
  certificates pinned on first use;
- ``close``: the locks released and the campaign's job finished (interrupted:
  Ctrl-C, a cancelled workflow), the report's rows, the busy servers' too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fleetctl.errors import FleetError, InputError
from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.workflows.describe import Context, Description, Gate, Opened, Outcome, Unit, register
from fleetctl.workflows.firmware_campaign import (
    HALT_REASON,
    KIND,
    PREFIX,
    WINDOW_REASON,
    Campaign,
    CampaignOptions,
    WaveReport,
    baselines,
    close_campaign,
    done_in_job,
    lock_servers,
    server_rows,
)
from fleetctl.workflows.firmware_policy import Clock, SystemClock, Threshold, Window
from fleetctl.workflows.maintained import DrainPlan, maintenance

# A lost attempt of a server's flashing (its worker killed, its heartbeat missed) goes to another worker of its site, whose
# attempt settles the lost one's flashes from the journal and the BMC before it flashes anything.
FLASH_ATTEMPTS = 6
# Servers of one wave flashed at once (the BMC sweep's bound in process before the campaign was described).
WAVE_CONCURRENCY = 200


@dataclass
class FirmwareRequest:
    """The campaign as the command checked it: names, options, the policy (no credential: a URL with a password is refused
    on Temporal, whose history keeps this)."""

    label: str  # the command's TARGETs, as the jobs show them
    args: dict[str, Any]  # the command's options, as the jobs show them
    options: CampaignOptions
    waves: list[list[str]]  # server names: the canary, then the batches
    threshold: str  # as given: a count (3) or a percentage (5%)
    window: str | None = None  # START-END in UTC
    wait: bool = True  # outside the window: wait for it (False: the waves are not attempted)
    actor: str = ""
    #: The servers in service that are live Kubernetes nodes, drained before and uncordoned after (None: none is); the
    #: waves are already split so that none takes more of a rack than --max-unavailable (:func:`split_waves`).
    drain: DrainPlan | None = None


@dataclass
class FirmwareRunData:
    """What open made, given to each unit and to the gates and close (no server's name: each unit carries its own)."""

    job: int
    actor: str
    label: str
    args: dict[str, Any]
    options: CampaignOptions
    halt_at: int  # failed servers that halt the waves after (the threshold over the servers locked)
    threshold: str
    window: str | None = None
    wait: bool = True
    drain: DrainPlan | None = None


@dataclass
class FirmwareKept:
    """For close alone: the servers locked, those another run holds (with why), each server's wave."""

    locked: list[str]
    busy: dict[str, str] = field(default_factory=dict)
    waves: dict[str, int] = field(default_factory=dict)


@dataclass
class FirmwareTally:
    """What the gates carry from wave to wave: the servers failed so far, and whether a wave stopped for the window."""

    failed: int = 0
    stopped: bool = False


@dataclass
class ServerWork:
    """One server of the campaign."""

    name: str
    id: int
    wave: int


@dataclass
class ServerDone:
    """A server's end: ok or why not, its report rows, what its wave's job records (summary, the certificate seen)."""

    server: str
    ok: bool
    error: str | None = None
    elapsed: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    fingerprint: str | None = None


@dataclass
class FirmwareReport:
    """Close's result: the report's rows (a row per component, the servers not attempted and busy ones), and the counts."""

    rows: list[dict[str, Any]]
    failed: int
    halted: bool
    stopped: bool  # outside the window, not waiting (or still outside after the wait)
    job: int | None = None


@dataclass
class Batch:
    """What the units of one batch share: their BMCs resolved here, the campaign's journal writer, the drivers' sessions."""

    targets: dict[str, Any]
    problems: dict[str, str]  # servers this machine cannot reach, with why
    want: dict[str, dict[str, str]]
    journal: Any  # AsyncJournal
    fleets: Any  # FleetSessions


def check_image_base(base: str) -> None:
    """Refuse, before anything is read, an image location the Temporal engine cannot use.

    Raises:
        InputError: a local folder (on this machine only: a worker of another machine could not read it), or a URL with
            a password (the workflow's history keeps its input).
    """
    from urllib.parse import urlsplit

    if not base.startswith(("http://", "https://")):
        raise InputError("with FLEETCTL_TEMPORAL, --image-base must be an http(s) URL the site's workers and BMCs reach "
                         "(a local folder is on this machine only); unset FLEETCTL_TEMPORAL to push from here",
                         field="--image-base")  # fmt: skip
    if urlsplit(base).password is not None:
        raise InputError("with FLEETCTL_TEMPORAL, --image-base must not carry a password: the workflow's history keeps "
                         "its input; give the BMCs a URL without one", field="--image-base")  # fmt: skip


def unit_limit(components: int, boards: int, options: CampaignOptions) -> float:
    """A server's time limit (seconds) from what it could flash at most, known without its BMC.

    Each baseline component once, and once more per accelerator board (a board's component answers per slot:
    ``mncore2_slot0_mncore2-board``); each flash its task timeout; two more for the updates another run left in the BMC
    and an interrupted flash followed; the activating resets when staged; ten minutes for the reads.
    """
    flashes = components * (1 + boards)
    resets = 3 * options.power_timeout if options.apply_time == "on-reset" else 0.0
    return 600.0 + (flashes + 2) * options.task_timeout + resets


def failed_count(outcomes: list[Outcome[ServerDone]]) -> int:
    """Servers that failed: their flashing failed, or never completed (every attempt lost)."""
    return sum(1 for o in outcomes if o.lost is not None or (o.out is not None and not o.out.ok))


def report_of(run: FirmwareRunData, kept: FirmwareKept, outcomes: list[Outcome[ServerDone]]) -> WaveReport:
    """The report's rows and counts from the units' outcomes (those of busy servers are close's to add)."""
    rows: list[dict[str, Any]] = []
    stopped = False
    why_window = WINDOW_REASON.format(window=Window.parse(run.window)) if run.window else None
    for o in outcomes:
        wave = kept.waves.get(o.key)
        if o.out is not None:
            rows += o.out.rows
        elif o.skipped is not None:
            stopped |= o.skipped == why_window
            rows.append({"wave": wave, "server": o.key, "component": None, "from": None, "to": None, "after": None,
                         "result": "not attempted", "message": o.skipped})  # fmt: skip
        else:  # every attempt lost (or a surprise in process): failed, as a server that failed outside a component
            rows.append({"wave": wave, "server": o.key, "component": None, "from": None, "to": None, "result": "failed",
                         "message": f"{o.key}: the firmware update did not complete: {o.lost}"})  # fmt: skip
    failed = failed_count(outcomes)
    return WaveReport(rows, failed, failed >= run.halt_at and not stopped, stopped)


def _server_facts(names: list[str]) -> tuple[dict[str, int], dict[str, str], dict[str, int], dict[str, int]]:
    """({server: id}, {server: site}, {server: baseline components of its model}, {server: boards}) from the store."""
    from sqlalchemy import func, select

    ids: dict[str, int] = {}
    sites: dict[str, str] = {}
    components: dict[str, int] = {}
    boards: dict[str, int] = {}
    s, fb, b = T.server.c, T.firmware_baseline.c, T.accelerator_board.c
    with get_engine().connect() as c:
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            q = (select(s.name, s.id, T.site.c.name.label("site")).join(T.rack, T.rack.c.id == s.rack_id)
                 .join(T.site, T.site.c.id == T.rack.c.site_id).where(s.name.in_(chunk)))  # fmt: skip
            for r in c.execute(q):
                ids[r.name], sites[r.name] = r.id, r.site
            counted = (select(s.name, func.count(fb.component).label("n")).join(T.firmware_baseline, fb.model_id == s.model_id)
                       .where(s.name.in_(chunk)).group_by(s.name))  # fmt: skip
            components.update({r.name: int(r.n) for r in c.execute(counted)})
            counted = (select(s.name, func.count(b.id).label("n")).join(T.accelerator_board, b.server_id == s.id)
                       .where(s.name.in_(chunk)).group_by(s.name))  # fmt: skip
            boards.update({r.name: int(r.n) for r in c.execute(counted)})
    return ids, sites, components, boards


def _own(job: int, owner: str, args: dict[str, Any]) -> None:
    """The job is the run's (the locks' holder): on Temporal its workflow, never the worker that opened it."""
    from sqlalchemy import update

    from fleetctl.store import immediate
    from fleetctl.workflows.journal import OWNER_ARG

    with immediate(get_engine()) as conn:
        conn.execute(update(T.job).where(T.job.c.id == job).values(args={**args, OWNER_ARG: owner}))


def _resolve(names: list[str]) -> tuple[dict[str, Any], dict[str, str], dict[str, dict[str, str]]]:
    """The servers' BMC targets (their credentials resolved here), {server: why not}, their baselines."""
    from fleetctl.targets import bmc_targets, resolve

    try:
        with get_engine().connect() as c:
            refs = resolve(c, names)
            want = baselines(c, names)
    except FleetError as e:  # a server gone from the inventory meanwhile: each server's error, as a BMC's would be
        return {}, dict.fromkeys(names, str(e)), {}
    targets, unreachable = bmc_targets(refs)
    return {t.name: t for t in targets}, dict(unreachable), want


class FirmwareCampaignWorkflow(Description[FirmwareRequest, FirmwareRunData, ServerWork, ServerDone, FirmwareReport]):
    """The firmware campaign: a unit per server, in waves (the canary, then the batches), gated by the threshold and the window."""

    name = "firmware"
    kept_type: ClassVar[Any] = FirmwareKept
    tally_type: ClassVar[Any] = FirmwareTally
    gated: ClassVar[bool] = True

    def __init__(self, clock: Clock | None = None) -> None:
        # The window's clock (a test gives a fake one; its sleep is the context's).
        self.clock: Clock = clock or SystemClock()

    def open(self, ctx: Context, request: FirmwareRequest) -> Opened[FirmwareRunData, ServerWork]:
        from fleetctl.lifecycle.locks import release
        from fleetctl.workflows.journal import Journal

        engine = get_engine()
        names = [n for w in request.waves for n in w]
        got, busy = lock_servers(engine, names, owner=ctx.owner, who=request.actor)
        try:
            args = dict(request.args)
            if ctx.engine == "temporal":  # `jobs show` and `jobs cancel` reach the run through its workflow
                args |= {"engine": "temporal", "workflow": ctx.workflow_id}
            journal = Journal.open(engine, kind=KIND, target=request.label, args=args, actor=request.actor, prefix=PREFIX)
            _own(journal.job_id, ctx.owner, args)
            ids, sites, components, boards = _server_facts(got)
        except BaseException:
            release(engine, got, owner=ctx.owner)
            raise
        locked = set(got)
        waves = [ws for ws in ([n for n in w if n in locked] for w in request.waves) if ws]
        units = [Unit(n, sites.get(n, "") if ctx.engine == "temporal" else "", ServerWork(n, ids[n], k),
                      unit_limit(components.get(n, 0), boards.get(n, 0), request.options), f"firmware:{n}", wave=k)
                 for k, w in enumerate(waves) for n in w]  # fmt: skip
        run = FirmwareRunData(journal.job_id, request.actor, request.label, request.args, request.options,
                              Threshold.parse(request.threshold).limit(len(got)), request.threshold, request.window,
                              request.wait, request.drain)  # fmt: skip
        kept = FirmwareKept(got, {n: str(why) for n, why in busy.items()}, {u.key: u.wave for u in units})
        return Opened(run, units, kept, concurrency=WAVE_CONCURRENCY, job=journal.job_id, attempts=FLASH_ATTEMPTS)

    def gate(self, ctx: Context, run: FirmwareRunData, wave: int, tally: FirmwareTally | None, *, waited: bool) -> Gate:
        """Halted at the threshold; outside the window: wait (once), or stop this wave and those after."""
        t = tally or FirmwareTally()
        window = Window.parse(run.window) if run.window else None
        why_window = WINDOW_REASON.format(window=window) if window else ""
        if t.stopped:  # an earlier wave stopped for the window: the waves after it wait too
            return Gate(go=False, reason=why_window)
        if t.failed >= run.halt_at:
            return Gate(go=False, reason=HALT_REASON.format(failed=t.failed, threshold=run.threshold))
        if window is None:
            return Gate()
        now = self.clock.now()
        if window.contains(now):
            return Gate()
        if waited or not run.wait:
            return Gate(go=False, reason=why_window, tally=FirmwareTally(t.failed, stopped=True))
        delay = window.opens_in(now)
        return Gate(wait_s=delay, waiting=f"wave {wave}: outside the window {window}; waiting {delay / 60:.0f} min for it to open")

    def wave_done(self, ctx: Context, run: FirmwareRunData, wave: int, outcomes: list[Outcome[ServerDone]],
                  tally: FirmwareTally | None) -> FirmwareTally:  # fmt: skip
        """The wave's ``firmware.update`` job: a row per server, the certificates pinned on first use (as ``workflows.bmc.run``);
        the failed servers counted on."""
        from sqlalchemy import select

        from fleetctl.workflows.journal import JobState, Journal, StepResult

        engine = get_engine()
        names = [o.key for o in outcomes]
        with engine.connect() as c:
            ids = {r.name: r.id for r in c.execute(select(T.server.c.name, T.server.c.id).where(T.server.c.name.in_(names)))}
        steps, pins = [], {}
        for o in outcomes:
            d = o.out or ServerDone(o.key, False, f"the firmware update did not complete: {o.lost}")
            steps.append(StepResult(ids[o.key], d.ok, d.elapsed, output=d.summary, error=d.error))
            if d.fingerprint:
                pins[o.key] = d.fingerprint
        failed = sum(1 for s in steps if not s.ok)
        journal = Journal.open(engine, kind="firmware.update", target=run.label, args={**run.args, "wave": wave, "job": run.job},
                               actor=run.actor)  # fmt: skip
        journal.record(steps, pins=pins, state=JobState.FAILED if failed else JobState.SUCCEEDED,
                       error=f"{failed} of {len(steps)} failed" if failed else None)  # fmt: skip
        t = tally or FirmwareTally()
        return FirmwareTally(t.failed + failed_count(outcomes), t.stopped)

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: FirmwareRunData, units: list[ServerWork]) -> AsyncIterator[Batch]:
        """The batch's BMCs resolved here (their credentials never travel), one journal writer, the drivers' sessions."""
        from fleetctl.plugins import FleetSessions
        from fleetctl.workflows.journal import AsyncJournal, Journal

        targets, problems, want = await asyncio.to_thread(_resolve, [u.name for u in units])
        journal = AsyncJournal(Journal(get_engine(), run.job, run.actor, kind=KIND, prefix=PREFIX))
        try:
            async with FleetSessions() as fleets:
                yield Batch(targets, problems, want, journal, fleets)
        finally:
            await asyncio.to_thread(journal.close)

    async def unit(self, ctx: Context, run: FirmwareRunData, data: ServerWork) -> ServerDone:
        """One server to its baseline: :meth:`Campaign.op` through its BMC driver's sweep; a failure is a value."""
        from fleetctl.plugins import sweep_async
        from fleetctl.workflows.journal import summary

        batch: Batch = ctx.shared
        engine = get_engine()
        name = data.name
        # A lost attempt's components done in this job are at the baseline now: this attempt's plan omits them, yet the
        # campaign flashed them (the report says so).
        earlier = await asyncio.to_thread(done_in_job, engine, run.job, data.id) if ctx.attempt > 1 else []
        campaign = Campaign(engine, batch.journal, run.options, batch.want, {name: data.id}, actor=run.actor)
        target = batch.targets.get(name)
        if target is None:  # no BMC URL, a credential that does not resolve here: failed, never flashed
            why = batch.problems.get(name) or f"{name}: no BMC"
            return ServerDone(name, False, why, rows=server_rows(campaign, data.wave, name, why))
        try:
            async with maintenance(run.drain, name, job=run.job, why="firmware update") as held:
                [r] = await sweep_async("bmc", [target], campaign.op, fleets=batch.fleets)
                if not r.ok:
                    held.failed(f"firmware update failed: {r.error}")
        except FleetError as e:  # no BMC driver here, or the drain did not finish: never flashed, no attempt would do better
            return ServerDone(name, False, str(e), rows=server_rows(campaign, data.wave, name, str(e)))
        if earlier and name in campaign.results:
            done = campaign.results[name]
            now = {f.id for f in done.flashes}
            done.flashes[:0] = [f for f in earlier if f.id not in now]
        return ServerDone(name, bool(r.ok), r.error, round(float(r.elapsed), 3), server_rows(campaign, data.wave, name, r.error),
                          summary(r.value) if r.ok else None, r.fingerprint)  # fmt: skip

    def close(self, ctx: Context, run: FirmwareRunData, kept: FirmwareKept, outcomes: list[Outcome[ServerDone]], *,
              interrupted: bool) -> FirmwareReport:  # fmt: skip
        from fleetctl.lifecycle.locks import release
        from fleetctl.workflows.journal import JobState, Journal

        engine = get_engine()
        journal = Journal(engine, run.job, run.actor, kind=KIND, prefix=PREFIX)
        report = report_of(run, kept, outcomes)
        if interrupted:  # Ctrl-C, a cancelled workflow: what was done stays journaled; a later run resumes it
            try:
                journal.finish(JobState.INTERRUPTED, "stopped")
            finally:
                release(engine, kept.locked, owner=ctx.owner)
            return FirmwareReport(report.rows, report.failed, report.halted, report.stopped_for_window, run.job)
        out = close_campaign(engine, journal, kept.locked, owner=ctx.owner, report=report, busy=kept.busy)
        return FirmwareReport(out.rows, out.failed, out.halted, out.stopped_for_window, run.job)


FIRMWARE = register(FirmwareCampaignWorkflow())


def request(waves: list[list[str]], options: CampaignOptions, *, label: str, args: dict[str, Any], threshold: Threshold,
            window: str | None, wait: bool, actor: str, drain: DrainPlan | None = None) -> FirmwareRequest:  # fmt: skip
    """The campaign as plain data, made once by the command (its waves split by the drain plan's)."""
    return FirmwareRequest(label, args, options, split_waves([w for w in waves if w], drain), str(threshold), window, wait, actor,
                           drain)  # fmt: skip


def split_waves(waves: list[list[str]], drain: DrainPlan | None) -> list[list[str]]:
    """Each campaign wave split by the drain plan's waves (in their order), so that no wave drains more of a rack than
    --max-unavailable lets go at once; servers that are no node stay in their campaign wave's first part."""
    if drain is None:
        return waves
    out: list[list[str]] = []
    for w in waves:
        parts: dict[int, list[str]] = {}
        for n in w:
            parts.setdefault(drain.wave(n), []).append(n)
        out += [parts[k] for k in sorted(parts)]
    return out


__all__ = ["FIRMWARE", "FirmwareCampaignWorkflow", "FirmwareKept", "FirmwareReport", "FirmwareRequest", "FirmwareRunData",
           "FirmwareTally", "ServerDone", "ServerWork", "check_image_base", "failed_count", "report_of", "request",
           "split_waves", "unit_limit"]  # fmt: skip
