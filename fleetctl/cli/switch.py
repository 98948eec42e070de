"""`fleetctl switch`: list, show, add, set, remove."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, ReasonOpt, finite, non_empty, seconds, whole
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    rack: Annotated[str | None, typer.Option(help="Only this rack.", callback=non_empty)] = None,
    role: Annotated[str | None, typer.Option(help="leaf, spine or management.", callback=non_empty)] = None,
    site: Annotated[str | None, typer.Option(help="Only this site.", callback=non_empty)] = None,
    output: OutputOpt = Format.table,
) -> None:
    """List switches."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import list_switches

    with conn() as c:
        rows = list_switches(c, rack=rack, role=role, site=site)
    emit(rows, output, columns=["name", "role", "platform", "model", "address", "site", "rack", "position", "cabled_ports"])


@app.command("show")
def show(name: str, output: OutputOpt = Format.table) -> None:
    """Show a switch and the planned cabling of its ports."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit, emit_one
    from fleetctl.inventory.queries import switch_detail

    with conn() as c:
        detail = switch_detail(c, name)
    emit_one(detail, output)
    if output == Format.table:
        emit([p for p in detail["ports"] if p["cabled_to"]], output, title="Cabled ports", columns=["port", "cabled_to", "mode", "vlans"])


@app.command("add")
def add(
    name: str,
    rack: Annotated[str, typer.Option(help="The rack (rack-12 or site/rack-12).")],
    position: Annotated[int, typer.Option(help="Lowest rack unit it occupies.", parser=whole(1))],
    model: Annotated[str, typer.Option(help="Hardware model name (a switch model).")],
    platform: Annotated[str, typer.Option(help="sonic, eos, nxos or linux.")],
    role: Annotated[str, typer.Option(help="leaf, spine or management.")],
    address: Annotated[str, typer.Option(help="Management address.")],
    credential: Annotated[str | None, typer.Option(help="env:PREFIX, file:/ABS/PATH or cmd:NAME (see docs/security.md).")] = None,
    serial: Annotated[str | None, typer.Option(help="Serial number.")] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Add a switch to a rack."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory import edits
    from fleetctl.inventory.schema import SwitchSpec
    from fleetctl.inventory.service import edit_site

    site_name, rack_name = edits.site_of_rack(rack)

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        spec = SwitchSpec.model_validate(
            {"name": name, "model": model, "platform": platform, "role": role, "address": address,
             "position": position, "credential": credential, "serial": serial}  # fmt: skip
        )
        edits.find_rack(doc, rack_name).switches.append(spec)

    show_plan(edit_site(site_name, mutate, action="switch.add", dry_run=dry_run, reason=reason), dry_run=dry_run)


@app.command("set")
def set_(
    name: str,
    position: Annotated[int | None, typer.Option(help="Move to this rack unit.", parser=whole(1))] = None,
    platform: Annotated[str | None, typer.Option(help="sonic, eos, nxos or linux.")] = None,
    role: Annotated[str | None, typer.Option(help="leaf, spine or management.")] = None,
    address: Annotated[str | None, typer.Option(help="Management address.")] = None,
    credential: Annotated[str | None, typer.Option(help="env:PREFIX, file:/ABS/PATH or cmd:NAME (see docs/security.md).")] = None,
    serial: Annotated[str | None, typer.Option(help="Serial number.")] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Change a switch's declared fields."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory import edits
    from fleetctl.inventory.service import edit_site

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        _, spec = edits.find_switch(doc, name)
        for field, value in (("position", position), ("platform", platform), ("role", role), ("address", address),
                             ("credential", credential), ("serial", serial)):  # fmt: skip
            if value is not None:
                setattr(spec, field, value)

    show_plan(edit_site(edits.site_of_switch(name), mutate, action="switch.set", dry_run=dry_run, reason=reason), dry_run=dry_run)


@app.command("remove")
def remove(name: str, dry_run: DryRunOpt = False, reason: ReasonOpt = None) -> None:
    """Remove a switch and the cables planned on it."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory import edits
    from fleetctl.inventory.service import edit_site

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        rack, spec = edits.find_switch(doc, name)
        rack.switches.remove(spec)
        edits.drop_cables_of(doc, switch=name)

    show_plan(edit_site(edits.site_of_switch(name), mutate, action="switch.remove", dry_run=dry_run, reason=reason), dry_run=dry_run)


