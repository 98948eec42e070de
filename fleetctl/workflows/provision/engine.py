"""The provisioning engine: locks, the journal, the coordinators, and each server through the steps.

What touches the store before and after the servers are worked (the
inventory read, the locks, the job, the journal's passes) runs before and
after the event loop; inside it, every store write goes through the
journal's writer thread (:class:`~fleetctl.workflows.journal.AsyncJournal`),
so a database locked by another process never stalls the loop.
"""

from __future__ import annotations

import asyncio
import resource
import threading
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fleetctl.errors import FleetError
from fleetctl.interfaces.bmc import PowerState
from fleetctl.inventory.service import actor, export_inventory
from fleetctl.lifecycle.locks import Refused, break_lock, owner_id, release, try_lock
from fleetctl.lifecycle.rack_power import RackPower
from fleetctl.lifecycle.states import ServerState as S
from fleetctl.plugins import FleetSessions, sweep_async
from fleetctl.preflight import for_provision
from fleetctl.store import get_engine, immediate
from fleetctl.targets import bmc_targets, resolve, resolve_switches
from fleetctl.times import utcnow
from fleetctl.workflows.journal import WORKING, AsyncJournal, JobState, Journal, Pass, StepState
from fleetctl.workflows.network import protected_ports
from fleetctl.workflows.power import power_figures
from fleetctl.workflows.provision.context import load_contexts
from fleetctl.workflows.provision.coordinators import AnsibleBatcher, PowerGate, SwitchBatcher
from fleetctl.workflows.provision.model import ErrorKind, Failure, Options, Progress, Result, ServerCtx, StepError, StepFailed
from fleetctl.workflows.provision.steps import STEP_NAMES, STEPS, Step, StepCall, run_ansible_batch

NOT_READY = (Result.FAILED, Result.LOCKED, Result.REFUSED)


