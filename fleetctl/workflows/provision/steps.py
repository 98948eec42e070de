"""The provisioning steps: one table of step objects, sequenced by the engine.

A :class:`Step` is its name, the lifecycle state a server is in while it
runs, what it makes true, how a re-run knows it is done (the check each
``run`` makes before it acts: the check shares the BMC session and the reads
with the action, so it is not a function apart), ``run``: an async function
of a :class:`StepCall` that returns what the step journals (its row's
output), and what that is.
A step that must leave a trace before it acts (the power request) writes it
with :meth:`StepCall.note`; a re-run of a step left ``running`` gets that
back as :attr:`StepCall.noted`. A step raises :class:`StepFailed` when it
finds the server not as it must be; any other :class:`FleetError`, a
timeout or an OS error fails the step as well.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleetctl.config import data_dir
from fleetctl.errors import Timeout
from fleetctl.interfaces.bmc import BootDevice, PowerState
from fleetctl.interfaces.switch import PortConfig, PortMode
from fleetctl.lifecycle.states import ServerState as S
from fleetctl.secrets import resolve_token
from fleetctl.workflows.accel import check
from fleetctl.workflows.ansible_run import run_batch
from fleetctl.workflows.firmware import operation, plan_for
from fleetctl.workflows.inspect import compare, reconcile
from fleetctl.workflows.provision.context import ansible_hostvars, host_endpoint, ssh_ready
from fleetctl.workflows.provision.model import ServerCtx, StepFailed

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from fleetctl.workflows.provision.engine import Provisioner


@dataclass
class StepCall:
    """One run of one step on one server: what the step may use."""

    run: Provisioner
    ctx: ServerCtx
    step_id: int
    noted: dict[str, Any] | None  # what an interrupted earlier run of this step had noted

    def bmc(self) -> AbstractAsyncContextManager[Any]:
        """The server's BMC, opened (with its driver and the run's shared session) and closed on leaving."""
        return self.run.bmc(self.ctx)

    async def note(self, output: Any) -> None:
        """Journal what the step is about to do before it does it."""
        assert self.run.journal is not None
        await self.run.journal.note(self.step_id, output)

    def status(self, text: str) -> None:
        self.run.update(self.ctx.name, status=text)

    def waited(self, seconds: float) -> None:
        """Count time spent waiting on something shared (not the server's own time)."""
        self.run.progress[self.ctx.name].waited += max(0.0, seconds)


StepFn = Callable[[StepCall], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Step:
    name: str
    phase: S  # the server's lifecycle state while the step runs
    goal: str  # what the step makes true
    check: str  # how a re-run knows it is done: what ``run`` checks before it acts
    run: StepFn  # does it; returns what it journals
    journals: str = ""  # what its journal row keeps (the keys of what ``run`` returns; notes written before acting)


# --------------------------------------------------------------------- the steps


async def bmc_login(c: StepCall) -> dict[str, Any]:
    async with c.bmc() as bmc:
        facts = await bmc.manager.facts()
        fp = bmc.fingerprint if bmc.fingerprint_first_seen else None
    if fp:
        assert c.run.journal is not None
        await c.run.journal.pin(c.ctx.name, fp)
    return {"bmc_firmware": facts.firmware_version, "pinned": fp}


async def inspect(c: StepCall) -> dict[str, Any]:
    opt = c.run.opt
    async with c.bmc() as bmc:
        facts = await bmc.inventory.facts()
    servers, models = await c.run.declared(c.ctx.site)
    spec = servers[c.ctx.name]
    r, ed = compare(spec, models.get(spec.model), facts)
    needs_edit = ed["boards"] is not None or ed["macs"] or (opt.accept_drift and (ed["serial"] or ed["accept_macs"]))
    if needs_edit and (not r.drift or opt.accept_drift):
        # Filling what was left open (MACs, boards) or accepting drift edits the site: the rare path.
        r = (await asyncio.to_thread(reconcile, {c.ctx.name: facts}, accept=opt.accept_drift, url=opt.url))[0]
    if r.drift and not opt.accept_drift:
        raise StepFailed("drift from the inventory: " + "; ".join(r.drift)[:800] + " (give --accept-drift to take the BMC's view)")
    return {"drift": r.drift, "filled": r.filled, "accepted": r.accepted, "boards": r.boards_found}


async def firmware(c: StepCall) -> dict[str, Any]:
    ctx, opt = c.ctx, c.run.opt
    async with c.bmc() as bmc:
        # An update started by a process that died goes on in the BMC: wait for it, never flash twice.
        deadline = time.monotonic() + opt.firmware_timeout_s
        waited = False
        while running := await bmc.firmware.running_updates():
            waited = True
            if time.monotonic() > deadline:
                raise Timeout(f"an update still runs on the BMC ({running[0].task_uri})")
            c.status(f"waiting for a running update ({running[0].percent or 0}%)")
            await asyncio.sleep(opt.poll_s)
        inv = await bmc.firmware.inventory()
        todo = plan_for(inv, ctx.baseline, template=ctx.prov["firmware_template"], base=ctx.prov["firmware_images"] or "", only=None)
        if not todo:
            return {"updates": [], "waited_for_running_update": waited}
        if not ctx.prov["firmware_images"]:
            raise StepFailed(f"{', '.join(f'{u.id} {u.before} -> {u.baseline}' for u in todo)} needed, "
                             f"and site {ctx.site} has no provisioning.firmware_images URL")  # fmt: skip
        await c.note({"updating": [{"id": u.id, "from": u.before, "to": u.baseline} for u in todo]})
        c.status(f"flashing {', '.join(u.id for u in todo)}")
        op = operation({ctx.name: ctx.baseline}, template=ctx.prov["firmware_template"], base=ctx.prov["firmware_images"],
                       only=None, dry_run=False, timeout=opt.firmware_timeout_s)  # fmt: skip
        updates = await op(bmc)
    return {"updates": [{"id": u.id, "from": u.before, "to": u.after} for u in updates], "waited_for_running_update": waited}


async def bios(c: StepCall) -> dict[str, Any]:
    if not c.ctx.bios:
        return {"profile": None}
    async with c.bmc() as bmc:
        diff = await bmc.bios.verify(c.ctx.bios)
        if not diff:
            return {"staged": {}, "at_profile": True}
        pending = await bmc.bios.pending()
        want = {k: w for k, (w, _) in diff.items()}
        if all(pending.get(k) == v for k, v in want.items()):
            return {"staged": want, "already_pending": True}
        await bmc.bios.stage(want)
    return {"staged": want}


async def _vlans(c: StepCall, provisioning: bool) -> dict[str, Any]:
    ctx, switches = c.ctx, c.run.switches
    if not ctx.ports:
        return {"ports": [], "note": "no data port of this server is cabled in the plan"}
    vlan: Any = ctx.prov.get("vlan")
    if provisioning and not vlan:
        raise StepFailed(f"site {ctx.site} has no provisioning.vlan")
    jobs = []
    for w in ctx.ports:
        wanted = PortConfig(mode=PortMode.ACCESS, access_vlan=int(vlan), admin_up=True) if provisioning else w.config()
        jobs.append((w, switches.change(w.switch, w.port, wanted, force=ctx.in_service)))
    t0 = time.monotonic()
    results = await asyncio.gather(*(j for _, j in jobs), return_exceptions=True)
    own = max((switches.work_s.get((w.switch, w.port), 0.0) for w in ctx.ports), default=0.0)
    c.waited(time.monotonic() - t0 - own)
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


async def vlan_provisioning(c: StepCall) -> dict[str, Any]:
    return await _vlans(c, True)


async def vlan_production(c: StepCall) -> dict[str, Any]:
    return await _vlans(c, False)


async def boot(c: StepCall) -> dict[str, Any]:
    ctx, opt, noted = c.ctx, c.run.opt, c.noted
    source = ctx.prov["boot"]
    device = BootDevice.PXE if source == "pxe" else BootDevice.CD
    async with c.bmc() as bmc:
        if noted and noted.get("power_action"):
            # Interrupted after the power request was decided: did the boot happen?
            state = await bmc.power.state()
            if state in (PowerState.POWERING_ON, PowerState.POWERING_OFF):
                state = await bmc.power.wait_for(PowerState.ON, timeout=600, interval=opt.poll_s)
            override = await bmc.boot.get()
            if state == PowerState.ON and override.device != device:
                return {**noted, "resumed": "the one-time boot was consumed: the install boot happened"}
        if source == "vmedia":
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
        c.status("waiting for the rack's power slot")
        t0 = time.monotonic()
        draw = await c.run.power.admit(ctx.rack, ctx.name, ctx.peak_w, already_drawing=drawing)
        c.waited(time.monotonic() - t0)
        action = "cycle" if state == PowerState.ON else "on"
        # Written before the request: a re-run after a crash asks the BMC whether the boot happened.
        await c.note({"power_action": action, "boot": source, "rack_draw_w": draw})
        c.status(f"power {action} ({source})")
        if action == "cycle":
            await bmc.power.cycle()
        else:
            if state in (PowerState.POWERING_ON, PowerState.POWERING_OFF):
                await bmc.power.wait_for(PowerState.OFF if state == PowerState.POWERING_OFF else PowerState.ON, timeout=600,
                                         interval=opt.poll_s)  # fmt: skip
            await bmc.power.on()
        await bmc.power.wait_for(PowerState.ON, timeout=600, interval=opt.poll_s)
    c.run.boot_done_at[ctx.name] = time.time()
    return {"power_action": action, "boot": source, "rack_draw_w": draw}


async def os_up(c: StepCall) -> dict[str, Any]:
    ctx, opt = c.ctx, c.run.opt
    ep = host_endpoint(ctx)
    started = c.run.boot_done_at.get(ctx.name, time.time())  # a resumed wait keeps the deadline of the journaled boot
    deadline = started + float(ctx.prov["install_timeout"])
    c.status("installing")
    while True:
        why = await ssh_ready(ep)
        if why is None:
            break
        if time.time() > deadline:
            raise Timeout(f"the installed OS did not answer within {ctx.prov['install_timeout']} s of the boot ({why})")
        await asyncio.sleep(opt.poll_s)
    took = round(time.time() - started, 1)
    out: dict[str, Any] = {"ssh": ep.where, "up_after_s": took}
    async with c.bmc() as bmc:
        if ctx.bios:
            diff = await bmc.bios.verify(ctx.bios)
            if diff:
                raise StepFailed("BIOS settings not applied by the boot: "
                                 + ", ".join(f"{k}={h!r} (want {w!r})" for k, (w, h) in diff.items()))  # fmt: skip
            out["bios"] = "at profile"
        if ctx.prov["boot"] == "vmedia":
            for s in await bmc.media.slots():
                if s.inserted and s.image == ctx.prov["image"]:
                    await bmc.media.eject(slot=s.slot)
            out["media"] = "ejected"
    return out


async def ansible(c: StepCall) -> dict[str, Any]:
    run = c.run
    c.status("waiting for the batch")
    run.ansible_steps[c.ctx.name] = c.step_id
    t0 = time.monotonic()
    outcome = await run.ansible.submit(c.ctx.name)
    c.waited(run.ansible.started.get(c.ctx.name, t0) - t0)
    if outcome is None:
        raise StepFailed("the ansible run gave no result for this host")
    if not outcome.ok:
        raise StepFailed(outcome.error or "failed")
    return {"changed": outcome.changed, "ok": outcome.tasks_ok, "events": outcome.events[-60:]}


def run_ansible_batch(run: Provisioner, names: list[str], stop: threading.Event | None = None) -> Any:
    """Blocking: one ansible-runner run over a batch (runs in a worker thread); {name: HostOutcome}.

    ``stop`` set: the run is stopped (ansible-playbook killed) instead of waited for.
    """
    journal = run.journal
    assert journal is not None
    hosts: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {}
    k8s = None
    for n in names:
        c = run.ctx[n]
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
        run.update(n, status=f"ansible ({len(names)} hosts)")
    batch = len(run.ansible.batches)
    private = data_dir() / "runs" / f"provision-{journal.job_id}-{batch}"

    seen: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    flushed: dict[str, float] = {}

    def on_event(host: str, ev: dict[str, Any]) -> None:
        if host not in run.progress:
            return
        run.progress[host].status = f"ansible: {ev.get('task')}" + (f" {ev['status']}" if ev["status"] != "started" else "")
        run.on_change()
        if ev["status"] == "started":
            return
        # The events stream into the host's journal row (at most every 2 s, and at once on a
        # failure), so a crash in the middle of a long run still leaves what was done.
        seen[host].append(ev)
        now = time.monotonic()
        sid = run.ansible_steps.get(host)
        if sid is not None and (ev["status"] in ("failed", "unreachable") or now - flushed.get(host, 0.0) >= 2.0):
            flushed[host] = now
            journal.note_soon(sid, {"batch": batch, "events": seen[host][-60:]})

    # Reading the child's events costs this thread a little; counted apart, as Ansible's.
    cpu0 = time.thread_time()
    results: dict[str, Any] = {}
    try:
        todo = list(names)
        for attempt in range(3):
            if stop is not None and stop.is_set():  # nobody waits for the batch any more: no further attempt
                break
            out = run_batch({n: hosts[n] for n in todo}, {g: [n for n in m if n in todo] for g, m in groups.items()},
                            private_dir=private / f"attempt-{attempt}" if attempt else private, extravars=extravars,
                            token=token, forks=run.opt.ansible_forks, on_event=on_event, stop=stop)  # fmt: skip
            results.update(out)
            # Hosts Ansible stopped short of their last play because others failed: once more, without those.
            todo = [n for n in todo if out[n].incomplete]
            if not todo:
                break
        return results
    finally:
        run.ansible_thread_cpu += time.thread_time() - cpu0


async def accel(c: StepCall) -> dict[str, Any]:
    ctx = c.ctx
    if not ctx.board_kind:
        return {"boards": 0, "note": "the model holds no accelerator boards"}
    async with c.bmc() as bmc:
        facts = await bmc.inventory.facts()
        fw = await bmc.firmware.inventory()
    res = check(facts, fw, kind=ctx.board_kind, count=ctx.board_count, baseline=ctx.baseline, server=ctx.name)
    if res.problems:
        raise StepFailed("; ".join(res.problems))
    return {"boards": res.found, "expected": res.expected}


# --------------------------------------------------------------------- the table

STEPS: tuple[Step, ...] = (
    Step("bmc", S.PREPARING, "BMC reachable, credentials work, certificate pinned",
         "login works", bmc_login, "bmc_firmware; pinned (the fingerprint pinned on first use)"),
    Step("inspect", S.PREPARING, "the BMC's view matches the inventory (drift stops the server unless accepted)",
         "nothing to compare twice", inspect, "drift, filled, accepted, boards"),
    Step("firmware", S.PREPARING,
         "firmware at the model's baseline (running updates waited for; components at the baseline skipped)",
         "components at the baseline are skipped: never flashed twice", firmware,
         "updates (id, from, to), waited_for_running_update; noted before flashing: updating"),
    Step("bios", S.PREPARING, "BIOS profile staged (applied by the install boot, verified once the OS is up)",
         "attributes already set or already pending are left alone", bios,
         "staged (and at_profile or already_pending), or profile: null"),
    Step("vlan-provisioning", S.PREPARING, "data ports on the site's provisioning VLAN",
         "the switch driver reads the port first; a port already right is not touched", vlan_provisioning,
         "ports (switch, port, diff, ok)"),
    Step("boot", S.INSTALLING,
         "one-time boot from PXE or virtual media, then power on (or cycle if on), within the rack's power budget",
         "the power action is journaled before it is requested; a resumed step asks the BMC whether the one-time "
         "override was consumed (the boot happened) and then powers nothing again", boot,
         "power_action, boot, rack_draw_w (noted before the request), resumed"),
    Step("os", S.INSTALLING, "the installed OS answers over SSH; BIOS settings verified",
         "the clock starts at the journaled boot, so a resumed wait keeps its deadline", os_up,
         "ssh, up_after_s, bios, media"),
    Step("vlan-production", S.INSTALLING, "data ports on the VLANs of the cabling plan",
         "as vlan-provisioning", vlan_production, "ports (switch, port, diff, ok)"),
    Step("ansible", S.CONFIGURING, "playbooks: base OS, accelerator runtime and device check, Kubernetes join",
         "the playbooks are idempotent; a re-run runs them again", ansible,
         "changed, ok, events (the last 60; streamed into the row while the run goes on)"),
    Step("accel", S.VALIDATING,
         "quick accelerator check: boards present, PCIe link at full gen/width, board firmware at the baseline",
         "read-only", accel, "boards, expected"),
)  # fmt: skip
STEP_NAMES: tuple[str, ...] = tuple(s.name for s in STEPS)