# --- live work on switches (SSH and SNMP) -------------------------------------------

SwitchTargetsArg = Annotated[list[str], typer.Argument(help="Switches, racks, sites, role=leaf, platform=eos, or all.")]


def _resolve_switches(targets: list[str], output: Format = Format.table) -> list:
    """The switches the TARGETs name, after saying which fleet they belong to."""
    from fleetctl.cli.common import announce_fleet, conn
    from fleetctl.targets import resolve_switches

    with conn() as c:
        switches = resolve_switches(c, targets)
    announce_fleet(len(switches), "switch", output)
    return switches


def _finish(outcomes: list, output: Format, problems: int = 0, what: str = "with problems") -> None:
    from fleetctl.cli.bmcrun import tally

    tally(outcomes, output, problems=problems, what=what)
    if problems or any(not o.ok for o in outcomes):
        raise typer.Exit(1)


@app.command("facts")
def facts(targets: SwitchTargetsArg, output: OutputOpt = Format.table) -> None:
    """Read platform, OS version, serial and uptime from each switch (SSH)."""
    from fleetctl.cli.output import emit
    from fleetctl.workflows.switch import run

    switches = _resolve_switches(targets, output)
    outcomes = run(switches, lambda sw: sw.get_facts(), kind="switch.facts", target_label=" ".join(targets))
    rows = [
        {"switch": o.server, "ok": o.ok, **(o.value.model_dump(exclude={"warnings"}) if o.ok else {}), "error": o.error}
        for o in outcomes
    ]
    emit(rows, output, columns=["switch", "ok", "platform", "os_version", "model", "serial", "uptime_s", "error"])
    _finish(outcomes, output)


@app.command("ports")
def ports(switch: str, output: OutputOpt = Format.table) -> None:
    """A switch's ports as the switch reports them, beside what the plan wants (exit 1 on a difference)."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.errors import FleetError
    from fleetctl.inventory.queries import switch_detail
    from fleetctl.workflows.switch import run

    switches = _resolve_switches([switch], output)
    with conn() as c:
        planned = {p["port"]: p for p in switch_detail(c, switch)["ports"]}
    [outcome] = run(switches, lambda sw: sw.get_interfaces(), kind="switch.ports", target_label=switch)
    if not outcome.ok:
        raise FleetError(outcome.error or f"{switch}: no answer")
    rows, differ = [], 0
    for i in outcome.value:
        plan = planned.get(i.name, {})
        want_vlans = plan.get("vlans")
        have = str(i.access_vlan) if i.mode == "access" else i.trunk_vlan_ranges if i.mode == "trunk" else ""
        match = None
        if plan.get("cabled_to") and want_vlans is not None:
            from fleetctl.interfaces.switch import vlan_list_str

            want = want_vlans if plan.get("mode") == "access" else vlan_list_str(int(v) for v in want_vlans.split(","))
            match = i.mode == plan.get("mode") and have == want
            differ += 0 if match else 1
        rows.append({
            "port": i.name, "admin": "up" if i.admin_up else "down", "oper": "up" if i.oper_up else "down",
            "speed_mbps": i.speed_mbps, "mode": str(i.mode), "vlans": have, "description": i.description,
            "cabled_to": plan.get("cabled_to"), "plan": f"{plan.get('mode')} {want_vlans}" if plan.get("cabled_to") else None,
            "matches_plan": match,
        })  # fmt: skip
    emit(rows, output, columns=["port", "admin", "oper", "speed_mbps", "mode", "vlans", "cabled_to", "plan", "matches_plan", "description"],
         styles={"matches_plan": lambda v: None if v is None else ("green" if v else "yellow")})  # fmt: skip
    _finish([outcome], output, problems=differ, what="ports differ from the plan")


vlan_app = typer.Typer(no_args_is_help=True)
app.add_typer(vlan_app, name="vlan", help="Set one port's VLANs, carefully.")


@vlan_app.command("set")
def vlan_set(
    switch: str,
    port: str,
    access: Annotated[int | None, typer.Option("--access", help="Make it an access port on this VLAN.", parser=whole(1, 4094))] = None,
    trunk: Annotated[str | None, typer.Option("--trunk", help="Make it a trunk carrying these VLANs (100,200-210).")] = None,
    description: Annotated[str | None, typer.Option(help="Port description.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Also touch an uplink or a port of a server in service.")] = False,
    save: Annotated[bool, typer.Option("--save", help="Save the switch configuration after a verified change.")] = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Change one port: read, show the diff, apply, read back, verify; restore it if verification fails."""
    from fleetctl.errors import InputError
    from fleetctl.interfaces.switch import PortConfig, PortMode

    if (access is None) == (trunk is None):
        raise InputError("give exactly one of --access VLAN or --trunk LIST", field="--access")
    wanted = PortConfig(mode=PortMode.ACCESS, access_vlan=access, description=description) if access is not None else \
        PortConfig(mode=PortMode.TRUNK, trunk_vlans=trunk, description=description)  # fmt: skip
    _change_ports(_resolve_switches([switch], output), {switch: [(port, wanted, "by hand")]}, label=f"{switch} {port}",
                  kind="switch.vlan", force=force, save=save, dry_run=dry_run, output=output)  # fmt: skip