class Provisioner:
    """One provisioning run over a list of servers (or its dry run)."""

    def __init__(self, names: list[str], *, options: Options, label: str, on_change: Callable[[], None] | None = None) -> None:
        self.names = names
        self.opt = options
        self.label = label
        self.on_change = on_change or (lambda: None)
        self.progress: dict[str, Progress] = {}
        self.ctx: dict[str, ServerCtx] = {}
        self.stats: dict[str, Any] = {}
        self.ansible_thread_cpu = 0.0
        self.engine: Any = None
        self.owner = ""
        self.locked: list[str] = []  # servers this run locked (released at the end)
        self.journal: AsyncJournal | None = None  # None on a dry run
        self.passes: dict[int, Pass] = {}  # server id -> its current pass in the journal, read at the start
        self.bmc_targets: dict[str, Any] = {}  # server -> BMCTarget, credentials resolved once for the run
        self.no_bmc: dict[str, str] = {}  # server -> why it has no BMC target
        self.drawing_refs: list[Any] = []  # every server of the racks concerned (their power counts)
        self.budgets: dict[str, int | None] = {}
        self.members: dict[str, list[tuple[str, int | None]]] = {}
        self.switch_refs: dict[str, Any] = {}
        self.protected: dict[str, set[str]] = {}
        self.power_now: dict[str, Any] = {}
        self.fleets: Any = None  # fleetctl.plugins.FleetSessions while the loop runs
        self.power = PowerGate()  # its ledger once the racks' power states are read (_setup_coordinators)
        self.switches = SwitchBatcher({}, options.switch_window_s, protected={}, sessions=options.switch_sessions)
        self.ansible = AnsibleBatcher(options.ansible_window_s, self._run_ansible)
        self.declared_sites: dict[str, asyncio.Future[Any]] = {}
        self.boot_done_at: dict[str, float] = {}  # server -> wall clock of its install boot (the OS wait's clock)
        self.ansible_steps: dict[str, int] = {}  # server -> its running ansible journal row
        self._refused: dict[str, tuple[Result, str]] | None = None  # set by check(): servers refused or skipped, with why

    # --- shared by the steps ------------------------------------------------------

    def update(self, name: str, **kw: Any) -> None:
        """Update a server's live row."""
        p = self.progress[name]
        for k, v in kw.items():
            setattr(p, k, v)
        self.on_change()

    def bmc(self, ctx: ServerCtx) -> AbstractAsyncContextManager[Any]:
        """The server's BMC through its own driver (``BMCTarget.driver``), sharing the driver's session of the run."""
        target = self.bmc_targets.get(ctx.name)
        if target is None:
            raise StepFailed(self.no_bmc.get(ctx.name, "no BMC"))
        return self.fleets.connect(target, task_poll_interval=min(2.0, self.opt.poll_s))

    async def declared(self, site: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The site as declared ({server: ServerSpec}, {model: ModelSpec}), read once per run (in a thread)."""
        if site not in self.declared_sites:
            self.declared_sites[site] = asyncio.ensure_future(asyncio.to_thread(export_inventory, self.opt.url, {site}))
        inv = await self.declared_sites[site]
        servers = {s.name: s for r in inv.sites[0].racks for s in r.servers}
        return servers, {m.name: m for m in inv.models}

    def _run_ansible(self, names: list[str], stop: threading.Event | None = None) -> Any:
        return run_ansible_batch(self, names, stop)

    # --- the run ------------------------------------------------------------------

    def run(self) -> list[Progress]:
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        interrupted = False
        try:
            work = self._prepare()
            asyncio.run(self._work(work))
        except (asyncio.CancelledError, KeyboardInterrupt):
            interrupted = True
            raise
        finally:
            self._close(interrupted=interrupted, cpu0=cpu0, t0=t0)
        return [self.progress[n] for n in self.names]

    def check(self) -> None:
        """Read the inventory and run the preflight (``fleetctl.preflight``); touches no device, locks nothing.

        Raises:
            PreflightError: a credential or setting the run will need is missing
                (every problem collected; the dry run refuses the same way).
        """
        if self._refused is not None:
            return
        self.engine = get_engine(self.opt.url)
        self._read_inventory()
        self.progress = {n: Progress(n, self.ctx[n].state) for n in self.names}
        refused = self._refusals()
        with self.engine.connect() as conn:
            for_provision(conn, [self.ctx[n] for n in self.names if n not in refused]).refuse()
        self._refused = refused

    def _prepare(self) -> list[str]:
        """Before the loop: read the inventory, preflight, refuse and skip, lock, open the job; the servers to work."""
        if not self.opt.dry_run:  # before any lock: a bad FLEETCTL_KEEP_RUNS stops here
            from fleetctl.config import data_dir
            from fleetctl.workflows.ansible_run import prune_runs, reap_leftovers

            prune_runs(data_dir() / "runs")
            # A killed run's leftovers first: its Ansible still running on our hosts, its token files (issue #13).
            reap_leftovers()
        self.check()
        refused = self._refused or {}
        for n, (result, text) in refused.items():
            self.update(n, result=result, error=text)
        work = [n for n in self.names if n not in refused]
        if not self.opt.dry_run:
            self.owner = owner_id()
            if work:
                busy = self._lock(work)
                for n, why in busy.items():
                    self.update(n, result=Result.LOCKED, locked_by=why, error=str(why))
                work = [n for n in work if n in self.locked]
            self._open_journal(work)
        self._read_shared(work)
        return work

    def _read_inventory(self) -> None:
        with self.engine.connect() as conn:
            self.ctx = load_contexts(conn, self.names)
        # Resolving reads each credential reference: once per run, not per step.
        targets, self.no_bmc = bmc_targets([c.bmc_ref for c in self.ctx.values()])
        self.bmc_targets = {t.name: t for t in targets}

    def _refusals(self) -> dict[str, tuple[Result, str]]:
        out = {}
        for n, c in self.ctx.items():
            st = S(c.state)
            if st == S.RMA:
                out[n] = (Result.REFUSED, "in RMA: returned to the vendor")
            elif st in (S.IN_SERVICE, S.MAINTENANCE) and not self.opt.reprovision:
                out[n] = (Result.REFUSED, f"{st.value}: give --reprovision (and confirm) to provision it again")
            elif st == S.READY and not self.opt.reprovision:
                out[n] = (Result.SKIPPED, "already ready (give --reprovision to provision it again)")
            if st in (S.IN_SERVICE, S.MAINTENANCE, S.READY) and self.opt.reprovision:
                c.in_service = st == S.IN_SERVICE
        return out

    def _lock(self, work: list[str]) -> dict[str, Refused]:
        """Lock what can be; recover the locks of processes of this host that are gone; {server: who holds it}."""
        from sqlalchemy import insert

        from fleetctl.models import Event

        purpose = f"provision {self.label}"
        got, busy = try_lock(self.engine, work, purpose=purpose, owner=self.owner)
        self.locked += got
        stale = [n for n, why in busy.items() if why.stale]
        if stale:
            for n in stale:
                old = break_lock(self.engine, n)
                with immediate(self.engine) as c:
                    c.execute(insert(Event.__table__).values(
                        at=utcnow(), actor=actor(), action="server.unlock", object_kind="server", object_name=n,
                        detail=f"stale lock of {old} (process gone) recovered", reason="provision resumes"))  # fmt: skip
            got, busy2 = try_lock(self.engine, stale, purpose=purpose, owner=self.owner)
            self.locked += got
            busy = {**{n: w for n, w in busy.items() if n not in stale}, **busy2}
        return busy

    def _open_journal(self, work: list[str]) -> None:
        args = {"reprovision": self.opt.reprovision, "restart": self.opt.restart, "servers": len(work)}
        journal = Journal.open(self.engine, kind="provision", target=self.label, args=args, actor=actor(), prefix="provision.")
        self.journal = AsyncJournal(journal)
        self.stats["job"] = journal.job_id
        # Every server's current pass in one query (each server's rows change only under its lock, which we hold).
        self.passes = journal.passes([self.ctx[n].id for n in work])

    def _read_shared(self, work: list[str]) -> None:
        """The racks' budgets and who is in them, the switches and their protected ports."""
        with self.engine.connect() as conn:
            _, self.budgets, self.members = power_figures(conn, work)
            sw_names = sorted({w.switch for n in work for w in self.ctx[n].ports})
            self.switch_refs = {s.name: s for s in resolve_switches(conn, sw_names)} if sw_names else {}
            self.protected = protected_ports(conn)
            others = sorted({n for ms in self.members.values() for n, _ in ms})
            unknown = [n for n in others if n not in self.ctx]
            refs = resolve(conn, unknown) if unknown else []
        known = [self.bmc_targets[n] for n in others if n in self.bmc_targets]
        self.drawing_refs = known + (bmc_targets(refs)[0] if refs else [])

    async def _work(self, work: list[str]) -> None:
        async with FleetSessions() as fleets:
            self.fleets = fleets
            await self._setup_coordinators(work)
            sem = asyncio.Semaphore(self.opt.concurrency)

            async def one(n: str) -> None:
                from fleetctl.workflows.provision.plan import plan_server

                async with sem:
                    await (plan_server(self, n) if self.opt.dry_run else self._server(n))

            await asyncio.gather(*(one(n) for n in work))

    async def _setup_coordinators(self, work: list[str]) -> None:
        # Who draws power now in the racks concerned: their BMCs say (unknown counts as drawing).
        read_at = time.time()
        self.power_now = await self._power_states()
        drawing = [n for ms in self.members.values() for n, _ in ms if self.power_now.get(n) != PowerState.OFF]
        self.power = PowerGate(RackPower(self.engine, budgets=self.budgets, members=self.members, drawing=drawing, read_at=read_at,
                                         stagger_s=self.opt.stagger_s, holder=self.owner or owner_id()))  # fmt: skip
        self.switches = SwitchBatcher(self.switch_refs, self.opt.switch_window_s, protected=self.protected,
                                      sessions=self.opt.switch_sessions)  # fmt: skip
        for n in work:
            self.ansible.expect(n)

    async def _power_states(self) -> dict[str, Any]:
        async def op(bmc: Any) -> Any:
            return await bmc.power.state()

        results = await sweep_async("bmc", self.drawing_refs, op, concurrency=self.opt.concurrency, fleets=self.fleets)
        return {r.target: r.value for r in results if r.ok}

    def _close(self, *, interrupted: bool, cpu0: Any, t0: float) -> None:
        if self.journal is not None:
            self.journal.close()  # every queued write in the store first
            failed = sum(1 for p in self.progress.values() if p.result in NOT_READY)
            state = JobState.INTERRUPTED if interrupted else (JobState.FAILED if failed else JobState.SUCCEEDED)
            error = f"{failed} of {len(self.names)} not ready" if failed else ("interrupted" if interrupted else None)
            self.journal.journal.finish(state, error)
        if self.locked:
            release(self.engine, self.locked, owner=self.owner)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.stats.update(
            makespan_s=round(time.monotonic() - t0, 2),
            cpu_s=round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2),
            process_cpu_s=round(cpu1.ru_utime + cpu1.ru_stime, 2),  # start-up and imports included
            ansible_runner_cpu_s=round(self.ansible_thread_cpu, 2),
            children_cpu_s=round(kids.ru_utime + kids.ru_stime, 2),
            ansible_batches=[len(b) for b in self.ansible.batches],
            switch_sessions=self.switches.sessions_opened,
        )

    # --- one server -------------------------------------------------------------

    async def _server(self, name: str) -> None:
        journal = self.journal
        assert journal is not None
        ctx = self.ctx[name]
        p = self.progress[name]
        cpu0 = time.thread_time()
        self.update(name, started=time.monotonic(), status="starting")
        try:
            done, interrupted = await self._resume_point(ctx)
            self.update(name, resumed=[s for s in STEP_NAMES if s in done])
            if "ansible" in done:
                self.ansible.gone(name)
            await journal.set_target(name, S.READY)
            for step in STEPS:
                if step.name not in done:
                    await self.run_step(name, step, interrupted.get(step.name))
            await self.ready(name)
        except Exception as e:  # a bug on one server must not stop the others
            if _cancelling():
                # The run is interrupted (Ctrl-C, SIGTERM, `jobs cancel`): what failed on the way out (a BMC logout on a
                # session already closed) is no failure of the server. It stays where it stopped, for the next run.
                raise asyncio.CancelledError from e
            if isinstance(e, StepError):
                await self._failed(name, e.failure)
            elif isinstance(e, FleetError):
                await self._failed(name, Failure(p.step, ErrorKind.FLEET, str(e)))
            else:
                await self._failed(name, Failure(p.step, ErrorKind.INTERNAL, f"{e.__class__.__name__}: {e}"))
        finally:
            self.ansible.gone(name)
            p.cpu_s = time.thread_time() - cpu0

    async def run_step(self, name: str, step: Step, noted: dict[str, Any] | None) -> None:
        """One step on one server: its lifecycle state, its journal row (running, then succeeded or failed) and the step.

        The one place a step is run, whichever engine sequences the steps (this one, or the
        scale-out engine's activities, :mod:`fleetctl.scaleout`).

        Raises:
            StepError: the step failed (its row says why).
        """
        journal = self.journal
        assert journal is not None
        ctx = self.ctx[name]
        p = self.progress[name]
        state = await journal.advance(name, step.phase, reason=f"provision: {step.name}")
        self.update(name, state=state, step=step.name, status="running")
        sid = await journal.start_step(ctx.id, step.name, noted=noted)  # a resumed step keeps what it had noted until it notes anew
        t_step = time.monotonic()
        try:
            output = await step.run(StepCall(self, ctx, sid, noted))
        except (TimeoutError, FleetError, OSError) as e:
            if _cancelling():  # interrupted: the step's row stays running (the resume point), not failed
                raise asyncio.CancelledError from e
            failure = Failure.of(step.name, e)
            await journal.end_step(sid, StepState.FAILED, error=failure.reason)
            raise StepError(failure) from e
        await journal.end_step(sid, StepState.SUCCEEDED, output=output)
        p.done.append(step.name)
        p.timings[step.name] = round(time.monotonic() - t_step, 2)

    async def ready(self, name: str) -> None:
        """Every step done: the server is ready, its target cleared."""
        assert self.journal is not None
        state = await self.journal.advance(name, S.READY, reason="provision: every step done")
        await self.journal.set_target(name, None)
        self.update(name, state=state, step="ready", status="ready", result=Result.READY, finished=time.monotonic())

    async def _failed(self, name: str, failure: Failure) -> None:
        assert self.journal is not None
        await self.journal.fail(name, str(failure), reason="provisioning step failed")
        self.update(name, state=S.FAILED.value, status="failed", result=Result.FAILED, failure=failure, error=str(failure),
                 finished=time.monotonic())  # fmt: skip

    async def _resume_point(self, ctx: ServerCtx) -> tuple[set[str], dict[str, Any]]:
        """(steps done in the current pass, {interrupted step: what it had noted}); begins a pass when needed."""
        assert self.journal is not None
        st = S(ctx.state)
        p = self.passes.get(ctx.id, Pass())
        resume = p.begin is not None and not self.opt.restart and (st in WORKING or st == S.FAILED)
        if not resume:
            await self.journal.begin_pass(ctx.id, {"from_state": ctx.state, "reprovision": self.opt.reprovision})
            return set(), {}
        # A step that failed is retried; so is every step after the first not done.
        done = p.done()
        first_open = next((i for i, s in enumerate(STEP_NAMES) if s not in done), len(STEP_NAMES))
        done = {s for s in done if STEP_NAMES.index(s) < first_open}
        # When the OS wait is to be resumed, its clock started at the boot.
        boot = p.steps.get("boot")
        if "boot" in done and boot is not None and boot.finished_at is not None:
            self.boot_done_at[ctx.name] = boot.finished_at.timestamp()
        return done, p.interrupted()


def _cancelling() -> bool:
    """Whether the current task is being cancelled (its run interrupted), whatever error its clean-up raised since."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def provision(
    names: list[str], *, options: Options, label: str, on_change: Callable[[], None] | None = None
) -> tuple[list[Progress], dict[str, Any]]:
    """Provision the servers; per-server results and the run's figures."""
    p = Provisioner(names, options=options, label=label, on_change=on_change)
    results = p.run()
    return results, p.stats


def worst_exit(results: list[Progress]) -> int:
    """0 when every server is ready, skipped, or planned without problems; else 1."""
    ok = (Result.READY, Result.SKIPPED, Result.PLANNED)
    return 0 if all(r.result in ok and not (r.result == Result.PLANNED and r.error) for r in results) else 1
