"""`fleetctl provision`: from cabled and powered to ready, per server, as journaled steps.

Every server of the target is worked by its own coroutine, all in one event
loop; the shared resources are behind small coordinators:

- ``PowerGate``: a rack's power budget and the stagger between two starts;
- ``SwitchBatcher``: one SSH session per switch carries the port moves that
  arrive together (a rack's servers reach the VLAN steps at about the same
  time);
- ``AnsibleBatcher``: one ansible-playbook run per batch of servers that
  reached step 9 together.

The journal is the Job/JobStep tables. A pass over a server begins with a
``provision.begin`` step; each step is a row written ``running`` before it
acts and ``succeeded``/``failed`` after. Re-running resumes the pass: steps
that succeeded are not repeated, and a step left ``running`` by a process that
died is run again, which is safe because every step checks before it acts
(firmware already at the baseline is not flashed; a boot that happened is
recognised from the consumed one-time override; ports already right are not
touched). The power step writes what it is about to do before doing it.

One failing server never stops the others: a step's failure moves that
server to ``failed`` with the step and the reason, and the run goes on.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, update

from fleetctl.errors import FleetError, Timeout
from fleetctl.lifecycle.states import ServerState as S
from fleetctl.store import immediate

# The steps, in order, with what each makes true. The lifecycle state a
# server is in while a step runs is in PHASE.
STEPS: list[tuple[str, str]] = [
    ("bmc", "BMC reachable, credentials work, certificate pinned"),
    ("inspect", "the BMC's view matches the inventory (drift stops the server unless accepted)"),
    ("firmware", "firmware at the model's baseline (running updates waited for; components at the baseline skipped)"),
    ("bios", "BIOS profile staged (applied by the install boot, verified once the OS is up)"),
    ("vlan-provisioning", "data ports on the site's provisioning VLAN"),
    ("boot", "one-time boot from PXE or virtual media, then power on (or cycle if on), within the rack's power budget"),
    ("os", "the installed OS answers over SSH; BIOS settings verified"),
    ("vlan-production", "data ports on the VLANs of the cabling plan"),
    ("ansible", "playbooks: base OS, accelerator runtime and device check, Kubernetes join"),
    ("accel", "quick accelerator check: boards present, PCIe link at full gen/width, board firmware at the baseline"),
]
STEP_NAMES = [s for s, _ in STEPS]
PHASE: dict[str, S] = {
    "bmc": S.PREPARING, "inspect": S.PREPARING, "firmware": S.PREPARING, "bios": S.PREPARING,
    "vlan-provisioning": S.PREPARING, "boot": S.INSTALLING, "os": S.INSTALLING, "vlan-production": S.INSTALLING,
    "ansible": S.CONFIGURING, "accel": S.VALIDATING,
}  # fmt: skip
CHAIN = [S.PREPARING, S.INSTALLING, S.CONFIGURING, S.VALIDATING, S.READY]
WORKING = {S.PREPARING, S.INSTALLING, S.CONFIGURING, S.VALIDATING}

# NICs that are a BMC's own port: never moved to the provisioning VLAN.
BMC_NIC_NAMES = frozenset({"bmc", "ipmi", "oob", "ilo", "idrac", "xcc", "mgmt-bmc"})

PROVISIONING_DEFAULTS: dict[str, Any] = {
    "vlan": None, "boot": "pxe", "image": None, "firmware_images": None,
    "firmware_template": "{base}/{id}-{version}.bin", "install_timeout": 3600,
    "ssh_user": "root", "ssh_key": None, "k8s": None,
}  # fmt: skip


@dataclass
class Options:
    dry_run: bool = False
    reprovision: bool = False
    restart: bool = False
    accept_drift: bool = False
    concurrency: int = 64
    stagger_s: float = 2.0
    ansible_window_s: float = 10.0
    ansible_forks: int = 50
    switch_window_s: float = 1.0
    switch_sessions: int = 8
    poll_s: float = 2.0
    firmware_timeout_s: float = 3600.0
    url: str | None = None


@dataclass
class ServerCtx:
    """What the workflow knows of one server, read once at the start."""

    id: int
    name: str
    state: str
    site: str
    rack: str  # "site/rack"
    model: str
    board_kind: str | None
    board_count: int
    peak_w: int
    baseline: dict[str, str]
    bios: dict[str, Any]
    ports: list[Any]  # PortWant of data ports
    prov: dict[str, Any]
    groups: list[str]
    hostvars: dict[str, Any]
    bmc_ref: Any
    in_service: bool = False


@dataclass
class Progress:
    """The live view's row for one server, and its final result."""

    server: str
    state: str
    step: str = ""
    status: str = "waiting"
    started: float = 0.0
    finished: float | None = None
    result: str | None = None  # ready, failed, refused, skipped, planned
    failed_step: str | None = None
    error: str | None = None
    done: list[str] = field(default_factory=list)  # steps finished in this run
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step finished in this run
    # Seconds spent waiting on what is shared (a power slot, a switch session, an Ansible batch):
    # the step timings minus these are the server's own time.
    waited: float = 0.0
    resumed: list[str] = field(default_factory=list)  # steps found done in the journal
    plan: dict[str, Any] = field(default_factory=dict)
    cpu_s: float = 0.0

    def row(self) -> dict[str, Any]:
        elapsed = (self.finished or time.monotonic()) - self.started if self.started else 0.0
        out = {"server": self.server, "result": self.result or "running", "state": self.state,
               "step": self.failed_step or self.step, "elapsed": round(elapsed, 1), "error": self.error,
               "done": self.done, "resumed": self.resumed, "timings": self.timings, "waited": round(self.waited, 2),
               "own_s": round(sum(self.timings.values()) - self.waited, 2)}  # fmt: skip
        if self.plan:
            out["plan"] = self.plan
        return out


class StepFailed(FleetError):
    """A step found the server not as it must be (drift, over budget, a failed check)."""


# ---------------------------------------------------------------- journal