@app.command("apply-plan")
def apply_plan(
    targets: Annotated[list[str], typer.Argument(help="Racks, servers, selectors (state=, tag=) or all: their server ports.")],
    force: Annotated[bool, typer.Option("--force", help="Also touch ports of servers in service.")] = False,
    save: Annotated[bool, typer.Option("--save", help="Save each switch's configuration after verified changes.")] = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Put every switch port of the target servers on the VLANs the cabling plan gives."""
    from fleetctl.cli.bmcrun import resolve
    from fleetctl.cli.common import conn
    from fleetctl.workflows.network import port_plan

    servers = resolve(targets, output)
    with conn() as c:
        plan = port_plan(c, servers={s.name for s in servers})
    if not plan:
        typer.echo("the plan cables no switch port to these servers")
        return
    switches = _resolve_switches(sorted(plan), output)
    work = {sw: [(p.port, p.config(), p.who) for p in wants] for sw, wants in plan.items()}
    _change_ports(switches, work, label=" ".join(targets), kind="switch.apply-plan", force=force, save=save, dry_run=dry_run, output=output)


def _change_ports(switches: list, work: dict, *, label: str, kind: str, force: bool, save: bool, dry_run: bool,
                  output: Format) -> None:  # fmt: skip
    """Carry out port changes switch by switch (switches in parallel); one row per port."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.errors import FleetError
    from fleetctl.workflows.network import protected_ports
    from fleetctl.workflows.switch import run

    with conn() as c:
        protected = protected_ports(c)

    def operation(sw):  # type: ignore[no-untyped-def]
        results = []
        for port, wanted, who in work.get(sw.name, []):
            try:
                ch = sw.apply_port_change(port, wanted, dry_run=dry_run, protected=protected.get(sw.name, set()), force=force)
                results.append({"port": port, "who": who, "change": ch})
            except FleetError as e:  # one refused port does not stop the others
                results.append({"port": port, "who": who, "error": str(e).replace("use force", "give --force")})
        if save and not dry_run and any("change" in r and r["change"].applied and r["change"].verified for r in results):
            sw.save_config()
        return results

    def judge(results: list) -> str | None:
        """The journal marks a switch failed when any of its ports was refused or not verified."""
        bad = [r["port"] for r in results if "error" in r or not r["change"].ok]
        return f"ports not changed: {', '.join(bad)}" if bad else None

    outcomes = run(switches, operation, kind=kind, target_label=label, args={"dry_run": dry_run, "force": force}, judge=judge)
    rows, bad, refused = [], 0, 0
    for o in outcomes:
        if not o.ok:
            rows.append({"switch": o.server, "port": None, "for": None, "diff": None, "result": "error", "message": o.error})
            bad += 1
            continue
        for r in o.value:
            ch = r.get("change")
            if ch is None:
                rows.append(
                    {"switch": o.server, "port": r["port"], "for": r["who"], "diff": None, "result": "refused", "message": r["error"]}
                )
                refused += 1
                continue
            diff = ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in ch.diff.items()) or "(no change)"
            if dry_run:
                result = "would change" if ch.diff else "ok"
            elif not ch.diff:
                result = "ok"
            elif ch.ok:
                result = "changed"
            else:
                result = "rolled back" if ch.rolled_back else ("session dropped" if ch.session_dropped else "not verified")
                bad += 1
            rows.append(
                {"switch": o.server, "port": r["port"], "for": r["who"], "diff": diff, "result": result, "message": ch.message or None}
            )
    emit(rows, output, columns=["switch", "port", "for", "diff", "result", "message"],
         styles={"result": lambda v: {"changed": "green", "ok": "green", "would change": "yellow"}.get(v, "bold red")})  # fmt: skip
    from fleetctl.cli.bmcrun import tally

    tally(outcomes, output, problems=bad + refused, what=f"ports not changed ({refused} refused)" if refused else "ports not changed")
    if bad or any(not o.ok for o in outcomes):
        raise typer.Exit(1)
    if refused:
        # Only refusals (a protected port without --force, a VLAN the switch
        # lacks): the request was wrong, nothing failed.
        raise typer.Exit(2)


