"""The provisioning engine's pieces: the inventory read, the refusals, the locks, the journal, the coordinators,
and each server through the steps.

:class:`Provisioner` holds them; the workflow's description
(:mod:`.described`) calls its public methods in order, on either engine: in
process one Provisioner serves the whole run, on Temporal the control queue's
worker uses one to refuse, lock and open the job, and each site worker keeps
one for the run's servers of its site (their credentials resolved there, the
racks' power ledger, the switches, the Ansible batches). The dry run
(:meth:`Provisioner.dry_run`) stays in process.

What touches the store before and after the servers are worked (the
inventory read, the locks, the job, the journal's passes) runs outside the
event loop (a thread); inside it, every store write goes through the
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

from sqlalchemy import insert, select, update

from fleetctl.errors import FleetError
from fleetctl.interfaces.bmc import PowerState
from fleetctl.inventory.service import actor, export_inventory
from fleetctl.lifecycle.locks import Refused, break_lock, owner_id, try_lock
from fleetctl.lifecycle.rack_power import RackPower
from fleetctl.lifecycle.states import ServerState as S
from fleetctl.plugins import FleetSessions, sweep_async
from fleetctl.preflight import PreflightError, Problem, for_provision
from fleetctl.store import get_engine, immediate
from fleetctl.store import tables as T
from fleetctl.targets import bmc_targets, resolve, resolve_switches
from fleetctl.times import utcnow
from fleetctl.workflows.journal import OWNER_ARG, WORKING, AsyncJournal, Journal, Pass, StepState
from fleetctl.workflows.network import protected_ports
from fleetctl.workflows.power import power_figures
from fleetctl.workflows.provision.context import load_contexts
from fleetctl.workflows.provision.coordinators import AnsibleBatcher, PowerGate, SwitchBatcher
from fleetctl.workflows.provision.model import ErrorKind, Failure, Options, Progress, Result, ServerCtx, StepError, StepFailed
from fleetctl.workflows.provision.plan import plan_server
from fleetctl.workflows.provision.steps import STEP_NAMES, STEPS, Step, StepCall, run_ansible_batch

NOT_READY = (Result.FAILED, Result.LOCKED, Result.REFUSED)


class Provisioner:
    """One provisioning run's servers and what they share (or its dry run); see the module's docstring."""

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
        self.fleets: Any = None  # fleetctl.plugins.FleetSessions while the servers are worked
        self.power = PowerGate()  # its ledger once the racks' power states are read (setup_coordinators)
        self.switches = SwitchBatcher({}, options.switch_window_s, protected={}, sessions=options.switch_sessions)
        self.ansible = AnsibleBatcher(options.ansible_window_s, self._run_ansible)
        self.declared_sites: dict[str, asyncio.Future[Any]] = {}
        self.boot_done_at: dict[str, float] = {}  # server -> wall clock of its install boot (the OS wait's clock)
        self.ansible_steps: dict[str, int] = {}  # server -> its running ansible journal row
        self.refused: dict[str, tuple[Result, str]] | None = None  # set by preflight(): servers refused or skipped, with why
        self.problems: list[Problem] = []  # what the preflight found (set with ``refused``)

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

    # --- before the servers are worked (blocking: the store; call from a thread in an event loop) -----------

    def load(self) -> None:
        """Read the servers' inventory (no credential is resolved): their contexts and live rows."""
        if self.engine is None:
            self.engine = get_engine(self.opt.url)
        with self.engine.connect() as conn:
            self.ctx = load_contexts(conn, self.names)
        self.progress = {n: Progress(n, self.ctx[n].state) for n in self.names if n in self.ctx}

    def resolve_bmcs(self) -> None:
        """Resolve the servers' BMC credential references: once per run, here (on Temporal: on the site's worker)."""
        targets, self.no_bmc = bmc_targets([c.bmc_ref for c in self.ctx.values()])
        self.bmc_targets = {t.name: t for t in targets}

    def preflight(self) -> list[Problem]:
        """Read the inventory, sort out the servers refused or skipped, and run the preflight (``fleetctl.preflight``) on
        the others: every credential and setting the run will need; touches no device, locks nothing. Once per run.

        Returns:
            The problems found (none: the run may go on).
        """
        if self.refused is None:
            self.load()
            self.resolve_bmcs()
            refused = self.refusals()
            with self.engine.connect() as conn:
                self.problems = for_provision(conn, [self.ctx[n] for n in self.names if n in self.ctx and n not in refused]).problems
            self.refused = refused
        return self.problems

    def check(self) -> None:
        """:meth:`preflight`, refusing the run on any problem.

        Raises:
            PreflightError: a credential or setting the run will need is missing
                (every problem collected; the dry run refuses the same way).
        """
        problems = self.preflight()
        if problems:
            raise PreflightError("provision", problems)

    def refusals(self) -> dict[str, tuple[Result, str]]:
        """The servers the run does not work, with why: refused (RMA; in service or maintenance without ``reprovision``),
        or skipped (ready already). Marks those reprovisioned while in service (their ports are moved by force)."""
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

    def lock(self, work: list[str]) -> dict[str, Refused]:
        """Lock what can be, as ``self.owner``; recover the locks of processes of this host that are gone; {server: who holds it}."""
        purpose = f"provision {self.label}"
        got, busy = try_lock(self.engine, work, purpose=purpose, owner=self.owner)
        self.locked += got
        stale = [n for n, why in busy.items() if why.stale]
        if stale:
            for n in stale:
                old = break_lock(self.engine, n)
                with immediate(self.engine) as c:
                    c.execute(insert(T.event).values(
                        at=utcnow(), actor=actor(), action="server.unlock", object_kind="server", object_name=n,
                        detail=f"stale lock of {old} (process gone) recovered", reason="provision resumes"))  # fmt: skip
            got, busy2 = try_lock(self.engine, stale, purpose=purpose, owner=self.owner)
            self.locked += got
            busy = {**{n: w for n, w in busy.items() if n not in stale}, **busy2}
        return busy

    def open_journal(self, work: list[str], *, who: str, workflow: str = "") -> int:
        """Open the run's job (its owner: ``self.owner``, the locks' holder) and read every server's current pass; its id.

        ``workflow``: the Temporal workflow the run is (the job is then that workflow's, never taken for gone with the
        worker that opened it).
        """
        args: dict[str, Any] = {"reprovision": self.opt.reprovision, "restart": self.opt.restart, "servers": len(work)}
        if workflow:
            args |= {"engine": "temporal", "workflow": workflow}
        journal = Journal.open(self.engine, kind="provision", target=self.label, args=args, actor=who, prefix="provision.")
        if self.owner and self.owner != owner_id():
            with immediate(self.engine) as c:
                stored = c.execute(select(T.job.c.args).where(T.job.c.id == journal.job_id)).scalar_one()
                c.execute(update(T.job).where(T.job.c.id == journal.job_id).values(args={**(stored or {}), OWNER_ARG: self.owner}))
        self.journal = AsyncJournal(journal)
        self.stats["job"] = journal.job_id
        # Every server's current pass in one query (each server's rows change only under its lock, which we hold).
        self.passes = journal.passes([self.ctx[n].id for n in work])
        return journal.job_id

    def join_journal(self, job: int, who: str) -> None:
        """Write into a job another process opened (a Temporal worker, into its run's job)."""
        self.journal = AsyncJournal(Journal(self.engine, job, who, kind="provision", prefix="provision."))
        self.stats["job"] = job

    def read_shared(self, work: list[str]) -> None:
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

    # --- the dry run ------------------------------------------------------------

    def dry_run(self) -> list[Progress]:
        """The dry run, in process: the inventory, the preflight, each server's plan read from its BMC; nothing changes.

        Raises:
            PreflightError: as the run itself would be refused (every problem collected).
        """
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        self.check()
        refused = self.refused or {}
        for n, (result, text) in refused.items():
            self.update(n, result=result, error=text)
        work = [n for n in self.names if n not in refused]
        self.read_shared(work)

        async def plan_all() -> None:
            async with FleetSessions() as fleets:
                self.fleets = fleets
                sem = asyncio.Semaphore(self.opt.concurrency)

                async def one(n: str) -> None:
                    async with sem:
                        await plan_server(self, n)

                await asyncio.gather(*(one(n) for n in work))

        asyncio.run(plan_all())
        self.figures(cpu0=cpu0, t0=t0)
        return [self.progress[n] for n in self.names]

    # --- while the servers are worked (in an event loop) ----------------------------------------

    async def setup_coordinators(self, work: list[str]) -> None:
        """The rack power ledger (the racks' servers' power states read from their BMCs), the switch batcher, the Ansible
        batcher expecting ``work``. Call with :attr:`fleets` open."""
        # Who draws power now in the racks concerned: their BMCs say (unknown counts as drawing).
        read_at = time.time()
        self.power_now = await self.power_states()
        drawing = [n for ms in self.members.values() for n, _ in ms if self.power_now.get(n) != PowerState.OFF]
        self.power = PowerGate(RackPower(self.engine, budgets=self.budgets, members=self.members, drawing=drawing, read_at=read_at,
                                         stagger_s=self.opt.stagger_s, holder=self.owner or owner_id()))  # fmt: skip
        self.switches = SwitchBatcher(self.switch_refs, self.opt.switch_window_s, protected=self.protected,
                                      sessions=self.opt.switch_sessions)  # fmt: skip
        for n in work:
            self.ansible.expect(n)

    async def power_states(self) -> dict[str, Any]:
        """{server: PowerState} of every server of the racks concerned whose BMC answered."""

        async def op(bmc: Any) -> Any:
            return await bmc.power.state()

        results = await sweep_async("bmc", self.drawing_refs, op, concurrency=self.opt.concurrency, fleets=self.fleets)
        return {r.target: r.value for r in results if r.ok}

    def figures(self, *, cpu0: Any, t0: float) -> dict[str, Any]:
        """This process's figures of the run since ``cpu0`` (``resource.getrusage``) and ``t0`` (monotonic), in :attr:`stats`."""
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
        return self.stats

    # --- one server -------------------------------------------------------------

    async def server(self, name: str) -> None:
        """One server through the steps, from where its pass stands in the journal (:meth:`resume_point`): ready, or failed
        with the step and why (its live row says which). A failure never leaves here; a cancellation does (the step's
        row is then left running: the next run resumes it)."""
        journal = self.journal
        assert journal is not None
        ctx = self.ctx[name]
        p = self.progress[name]
        cpu0 = time.thread_time()
        self.update(name, started=time.monotonic(), status="starting")
        try:
            done, interrupted = await self.resume_point(ctx)
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
                await self.failed(name, e.failure)
            elif isinstance(e, FleetError):
                await self.failed(name, Failure(p.step, ErrorKind.FLEET, str(e)))
            else:
                await self.failed(name, Failure(p.step, ErrorKind.INTERNAL, f"{e.__class__.__name__}: {e}"))
        finally:
            self.ansible.gone(name)
            p.cpu_s = time.thread_time() - cpu0

    async def run_step(self, name: str, step: Step, noted: dict[str, Any] | None) -> None:
        """One step on one server: its lifecycle state, its journal row (running, then succeeded or failed) and the step.

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

    async def failed(self, name: str, failure: Failure) -> None:
        """The server failed: its state, ``last_error`` and an audit event, and its live row."""
        assert self.journal is not None
        await self.journal.fail(name, str(failure), reason="provisioning step failed")
        self.update(name, state=S.FAILED.value, status="failed", result=Result.FAILED, failure=failure, error=str(failure),
                 finished=time.monotonic())  # fmt: skip

    async def resume_point(self, ctx: ServerCtx) -> tuple[set[str], dict[str, Any]]:
        """(steps done in the current pass, {interrupted step: what it had noted}); begins a pass when needed.

        Read from :attr:`passes` (the journal as read at the start, or as :meth:`reread` read it again) and the
        server's state: what an earlier run, or a lost attempt of this one, recorded is never done again.
        """
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

    async def reread(self, name: str) -> None:
        """The server's state and current pass read again from the store, and its live row begun anew: before a unit
        that may follow a lost attempt of itself (Temporal), whose steps moved both since this Provisioner read them."""
        assert self.journal is not None
        ctx = self.ctx[name]

        def state() -> str:
            with self.engine.connect() as conn:
                return str(conn.execute(select(T.server.c.state).where(T.server.c.id == ctx.id)).scalar_one())

        ctx.state = await asyncio.to_thread(state)
        self.passes.update(await self.journal.passes([ctx.id]))
        self.progress[name] = Progress(name, ctx.state)
        self.boot_done_at.pop(name, None)


def _cancelling() -> bool:
    """Whether the current task is being cancelled (its run interrupted), whatever error its clean-up raised since."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def worst_exit(results: list[Progress]) -> int:
    """0 when every server is ready, skipped, or planned without problems; else 1."""
    ok = (Result.READY, Result.SKIPPED, Result.PLANNED)
    return 0 if all(r.result in ok and not (r.result == Result.PLANNED and r.error) for r in results) else 1