class Journal:
    """Job, steps and state moves in the store; every write its own short transaction."""

    def __init__(self, engine: Any, job_id: int | None, actor: str) -> None:
        self.engine = engine
        self.job_id = job_id
        self.actor = actor

    @classmethod
    def open(cls, engine: Any, *, target: str, args: dict[str, Any], actor: str) -> Journal:
        from fleetctl.models import Job
        from fleetctl.models.base import utcnow

        with immediate(engine) as conn:
            job_id = conn.execute(
                insert(Job.__table__).values(kind="provision", target=target, state="running", actor=actor, args=args, created_at=utcnow())
            ).inserted_primary_key[0]
        return cls(engine, job_id, actor)

    def passes(self, server_ids: list[int]) -> dict[int, dict[str, Any]]:
        """Per server: the current pass's begin step id and its steps' last states."""
        from fleetctl.store import tables as T

        out: dict[int, dict[str, Any]] = {sid: {"begin": None, "steps": {}} for sid in server_ids}
        q = (
            select(T.job_step.c.id, T.job_step.c.server_id, T.job_step.c.name, T.job_step.c.state, T.job_step.c.output,
                   T.job_step.c.finished_at)
            .join(T.job, T.job.c.id == T.job_step.c.job_id)
            .where(T.job.c.kind == "provision", T.job_step.c.server_id.in_(server_ids), T.job_step.c.name.like("provision.%"))
            .order_by(T.job_step.c.id)
        )
        with self.engine.connect() as conn:
            for r in conn.execute(q):
                p = out[r.server_id]
                step = r.name.removeprefix("provision.")
                if step == "begin":
                    p["begin"], p["steps"] = r.id, {}
                else:
                    p["steps"][step] = {"state": r.state, "output": r.output, "finished_at": r.finished_at, "id": r.id}
        return out

    def begin_pass(self, server_id: int, detail: dict[str, Any]) -> None:
        self._step_row(server_id, "begin", "succeeded", output=detail, finished=True)

    def _step_row(self, server_id: int, name: str, state: str, *, output: Any = None, error: str | None = None,
                  finished: bool = False) -> int:  # fmt: skip
        from fleetctl.models import JobStep
        from fleetctl.models.base import utcnow

        now = utcnow()
        with immediate(self.engine) as conn:
            return conn.execute(
                insert(JobStep.__table__).values(
                    job_id=self.job_id, server_id=server_id, name=f"provision.{name}", state=state, started_at=now,
                    finished_at=now if finished else None, output=_dump(output), error=error,
                )
            ).inserted_primary_key[0]

    def start_step(self, server_id: int, name: str) -> int:
        return self._step_row(server_id, name, "running")

    def note(self, step_id: int, output: Any) -> None:
        """Write what a step is about to do (or has learned) before it goes on."""
        from fleetctl.store import tables as T

        with immediate(self.engine) as conn:
            conn.execute(update(T.job_step).where(T.job_step.c.id == step_id).values(output=_dump(output)))

    def end_step(self, step_id: int, *, ok: bool, output: Any = None, error: str | None = None) -> None:
        from fleetctl.models.base import utcnow
        from fleetctl.store import tables as T

        with immediate(self.engine) as conn:
            conn.execute(
                update(T.job_step).where(T.job_step.c.id == step_id).values(
                    state="succeeded" if ok else "failed", finished_at=utcnow(), output=_dump(output), error=error
                )
            )

    def advance(self, name: str, wanted: S, *, reason: str) -> str:
        """Walk the server along the chain of working states up to ``wanted``; return the state now."""
        from fleetctl.lifecycle.machine import move
        from fleetctl.store import tables as T

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

    def fail(self, name: str, error: str) -> None:
        from fleetctl.lifecycle.machine import move
        from fleetctl.store import tables as T

        with immediate(self.engine) as conn:
            current = conn.execute(select(T.server.c.state).where(T.server.c.name == name)).scalar_one()
            if current != S.FAILED:
                move(conn, name, S.FAILED, actor=self.actor, reason="provisioning step failed", expected=current, error=error[:1000])
            else:
                conn.execute(update(T.server).where(T.server.c.name == name).values(last_error=error[:1000]))

    def set_target(self, name: str, target: str | None) -> None:
        from fleetctl.store import tables as T

        with immediate(self.engine) as conn:
            conn.execute(update(T.server).where(T.server.c.name == name).values(target_state=target))

    def finish(self, state: str, error: str | None) -> None:
        from fleetctl.models.base import utcnow
        from fleetctl.store import tables as T

        with immediate(self.engine) as conn:
            conn.execute(update(T.job).where(T.job.c.id == self.job_id).values(state=state, finished_at=utcnow(), error=error))

    def pin(self, name: str, fingerprint: str) -> None:
        from fleetctl.store import tables as T

        with immediate(self.engine) as conn:
            # Trust on first use: only where nothing was pinned yet.
            conn.execute(
                update(T.server).where(T.server.c.name == name, T.server.c.bmc_fingerprint.is_(None)).values(bmc_fingerprint=fingerprint)
            )


def _dump(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, default=str, sort_keys=True)[:20000]


# ---------------------------------------------------------------- coordinators


class PowerGate:
    """Admit power-ons one rack at a time: within the budget, ``stagger_s`` apart.

    A server already drawing power (found on) adds nothing when it is cycled,
    but its restart still takes a stagger slot (inrush). Draw only grows
    during a run (servers stay on), so a server that does not fit now never
    will: it is refused at once with the figures.
    """

    def __init__(self, budgets: dict[str, int | None], drawing: dict[str, int], stagger_s: float) -> None:
        self.budgets = budgets
        self.draw = dict(drawing)  # rack -> counted watts
        self.stagger_s = stagger_s
        self.next_start: dict[str, float] = {}
        self.locks: dict[str, asyncio.Lock] = {}

    async def admit(self, rack: str, peak_w: int, *, already_drawing: bool) -> float:
        """Wait for this server's slot; return the draw counted for the rack after it."""
        lock = self.locks.setdefault(rack, asyncio.Lock())
        async with lock:
            budget = self.budgets.get(rack)
            current = self.draw.get(rack, 0)
            add = 0 if already_drawing else peak_w
            if budget is not None and current + add > budget:
                raise StepFailed(f"rack {rack} would draw {current + add} W at peak, over its {budget} W budget")
            wait = self.next_start.get(rack, 0.0) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.draw[rack] = current + add
            self.next_start[rack] = time.monotonic() + self.stagger_s
            return self.draw[rack]