@app.command("verify-cabling")
def verify_cabling(
    targets: SwitchTargetsArg,
    snmp: Annotated[bool, typer.Option("--snmp", help="Read LLDP neighbours over SNMP (LLDP-MIB) instead of the CLI.")] = False,
    output: OutputOpt = Format.table,
) -> None:
    """Compare LLDP neighbours with the cabling plan: miscabled, missing, unexpected (exit 1 if any)."""
    from types import SimpleNamespace

    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.workflows.network import compare_lldp, expected_neighbours

    switches = _resolve_switches(targets, output)
    with conn() as c:
        expected = expected_neighbours(c, {s.name for s in switches})
    if snmp:
        results = _poll(switches, what=("lldp",))
        neighbours = {
            r.target: [SimpleNamespace(local_port=n.local_port, remote_system=n.remote_sysname, remote_port=n.remote_port_id)
                       for n in r.lldp] for r in results if r.ok}  # fmt: skip
        from fleetctl.workflows.bmc import Outcome

        outcomes = [Outcome(r.target, r.ok, None, r.error) for r in results]
    else:
        from fleetctl.workflows.switch import run

        outcomes = run(switches, lambda sw: sw.get_lldp_neighbors(), kind="switch.lldp", target_label=" ".join(targets))
        neighbours = {o.server: o.value for o in outcomes if o.ok}
    rows, problems = [], 0
    for o in outcomes:
        if not o.ok:
            rows.append({"switch": o.server, "port": None, "finding": "error", "expected": None, "found": None, "message": o.error})
            continue
        rep = compare_lldp(o.server, expected.get(o.server, {}), neighbours[o.server])
        problems += rep.problems
        for kind, items in (("miscabled", rep.miscabled), ("missing", rep.missing), ("unexpected", rep.unexpected)):
            for it in items:
                rows.append({
                    "switch": o.server, "port": it["port"], "finding": kind,
                    "expected": it.get("expected"), "found": it.get("found"), "message": None,
                })
        if output != Format.table:
            rows += [{"switch": o.server, "port": p, "finding": "ok", "expected": None, "found": None, "message": None} for p in rep.ok]
        elif not rep.problems:
            rows.append(
                {"switch": o.server, "port": f"{len(rep.ok)} ports", "finding": "ok", "expected": None, "found": None, "message": None}
            )
    emit(rows, output, columns=["switch", "port", "finding", "expected", "found", "message"],
         styles={"finding": lambda v: "green" if v == "ok" else "bold red" if v == "error" else "yellow"})  # fmt: skip
    _finish(outcomes, output, problems=problems, what="cabling findings")


