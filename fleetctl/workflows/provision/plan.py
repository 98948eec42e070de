"""The dry run: what provisioning would do to a server, read from its BMC and the inventory; nothing changes."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fleetctl.errors import FleetError
from fleetctl.interfaces.bmc import PowerState
from fleetctl.workflows.ansible_run import plays_for
from fleetctl.workflows.firmware import plan_for
from fleetctl.workflows.provision.model import Result

if TYPE_CHECKING:
    from fleetctl.workflows.provision.engine import Provisioner


async def plan_server(run: Provisioner, name: str) -> None:
    """Read-only: the server's plan (firmware, BIOS, VLANs, boot, power, playbooks, accelerator check, problems)."""
    ctx = run.ctx[name]
    plan: dict[str, Any] = {}
    run.update(name, started=time.monotonic(), status="reading")
    try:
        async with run.bmc(ctx) as bmc:
            inv = await bmc.firmware.inventory()
            base = ctx.prov["firmware_images"] or ""
            updates = plan_for(inv, ctx.baseline, template=ctx.prov["firmware_template"], base=base, only=None)
            plan["firmware"] = [f"{u.id} {u.before} -> {u.baseline}" for u in updates]
            if updates and base:  # the URLs the BMCs would be given, rendered from the site's firmware_template
                plan["firmware_images"] = [u.image for u in updates]
            plan["bios"] = {k: f"{h!r} -> {w!r}" for k, (w, h) in (await bmc.bios.verify(ctx.bios)).items()} if ctx.bios else {}
            state = await bmc.power.state()
        vlan = ctx.prov.get("vlan")
        plan["vlans"] = [f"{w.switch} {w.port}: access {vlan} during the install, then {w.mode} {','.join(map(str, w.vlans))}"
                         for w in ctx.ports]  # fmt: skip
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
        run.update(name, plan=plan, result=Result.PLANNED, status="planned", finished=time.monotonic(), error="; ".join(problems) or None)
    except FleetError as e:
        run.update(name, plan=plan, result=Result.FAILED, status="failed", error=f"plan: {e}", finished=time.monotonic())