class SwitchBatcher:
    """Port moves per switch, coalesced: what arrives within a window shares one SSH session."""

    def __init__(self, switches: dict[str, Any], window_s: float, *, protected: dict[str, set[str]], sessions: int = 8) -> None:
        self.switches = switches  # name -> SwitchRef
        self.window_s = window_s
        self.protected = protected
        self.sessions = sessions  # SSH sessions per switch at once
        self.pending: dict[str, list[tuple[str, Any, bool, asyncio.Future[Any]]]] = {}
        self.flushers: dict[str, asyncio.Task[None]] = {}
        self.sessions_opened = 0
        self.work_s: dict[tuple[str, str], float] = {}  # the last change's own seconds, per port

    async def change(self, switch: str, port: str, wanted: Any, *, force: bool) -> Any:
        """Apply one port change (read, diff, apply, read back, verify, roll back); the PortChange."""
        if switch not in self.switches:
            raise StepFailed(f"switch {switch} is not in the inventory")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.setdefault(switch, []).append((port, wanted, force, fut))
        if switch not in self.flushers or self.flushers[switch].done():
            self.flushers[switch] = asyncio.create_task(self._flush(switch))
        return await fut

    async def _flush(self, switch: str) -> None:
        await asyncio.sleep(self.window_s)
        while self.pending.get(switch):
            work, self.pending[switch] = self.pending[switch], []
            try:
                results = await asyncio.to_thread(self._apply, switch, [(p, w, f) for p, w, f, _ in work])
            except Exception as e:  # noqa: BLE001 - every waiter gets the reason
                for *_, fut in work:
                    if not fut.done():
                        fut.set_exception(e if isinstance(e, FleetError) else StepFailed(f"{switch}: {e}"))
                continue
            for (_, _, _, fut), res in zip(work, results, strict=True):
                if fut.done():
                    continue
                if isinstance(res, Exception):
                    fut.set_exception(res)
                else:
                    fut.set_result(res)

    def _apply(self, switch: str, work: list[tuple[str, Any, bool]]) -> list[Any]:
        """Apply the ports' changes over up to ``sessions`` SSH sessions to the switch at once.

        A port change waits on the switch's CLI far more than it computes
        (read, configure, read back), so a rack's 40 ports go through several
        sessions side by side; each session takes the next port still to do.
        Switches allow several management sessions (SONiC's sshd 10, EOS more).
        """
        import threading

        from fleetctl.plugins import load_driver
        from fleetctl.targets import switch_targets

        targets, unreachable = switch_targets([self.switches[switch]])
        if not targets:
            raise StepFailed(f"{switch}: {unreachable.get(switch, 'unreachable')}")
        protected = self.protected.get(switch, set())
        queue = list(enumerate(work))
        results: list[Any] = [None] * len(work)
        lock = threading.Lock()

        def op(sw: Any) -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    i, (port, wanted, force) = queue.pop(0)
                t0 = time.monotonic()
                try:
                    results[i] = sw.apply_port_change(port, wanted, protected=protected, force=force)
                except FleetError as e:  # one refused port does not stop the others
                    results[i] = StepFailed(f"{switch} {port}: {e}")
                self.work_s[(switch, port)] = time.monotonic() - t0

        k = max(1, min(self.sessions, len(work)))
        self.sessions_opened += k
        driver_cls = load_driver("switch", "netmiko")
        outcomes = driver_cls.sweep(targets * k, op, concurrency=k)
        errors = [o.error for o in outcomes if not o.ok]
        return [r if r is not None else StepFailed(f"{switch}: {errors[0] if errors else 'not done'}") for r in results]


class AnsibleBatcher:
    """Servers reaching step 9 together share one ansible-playbook run.

    A batch starts when every server still working has reached the step
    (nobody else is coming), or ``window_s`` after its first server arrived.
    Servers arriving while a batch runs form the next one; batches may run
    side by side.
    """

    def __init__(self, window_s: float, run: Callable[[list[str]], Any]) -> None:
        self.window_s = window_s
        self.run = run  # blocking: {name: HostOutcome}
        self.expected: set[str] = set()  # servers that may still arrive
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self.timer: asyncio.Task[None] | None = None
        self.batches: list[list[str]] = []
        self.started: dict[str, float] = {}  # when each server's batch started
        self.running: set[asyncio.Task[None]] = set()

    def expect(self, name: str) -> None:
        self.expected.add(name)

    def gone(self, name: str) -> None:
        """A server that will not arrive (failed, or step 9 already done)."""
        self.expected.discard(name)
        self._maybe_now()

    async def submit(self, name: str) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[name] = fut
        self.expected.discard(name)
        if self.timer is None or self.timer.done():
            self.timer = asyncio.create_task(self._after_window())
        self._maybe_now()
        return await fut

    def _maybe_now(self) -> None:
        if self.pending and not self.expected:
            self._start()

    async def _after_window(self) -> None:
        await asyncio.sleep(self.window_s)
        if self.pending:
            self._start()

    def _start(self) -> None:
        batch, self.pending = self.pending, {}
        now = time.monotonic()
        self.started.update(dict.fromkeys(batch, now))
        if self.timer is not None and not self.timer.done() and self.timer is not asyncio.current_task():
            self.timer.cancel()
        self.timer = None
        self.batches.append(sorted(batch))
        task = asyncio.create_task(self._run(batch))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _run(self, batch: dict[str, asyncio.Future[Any]]) -> None:
        try:
            results = await asyncio.to_thread(self.run, sorted(batch))
        except Exception as e:  # noqa: BLE001 - every host of the batch gets the reason
            for fut in batch.values():
                if not fut.done():
                    fut.set_exception(e if isinstance(e, FleetError) else StepFailed(f"ansible run failed: {e}"))
            return
        for name, fut in batch.items():
            if not fut.done():
                fut.set_result(results.get(name))


# ---------------------------------------------------------------- reading the inventory


def load_contexts(conn: Any, names: list[str]) -> dict[str, ServerCtx]:
    """Everything the steps need per server, in a few queries."""
    from fleetctl.inventory.ansible import _hosts
    from fleetctl.inventory.queries import site_provisioning
    from fleetctl.store import tables as T
    from fleetctl.targets import resolve
    from fleetctl.workflows.network import port_plan

    refs = {r.name: r for r in resolve(conn, names)}
    q = (
        select(T.server.c.id, T.server.c.name, T.server.c.state, T.rack.c.name.label("rack"), T.site.c.name.label("site"),
               T.hardware_model.c.name.label("model"), T.hardware_model.c.id.label("model_id"), T.hardware_model.c.board_kind,
               T.hardware_model.c.board_count, T.hardware_model.c.power_peak_w, T.bios_profile.c.attributes)
        .join(T.rack, T.rack.c.id == T.server.c.rack_id)
        .join(T.site, T.site.c.id == T.rack.c.site_id)
        .join(T.hardware_model, T.hardware_model.c.id == T.server.c.model_id)
        .outerjoin(T.bios_profile, T.bios_profile.c.name == T.hardware_model.c.bios_profile)
        .where(T.server.c.name.in_(names))
    )
    rows = {r.name: r for r in conn.execute(q)}
    baseline: dict[int, dict[str, str]] = {}
    for r in conn.execute(select(T.firmware_baseline)):
        baseline.setdefault(r.model_id, {})[r.component] = r.version
    plan = port_plan(conn, servers=set(names))
    ports: dict[str, list[Any]] = {}
    for wants in plan.values():
        for w in wants:
            server, _, nic = w.who.partition("/")
            if nic.lower() not in BMC_NIC_NAMES:
                ports.setdefault(server, []).append(w)
    provs: dict[str, dict[str, Any]] = {}
    hosts = _hosts(conn, servers_only=set(names))
    out = {}
    for name in names:
        r = rows[name]
        if r.site not in provs:
            provs[r.site] = {**PROVISIONING_DEFAULTS, **(site_provisioning(conn, r.site) or {})}
        h = hosts.get(name, {"vars": {}, "groups": []})
        out[name] = ServerCtx(
            id=r.id, name=name, state=r.state, site=r.site, rack=f"{r.site}/{r.rack}", model=r.model,
            board_kind=r.board_kind, board_count=r.board_count or 0, peak_w=r.power_peak_w or 0,
            baseline=baseline.get(r.model_id, {}), bios=dict(r.attributes or {}), ports=ports.get(name, []),
            prov=provs[r.site], groups=list(h["groups"]), hostvars=dict(h["vars"]), bmc_ref=refs[name],
        )  # fmt: skip
    return out