def _poll(switches: list, what: tuple[str, ...], pollers: dict | None = None) -> list:
    """Poll the switches over SNMP, each with its poller (``SnmpTarget.driver``); one result each, in order.

    ``pollers``, when given, is filled with {switch: poller class} (for its ``rates``).
    """
    from fleetctl.errors import FleetError
    from fleetctl.plugins import drivers_for, sweep
    from fleetctl.targets import snmp_targets

    targets, unreachable = snmp_targets(switches)
    if pollers is not None:
        pollers.update({t.name: cls for cls, ts in drivers_for("snmp", targets).items() for t in ts})
    results = {r.target: r for r in sweep("snmp", targets, what=what)}
    if unreachable and not results:
        first = next(iter(unreachable.items()))
        raise FleetError(f"{first[0]}: {first[1]}")
    from types import SimpleNamespace

    out = []
    for s in switches:
        if s.name in results:
            out.append(results[s.name])
        else:
            out.append(SimpleNamespace(target=s.name, ok=False, error=unreachable.get(s.name, "not polled"), lldp=[], interfaces=[]))
    return out


@app.command("poll")
def poll(
    targets: SwitchTargetsArg,
    interval: Annotated[
        float, typer.Option(help="Seconds between two polls for rates (0: one poll, counters only).", callback=seconds(0, 86400))
    ] = 5.0,
    max_temp: Annotated[
        float, typer.Option(help="Flag a temperature sensor above this many degrees C.", callback=finite(0, above=True))
    ] = 85.0,
    output: OutputOpt = Format.table,
) -> None:
    """Poll switches over SNMP: port status against the plan, errors, traffic rates, reboots."""
    import time

    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.workflows.network import expected_neighbours

    switches = _resolve_switches(targets, output)
    with conn() as c:
        cabled = {sw: set(ports) for sw, ports in expected_neighbours(c, {s.name for s in switches}).items()}
    pollers: dict = {}
    first = _poll(switches, what=("if", "sensors"), pollers=pollers)
    second = None
    if interval > 0:
        time.sleep(interval)
        second = {r.target: r for r in _poll(switches, what=("if", "sensors"))}
    rows, problems = [], 0
    for r in first:
        cur = second.get(r.target, r) if second else r
        if not cur.ok:
            rows.append({"switch": r.target, "ok": False, "error": cur.error})
            problems += 1
            continue
        # Rates between a switch's two polls come from the poller that polled it.
        rates = pollers[r.target].rates(r, cur) if second and r.ok else None
        want_up = cabled.get(r.target, set())
        by_name = {i.name: i for i in cur.interfaces}
        down = sorted(p for p in want_up if p in by_name and not by_name[p].oper_up)
        unknown = sorted(p for p in want_up if p not in by_name)
        errs = []
        if rates and rates.interfaces:
            errs = [f"{i.name} {i.in_errors_ps:.1f}/s" for i in rates.interfaces if i.in_errors_ps]
        hot = [f"{s.name} {s.oper_status}" for s in cur.sensors if str(s.oper_status) not in ("ok", "unknown")]
        # An agent may still call a hot ASIC "ok": the reading decides too.
        hot += [f"{s.name} {s.value:.0f} C" for s in cur.sensors
                if s.type == "celsius" and s.value is not None and s.value > max_temp
                and str(s.oper_status) in ("ok", "unknown")]  # fmt: skip
        rebooted = bool(rates and rates.rebooted)
        problem = bool(down or unknown or errs or hot or rebooted)
        problems += problem
        top = sorted((i for i in (rates.interfaces if rates else [])), key=lambda i: -(i.in_bps or 0))[:3]
        rows.append({
            "switch": r.target, "ok": not problem, "uptime_s": (cur.sys_uptime_ticks or 0) // 100,
            "ports_up": sum(1 for i in cur.interfaces if i.oper_up), "ports": len(cur.interfaces),
            "planned_down": down + [f"{p} (absent)" for p in unknown], "errors": errs, "sensors": hot, "rebooted": rebooted,
            "busiest": [f"{i.name} {((i.in_bps or 0) / 1e6):.1f} Mb/s" for i in top],
            "error": None,
        })  # fmt: skip
    if output == Format.table:
        emit([{**x, **{k: ", ".join(x[k]) for k in ("planned_down", "errors", "sensors", "busiest") if k in x}} for x in rows], output,
             columns=["switch", "ok", "uptime_s", "ports_up", "ports", "planned_down", "errors", "sensors", "rebooted", "busiest", "error"],
             styles={"ok": lambda v: "green" if v else "bold red"})  # fmt: skip
    else:
        emit(rows, output)
    if problems:
        raise typer.Exit(1)