def host_endpoint(ctx: ServerCtx) -> dict[str, Any]:
    """How to reach a server's installed OS, as the inventory says.

    The server's ``host`` (``host[:port]``, in the Ansible variables as
    ansible_host/ansible_port) or its name on port 22; the site's SSH user and
    key. With the site's ``known_hosts`` the host key is checked strictly
    against that file; without it, a freshly installed host's new key is
    accepted on first contact into fleetctl's own known_hosts, and checked
    from then on.
    """
    from fleetctl.config import data_dir

    known = ctx.prov.get("known_hosts")
    return {"host": ctx.hostvars.get("ansible_host", ctx.name), "port": int(ctx.hostvars.get("ansible_port", 22)),
            "user": ctx.prov["ssh_user"], "key_file": ctx.prov.get("ssh_key"),
            "known_hosts": known or str(data_dir() / "known_hosts"), "strict": bool(known), "vars": {}}  # fmt: skip


def ansible_hostvars(ctx: ServerCtx, ep: dict[str, Any]) -> dict[str, Any]:
    kh = ep.get("known_hosts")
    check = "yes" if ep.get("strict") else "accept-new"
    common = f"-o StrictHostKeyChecking={check}" + (f" -o UserKnownHostsFile={kh}" if kh else "")
    out = {**ctx.hostvars, "ansible_host": ep["host"], "ansible_port": ep["port"], "ansible_user": ep["user"],
           "ansible_ssh_common_args": common, "ansible_ssh_pipelining": True}  # fmt: skip
    if ep.get("key_file"):
        out["ansible_ssh_private_key_file"] = ep["key_file"]
    out.update(ep.get("vars") or {})
    return out


async def ssh_ready(ep: dict[str, Any], timeout: float = 10.0) -> str | None:
    """None when the host lets us log in and run a command; else why not.

    A cheap probe first (TCP and the SSH banner, no cryptography), so that
    polling an installing host costs next to nothing; the login only once a
    banner answers.
    """
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(ep["host"], ep["port"]), timeout)
    except (TimeoutError, OSError) as e:
        return f"{ep['host']}:{ep['port']}: {e.__class__.__name__}"
    try:
        banner = await asyncio.wait_for(reader.readline(), timeout)
    except (TimeoutError, OSError):
        banner = b""
    finally:
        writer.close()
    if not banner.startswith(b"SSH-"):
        return f"{ep['host']}:{ep['port']}: no SSH banner"
    import asyncssh

    keys = [ep["key_file"]] if ep.get("key_file") else ()
    kh = ep.get("known_hosts") if ep.get("strict") else None
    try:
        async with asyncssh.connect(ep["host"], port=ep["port"], username=ep["user"], client_keys=keys or None,
                                    known_hosts=kh, agent_path=None, connect_timeout=timeout) as conn:  # fmt: skip
            done = await asyncio.wait_for(conn.run("true", check=False), timeout)
            if done.exit_status != 0:
                return f"`true` exited {done.exit_status}"
    except (TimeoutError, OSError, asyncssh.Error) as e:
        return f"ssh {ep['user']}@{ep['host']}:{ep['port']}: {e}"
    return None


# ---------------------------------------------------------------- the run


class Provisioner:
    def __init__(self, names: list[str], *, options: Options, label: str, on_change: Callable[[], None] | None = None) -> None:
        self.names = names
        self.opt = options
        self.label = label
        self.on_change = on_change or (lambda: None)
        self.progress: dict[str, Progress] = {}
        self.journal: Journal | None = None
        self.ctx: dict[str, ServerCtx] = {}
        self.stats: dict[str, Any] = {}
        self.ansible_thread_cpu = 0.0
        self._ansible_steps: dict[str, int] = {}  # server -> its running ansible journal row

    # --- helpers ---------------------------------------------------------

    def _set(self, name: str, **kw: Any) -> None:
        p = self.progress[name]
        for k, v in kw.items():
            setattr(p, k, v)
        self.on_change()

    def _bmc_target(self, ctx: ServerCtx) -> Any:
        """The server's BMCTarget, resolved once per run for every server.

        Resolving reads each credential reference; every
        step of every server opens the BMC, so doing it per step was the same
        work forty times over.
        """
        if not hasattr(self, "_targets"):
            from fleetctl.targets import bmc_targets

            targets, self._unreachable = bmc_targets([c.bmc_ref for c in self.ctx.values()])
            self._targets = {t.name: t for t in targets}
        target = self._targets.get(ctx.name)
        if target is None:
            raise StepFailed(self._unreachable.get(ctx.name, "no BMC"))
        return target

    def _bmc(self, ctx: ServerCtx) -> Any:
        from fleetctl.plugins import load_driver

        driver_cls = load_driver("bmc", "redfish")
        return driver_cls(self._bmc_target(ctx), fleet=self.fleet, task_poll_interval=min(2.0, self.opt.poll_s))

    # --- entry ---------------------------------------------------------

    def run(self) -> list[Progress]:
        return asyncio.run(self._main())

    async def _main(self) -> list[Progress]:
        from fleetctl.inventory.service import actor
        from fleetctl.lifecycle.locks import _owner_alive, owner_id, release, try_lock
        from fleetctl.store import get_engine

        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        if not self.opt.dry_run:  # before any lock: a bad FLEETCTL_KEEP_RUNS stops here
            from fleetctl.config import data_dir
            from fleetctl.workflows.ansible_run import prune_runs

            prune_runs(data_dir() / "runs")
        engine = get_engine(self.opt.url)
        self.engine = engine
        with engine.connect() as conn:
            self.ctx = load_contexts(conn, self.names)
        self.progress = {n: Progress(n, self.ctx[n].state) for n in self.names}
        refused = self._refusals()
        for n, why in refused.items():
            self._set(n, result="refused" if why[0] == "refused" else "skipped", error=why[1])
        work = [n for n in self.names if n not in refused]
        owner = owner_id()
        locked: list[str] = []
        if not self.opt.dry_run and work:
            locked, busy = try_lock(engine, work, purpose=f"provision {self.label}", owner=owner)
            stale = [n for n, why in busy.items() if _is_stale(why, _owner_alive)]
            if stale:
                from fleetctl.lifecycle.locks import break_lock
                from fleetctl.models import Event
                from fleetctl.models.base import utcnow

                for n in stale:
                    old = break_lock(engine, n)
                    with immediate(engine) as c:
                        c.execute(insert(Event.__table__).values(
                            at=utcnow(), actor=actor(), action="server.unlock", object_kind="server", object_name=n,
                            detail=f"stale lock of {old} (process gone) recovered", reason="provision resumes"))  # fmt: skip
                got, busy2 = try_lock(engine, stale, purpose=f"provision {self.label}", owner=owner)
                locked += got
                busy = {**{n: w for n, w in busy.items() if n not in stale}, **busy2}
            for n, why in busy.items():
                self._set(n, result="locked", error=why)
            work = [n for n in work if n in locked]
        self.journal = None
        if not self.opt.dry_run:
            args = {"reprovision": self.opt.reprovision, "restart": self.opt.restart, "servers": len(work)}
            self.journal = Journal.open(engine, target=self.label, args=args, actor=actor())
            self.stats["job"] = self.journal.job_id
        from fleetctl_drivers.redfish.client import FleetSession

        interrupted = False
        try:
            async with FleetSession() as fleet:
                self.fleet = fleet
                await self._setup_coordinators(work)
                sem = asyncio.Semaphore(self.opt.concurrency)

                async def one(n: str) -> None:
                    async with sem:
                        await (self._plan_server(n) if self.opt.dry_run else self._server(n))

                await asyncio.gather(*(one(n) for n in work))
        except (asyncio.CancelledError, KeyboardInterrupt):
            interrupted = True
            raise
        finally:
            if self.journal is not None:
                failed = sum(1 for p in self.progress.values() if p.result in ("failed", "locked", "refused"))
                state = "interrupted" if interrupted else ("failed" if failed else "succeeded")
                self.journal.finish(state, f"{failed} of {len(self.names)} not ready" if failed else ("interrupted" if interrupted else None))
            if locked:
                release(engine, locked, owner=owner)
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            self.stats.update(
                makespan_s=round(time.monotonic() - t0, 2),
                cpu_s=round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2),
                process_cpu_s=round(cpu1.ru_utime + cpu1.ru_stime, 2),  # start-up and imports included
                ansible_runner_cpu_s=round(self.ansible_thread_cpu, 2),
                children_cpu_s=round(kids.ru_utime + kids.ru_stime, 2),
                ansible_batches=[len(b) for b in getattr(self, "ansible", None).batches] if getattr(self, "ansible", None) else [],
                switch_sessions=self.switches.sessions_opened if getattr(self, "switches", None) else 0,
            )
        return [self.progress[n] for n in self.names]

    def _refusals(self) -> dict[str, tuple[str, str]]:
        out = {}
        for n, c in self.ctx.items():
            st = S(c.state)
            if st == S.RMA:
                out[n] = ("refused", "in RMA: returned to the vendor")
            elif st in (S.IN_SERVICE, S.MAINTENANCE) and not self.opt.reprovision:
                out[n] = ("refused", f"{st.value}: give --reprovision (and confirm) to provision it again")
            elif st == S.READY and not self.opt.reprovision:
                out[n] = ("skipped", "already ready (give --reprovision to provision it again)")
            if st in (S.IN_SERVICE, S.MAINTENANCE, S.READY) and self.opt.reprovision:
                c.in_service = st == S.IN_SERVICE
        return out

    async def _setup_coordinators(self, work: list[str]) -> None:
        from fleetctl.interfaces.bmc import PowerState
        from fleetctl.targets import resolve_switches
        from fleetctl.workflows.network import protected_ports
        from fleetctl.workflows.power import power_figures

        with self.engine.connect() as conn:
            _, budgets, members = power_figures(conn, work)
            sw_names = sorted({w.switch for n in work for w in self.ctx[n].ports})
            self.switch_refs = {s.name: s for s in resolve_switches(conn, sw_names)} if sw_names else {}
            protected = protected_ports(conn)
        # Who draws power now in the racks concerned: their BMCs say (unknown counts as drawing).
        others = sorted({n for ms in members.values() for n, _ in ms})
        states = await self._power_states(others)
        self.power_now = states
        drawing = {rack: sum(p or 0 for n, p in ms if states.get(n) != PowerState.OFF) for rack, ms in members.items()}
        self.power = PowerGate(budgets, drawing, self.opt.stagger_s)
        self.switches = SwitchBatcher(self.switch_refs, self.opt.switch_window_s, protected=protected, sessions=self.opt.switch_sessions)
        self.ansible = AnsibleBatcher(self.opt.ansible_window_s, self._run_ansible)
        for n in work:
            self.ansible.expect(n)

    async def _power_states(self, names: list[str]) -> dict[str, Any]:
        from fleetctl.targets import bmc_targets, resolve

        with self.engine.connect() as conn:
            refs = resolve(conn, names) if names else []
        targets, _ = bmc_targets(refs)
        from fleetctl.plugins import load_driver

        driver_cls = load_driver("bmc", "redfish")

        async def op(bmc: Any) -> Any:
            return await bmc.power.state()

        results = await driver_cls.sweep(targets, op, concurrency=self.opt.concurrency, fleet=self.fleet) if targets else []
        return {r.target: r.value for r in results if r.ok}

    # --- one server ---------------------------------------------------

    async def _server(self, name: str) -> None:
        assert self.journal is not None
        ctx = self.ctx[name]
        cpu0 = time.thread_time()
        self._set(name, started=time.monotonic(), status="starting")
        try:
            done, interrupted = self._resume_point(ctx)
            self._set(name, resumed=[s for s in STEP_NAMES if s in done])
            if "ansible" in done:
                self.ansible.gone(name)
            self.journal.set_target(name, S.READY.value)
            for step in STEP_NAMES:
                if step in done:
                    continue
                state = self.journal.advance(name, PHASE[step], reason=f"provision: {step}")
                self._set(name, state=state, step=step, status="running")
                sid = self.journal.start_step(ctx.id, step)
                t_step = time.monotonic()
                try:
                    output = await getattr(self, "_step_" + step.replace("-", "_"))(ctx, sid, interrupted.get(step))
                except (TimeoutError, FleetError, OSError) as e:
                    msg = str(e) or e.__class__.__name__
                    self.journal.end_step(sid, ok=False, error=msg)
                    raise StepFailed(f"{step}: {msg}") from e
                self.journal.end_step(sid, ok=True, output=output)
                self.progress[name].done.append(step)
                self.progress[name].timings[step] = round(time.monotonic() - t_step, 2)
            state = self.journal.advance(name, S.READY, reason="provision: every step done")
            self.journal.set_target(name, None)
            self._set(name, state=state, step="ready", status="ready", result="ready", finished=time.monotonic())
        except StepFailed as e:
            self._failed(name, str(e))
        except FleetError as e:
            self._failed(name, f"{self.progress[name].step}: {e}")
        except Exception as e:  # noqa: BLE001 - a bug on one server must not stop the others
            self._failed(name, f"{self.progress[name].step}: internal error: {e.__class__.__name__}: {e}")
        finally:
            self.ansible.gone(name)
            self.progress[name].cpu_s = time.thread_time() - cpu0

    def _failed(self, name: str, error: str) -> None:
        assert self.journal is not None
        step = error.split(":", 1)[0] if error.split(":", 1)[0] in STEP_NAMES else self.progress[name].step
        self.journal.fail(name, error)
        self._set(name, state=S.FAILED.value, status="failed", result="failed", failed_step=step, error=error,
                  finished=time.monotonic())  # fmt: skip

    def _resume_point(self, ctx: ServerCtx) -> tuple[set[str], dict[str, Any]]:
        """(steps done in the current pass, {interrupted step: what it had noted}); begins a pass when needed."""
        assert self.journal is not None
        st = S(ctx.state)
        p = self.journal.passes([ctx.id])[ctx.id]
        resume = p["begin"] is not None and not self.opt.restart and (st in WORKING or st == S.FAILED)
        if not resume:
            self.journal.begin_pass(ctx.id, {"from_state": ctx.state, "reprovision": self.opt.reprovision})
            return set(), {}
        done = {s for s, v in p["steps"].items() if v["state"] == "succeeded"}
        interrupted = {s: json.loads(v["output"]) if v["output"] else {} for s, v in p["steps"].items() if v["state"] == "running"}
        # A step that failed is retried; so is every step after the first not done.
        first_open = next((i for i, s in enumerate(STEP_NAMES) if s not in done), len(STEP_NAMES))
        done = {s for s in done if STEP_NAMES.index(s) < first_open}
        # When the OS wait is to be resumed, its clock started at the boot.
        self._boot_done_at = getattr(self, "_boot_done_at", {})
        if "boot" in done and p["steps"]["boot"]["finished_at"] is not None:
            self._boot_done_at[ctx.name] = p["steps"]["boot"]["finished_at"].timestamp()
        return done, interrupted

    # --- the steps (each returns its journal output) ------------------------

    async def _step_bmc(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        async with self._bmc(ctx) as bmc:
            facts = await bmc.manager.facts()
            fp = bmc.fingerprint if bmc.fingerprint_first_seen else None
        if fp:
            self.journal.pin(ctx.name, fp)  # type: ignore[union-attr]
        return {"bmc_firmware": facts.firmware_version, "pinned": fp}

    async def _declared(self, site: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The site as declared ({server: ServerSpec}, {model: ModelSpec}), read once per run."""
        from fleetctl.inventory.service import export_inventory

        self._sites = getattr(self, "_sites", {})
        if site not in self._sites:
            self._sites[site] = asyncio.ensure_future(asyncio.to_thread(export_inventory, self.opt.url, {site}))
        inv = await self._sites[site]
        servers = {s.name: s for r in inv.sites[0].racks for s in r.servers}
        return servers, {m.name: m for m in inv.models}

    async def _step_inspect(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        from fleetctl.workflows.inspect import compare, reconcile

        async with self._bmc(ctx) as bmc:
            facts = await bmc.inventory.facts()
        servers, models = await self._declared(ctx.site)
        spec = servers[ctx.name]
        r, ed = compare(spec, models.get(spec.model), facts)
        needs_edit = ed["boards"] is not None or ed["macs"] or (self.opt.accept_drift and (ed["serial"] or ed["accept_macs"]))
        if needs_edit and (not r.drift or self.opt.accept_drift):
            # Filling what was left open (MACs, boards) or accepting drift edits the site: the rare path.
            r = (await asyncio.to_thread(reconcile, {ctx.name: facts}, accept=self.opt.accept_drift, url=self.opt.url))[0]
        if r.drift and not self.opt.accept_drift:
            raise StepFailed("drift from the inventory: " + "; ".join(r.drift)[:800] + " (give --accept-drift to take the BMC's view)")
        return {"drift": r.drift, "filled": r.filled, "accepted": r.accepted, "boards": r.boards_found}

    async def _step_firmware(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        from fleetctl.workflows.firmware import operation, plan_for

        async with self._bmc(ctx) as bmc:
            # An update started by a process that died goes on in the BMC: wait for it, never flash twice.
            deadline = time.monotonic() + self.opt.firmware_timeout_s
            waited = False
            while running := await bmc.firmware.running_updates():
                waited = True
                if time.monotonic() > deadline:
                    raise Timeout(f"an update still runs on the BMC ({running[0].task_uri})")
                self._set(ctx.name, status=f"waiting for a running update ({running[0].percent or 0}%)")
                await asyncio.sleep(self.opt.poll_s)
            inv = await bmc.firmware.inventory()
            todo = plan_for(inv, ctx.baseline, template=ctx.prov["firmware_template"], base=ctx.prov["firmware_images"] or "", only=None)
            if not todo:
                return {"updates": [], "waited_for_running_update": waited}
            if not ctx.prov["firmware_images"]:
                raise StepFailed(f"{', '.join(f'{u.id} {u.before} -> {u.baseline}' for u in todo)} needed, "
                                 f"and site {ctx.site} has no provisioning.firmware_images URL")  # fmt: skip
            self.journal.note(sid, {"updating": [{"id": u.id, "from": u.before, "to": u.baseline} for u in todo]})  # type: ignore[union-attr]
            self._set(ctx.name, status=f"flashing {', '.join(u.id for u in todo)}")
            op = operation({ctx.name: ctx.baseline}, template=ctx.prov["firmware_template"], base=ctx.prov["firmware_images"],
                           only=None, dry_run=False, timeout=self.opt.firmware_timeout_s)  # fmt: skip
            updates = await op(bmc)
        return {"updates": [{"id": u.id, "from": u.before, "to": u.after} for u in updates], "waited_for_running_update": waited}

    async def _step_bios(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        if not ctx.bios:
            return {"profile": None}
        async with self._bmc(ctx) as bmc:
            diff = await bmc.bios.verify(ctx.bios)
            if not diff:
                return {"staged": {}, "at_profile": True}
            pending = await bmc.bios.pending()
            want = {k: w for k, (w, _) in diff.items()}
            if all(pending.get(k) == v for k, v in want.items()):
                return {"staged": want, "already_pending": True}
            await bmc.bios.stage(want)
        return {"staged": want}

    async def _vlans(self, ctx: ServerCtx, provisioning: bool) -> Any:
        from fleetctl.interfaces.switch import PortConfig, PortMode

        if not ctx.ports:
            return {"ports": [], "note": "no data port of this server is cabled in the plan"}
        vlan = ctx.prov.get("vlan")
        if provisioning and not vlan:
            raise StepFailed(f"site {ctx.site} has no provisioning.vlan")
        jobs = []
        for w in ctx.ports:
            wanted = PortConfig(mode=PortMode.ACCESS, access_vlan=int(vlan), admin_up=True) if provisioning else w.config()
            jobs.append((w, self.switches.change(w.switch, w.port, wanted, force=ctx.in_service)))
        t0 = time.monotonic()
        results = await asyncio.gather(*(j for _, j in jobs), return_exceptions=True)
        own = max((self.switches.work_s.get((w.switch, w.port), 0.0) for w in ctx.ports), default=0.0)
        self.progress[ctx.name].waited += max(0.0, time.monotonic() - t0 - own)
        out, bad = [], []
        for (w, _), res in zip(jobs, results, strict=True):
            if isinstance(res, BaseException):
                bad.append(str(res))
                continue
            diff = {k: [str(a), str(b)] for k, (a, b) in res.diff.items()}
            out.append({"switch": w.switch, "port": w.port, "diff": diff, "ok": res.ok})
            if not res.ok:
                why = "rolled back" if res.rolled_back else ("session dropped" if res.session_dropped else "not verified")
                bad.append(f"{w.switch} {w.port}: {why}{': ' + res.message if res.message else ''}")
        if bad:
            raise StepFailed("; ".join(bad))
        return {"ports": out}

    async def _step_vlan_provisioning(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        return await self._vlans(ctx, True)

    async def _step_vlan_production(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        return await self._vlans(ctx, False)

    async def _step_boot(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        from fleetctl.interfaces.bmc import BootDevice, PowerState

        boot = ctx.prov["boot"]
        device = BootDevice.PXE if boot == "pxe" else BootDevice.CD
        async with self._bmc(ctx) as bmc:
            if noted and noted.get("power_action"):
                # Interrupted after the power request was decided: did the boot happen?
                state = await bmc.power.state()
                if state in (PowerState.POWERING_ON, PowerState.POWERING_OFF):
                    state = await bmc.power.wait_for(PowerState.ON, timeout=600, interval=self.opt.poll_s)
                override = await bmc.boot.get()
                if state == PowerState.ON and override.device != device:
                    return {**noted, "resumed": "the one-time boot was consumed: the install boot happened"}
            if boot == "vmedia":
                image = ctx.prov["image"]
                slots = await bmc.media.slots()
                cd = next((s for s in slots if s.inserted and s.image == image), None)
                if cd is None:
                    for s in slots:
                        if s.inserted:
                            await bmc.media.eject(slot=s.slot)
                    await bmc.media.insert(image, media_type="CD")
            await bmc.boot.set(device, persistent=False)
            state = await bmc.power.state()
            drawing = state != PowerState.OFF
            self._set(ctx.name, status="waiting for the rack's power slot")
            t0 = time.monotonic()
            draw = await self.power.admit(ctx.rack, ctx.peak_w, already_drawing=drawing)
            self.progress[ctx.name].waited += time.monotonic() - t0
            action = "cycle" if state == PowerState.ON else "on"
            self.journal.note(sid, {"power_action": action, "boot": boot, "rack_draw_w": draw})  # type: ignore[union-attr]
            self._set(ctx.name, status=f"power {action} ({boot})")
            if action == "cycle":
                await bmc.power.cycle()
            else:
                if state in (PowerState.POWERING_ON, PowerState.POWERING_OFF):
                    await bmc.power.wait_for(PowerState.OFF if state == PowerState.POWERING_OFF else PowerState.ON, timeout=600,
                                             interval=self.opt.poll_s)  # fmt: skip
                await bmc.power.on()
            await bmc.power.wait_for(PowerState.ON, timeout=600, interval=self.opt.poll_s)
        self._boot_done_at = getattr(self, "_boot_done_at", {})
        self._boot_done_at[ctx.name] = time.time()
        return {"power_action": action, "boot": boot, "rack_draw_w": draw}

    async def _step_os(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        ep = host_endpoint(ctx)
        started = getattr(self, "_boot_done_at", {}).get(ctx.name, time.time())
        deadline = started + float(ctx.prov["install_timeout"])
        why = None
        self._set(ctx.name, status="installing")
        while True:
            why = await ssh_ready(ep)
            if why is None:
                break
            if time.time() > deadline:
                raise Timeout(f"the installed OS did not answer within {ctx.prov['install_timeout']} s of the boot ({why})")
            await asyncio.sleep(self.opt.poll_s)
        took = round(time.time() - started, 1)
        out: dict[str, Any] = {"ssh": f"{ep['user']}@{ep['host']}:{ep['port']}", "up_after_s": took}
        async with self._bmc(ctx) as bmc:
            if ctx.bios:
                diff = await bmc.bios.verify(ctx.bios)
                if diff:
                    raise StepFailed("BIOS settings not applied by the boot: " + ", ".join(f"{k}={h!r} (want {w!r})" for k, (w, h) in diff.items()))
                out["bios"] = "at profile"
            if ctx.prov["boot"] == "vmedia":
                for s in await bmc.media.slots():
                    if s.inserted and s.image == ctx.prov["image"]:
                        await bmc.media.eject(slot=s.slot)
                out["media"] = "ejected"
        return out

    async def _step_ansible(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        self._set(ctx.name, status="waiting for the batch")
        self._ansible_steps[ctx.name] = sid
        t0 = time.monotonic()
        outcome = await self.ansible.submit(ctx.name)
        self.progress[ctx.name].waited += max(0.0, self.ansible.started.get(ctx.name, t0) - t0)
        if outcome is None:
            raise StepFailed("the ansible run gave no result for this host")
        if not outcome.ok:
            raise StepFailed(outcome.error or "failed")
        return {"changed": outcome.changed, "ok": outcome.tasks_ok, "events": outcome.events[-60:]}

    def _run_ansible(self, names: list[str]) -> Any:
        """Blocking: one ansible-runner run over a batch (runs in a worker thread)."""
        from fleetctl.config import data_dir
        from fleetctl.secrets import resolve_token
        from fleetctl.workflows.ansible_run import run_batch

        hosts, groups = {}, {}
        k8s = None
        for n in names:
            c = self.ctx[n]
            hosts[n] = ansible_hostvars(c, host_endpoint(c))
            for g in c.groups:
                groups.setdefault(g, []).append(n)
            k8s = k8s or c.prov.get("k8s")
        extravars: dict[str, Any] = {"fleetctl_k8s_join": bool(k8s)}
        token = None
        if k8s:
            token = resolve_token(k8s["token"]) if k8s.get("token") else None
            extravars.update(fleetctl_k8s_api_endpoint=k8s.get("endpoint"), fleetctl_k8s_ca_cert_hash=k8s.get("ca_cert_hash"))
        for n in names:
            self._set(n, status=f"ansible ({len(names)} hosts)")
        batch = len(self.ansible.batches)
        private = data_dir() / "runs" / f"provision-{self.journal.job_id}-{batch}"  # type: ignore[union-attr]

        seen: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        flushed: dict[str, float] = {}

        def on_event(host: str, ev: dict[str, Any]) -> None:
            if host not in self.progress:
                return
            self.progress[host].status = f"ansible: {ev.get('task')}" + (f" {ev['status']}" if ev["status"] != "started" else "")
            self.on_change()
            if ev["status"] == "started":
                return
            # The events stream into the host's journal row (at most every 2 s, and at once on a
            # failure), so a crash in the middle of a long run still leaves what was done.
            seen[host].append(ev)
            now = time.monotonic()
            sid = self._ansible_steps.get(host)
            if sid is not None and (ev["status"] in ("failed", "unreachable") or now - flushed.get(host, 0.0) >= 2.0):
                flushed[host] = now
                self.journal.note(sid, {"batch": batch, "events": seen[host][-60:]})  # type: ignore[union-attr]

        # Reading the child's events costs this thread a little; counted apart, as Ansible's.
        cpu0 = time.thread_time()
        results: dict[str, Any] = {}
        try:
            todo = list(names)
            for attempt in range(3):
                out = run_batch({n: hosts[n] for n in todo}, {g: [n for n in m if n in todo] for g, m in groups.items()},
                                private_dir=private / f"attempt-{attempt}" if attempt else private, extravars=extravars,
                                token=token, forks=self.opt.ansible_forks, on_event=on_event)  # fmt: skip
                results.update(out)
                # Hosts Ansible stopped short of their last play because others failed: once more, without those.
                todo = [n for n in todo if out[n].incomplete]
                if not todo:
                    break
            return results
        finally:
            self.ansible_thread_cpu += time.thread_time() - cpu0

    async def _step_accel(self, ctx: ServerCtx, sid: int, noted: Any) -> Any:
        from fleetctl.workflows.accel import check

        if not ctx.board_kind:
            return {"boards": 0, "note": "the model holds no accelerator boards"}
        async with self._bmc(ctx) as bmc:
            facts = await bmc.inventory.facts()
            firmware = await bmc.firmware.inventory()
        res = check(facts, firmware, kind=ctx.board_kind, count=ctx.board_count, baseline=ctx.baseline, server=ctx.name)
        if res.problems:
            raise StepFailed("; ".join(res.problems))
        return {"boards": res.found, "expected": res.expected}

    # --- dry run ---------------------------------------------------------

    async def _plan_server(self, name: str) -> None:
        """Read-only: what provisioning would do to this server."""
        from fleetctl.interfaces.bmc import PowerState
        from fleetctl.workflows.ansible_run import plays_for
        from fleetctl.workflows.firmware import plan_for

        ctx = self.ctx[name]
        plan: dict[str, Any] = {}
        self._set(name, started=time.monotonic(), status="reading")
        try:
            async with self._bmc(ctx) as bmc:
                inv = await bmc.firmware.inventory()
                plan["firmware"] = [f"{u.id} {u.before} -> {u.baseline}" for u in
                                    plan_for(inv, ctx.baseline, template="{id}", base="", only=None)]  # fmt: skip
                plan["bios"] = {k: f"{h!r} -> {w!r}" for k, (w, h) in (await bmc.bios.verify(ctx.bios)).items()} if ctx.bios else {}
                state = await bmc.power.state()
            vlan = ctx.prov.get("vlan")
            plan["vlans"] = [f"{w.switch} {w.port}: access {vlan} during the install, then {w.mode} {','.join(map(str, w.vlans))}" for w in ctx.ports]
            plan["boot"] = f"one-time {ctx.prov['boot']}" + (f" ({ctx.prov['image']})" if ctx.prov["boot"] == "vmedia" else "")
            plan["power"] = "cycle" if state == PowerState.ON else ("on" if state == PowerState.OFF else f"{state} (wait, then on)")
            plan["playbooks"] = plays_for(ctx.groups, k8s=bool(ctx.prov.get("k8s")))
            plan["accel_check"] = f"{ctx.board_count} {ctx.board_kind}" if ctx.board_kind else "none"
            problems = []
            if not vlan and ctx.ports:
                problems.append(f"site {ctx.site} has no provisioning.vlan")
            if plan["firmware"] and not ctx.prov["firmware_images"]:
                problems.append(f"site {ctx.site} has no provisioning.firmware_images URL")
            if problems:
                plan["problems"] = problems
            self._set(name, plan=plan, result="planned", status="planned", finished=time.monotonic(),
                      error="; ".join(problems) or None)  # fmt: skip
        except FleetError as e:
            self._set(name, plan=plan, result="failed", status="failed", error=f"plan: {e}", finished=time.monotonic())


def _is_stale(why: str, alive: Callable[[str], bool | None]) -> bool:
    """A lock whose owner was a process on this host that is gone."""
    owner = why.removeprefix("locked by ").split(" since ", 1)[0]
    return why.startswith("locked by ") and alive(owner) is False


def provision(names: list[str], *, options: Options, label: str, on_change: Callable[[], None] | None = None) -> tuple[list[Progress], dict[str, Any]]:
    """Provision the servers; per-server results and the run's figures."""
    p = Provisioner(names, options=options, label=label, on_change=on_change)
    p.on_change = on_change or (lambda: None)
    results = p.run()
    return results, p.stats


def worst_exit(results: list[Progress]) -> int:
    return 0 if all(r.result in ("ready", "skipped", "planned") and not (r.result == "planned" and r.error) for r in results) else 1


