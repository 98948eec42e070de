"""`fleetctl server`: list, show, add, set, remove."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, ReasonOpt, finite, free_text, non_empty, whole
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


def _state_style(value: object) -> str | None:
    from fleetctl.lifecycle.states import STATE_STYLE

    return STATE_STYLE.get(str(value))


@app.command("list")
def list_(
    rack: Annotated[str | None, typer.Option(help="Only this rack (rack-12 or site/rack-12).", callback=non_empty)] = None,
    site: Annotated[str | None, typer.Option(help="Only this site.", callback=non_empty)] = None,
    state: Annotated[str | None, typer.Option(help="Only servers in this lifecycle state.", callback=non_empty)] = None,
    model: Annotated[str | None, typer.Option(help="Only this hardware model.", callback=non_empty)] = None,
    tag: Annotated[str | None, typer.Option(help="Only servers with this tag.", callback=non_empty)] = None,
    output: OutputOpt = Format.table,
) -> None:
    """List servers."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import list_servers

    with conn() as c:
        rows = list_servers(c, rack=rack, site=site, state=state, model=model, tag=tag)
    emit(
        rows,
        output,
        columns=["name", "serial", "site", "rack", "position", "model", "state", "boards", "bmc_url", "tags"],
        styles={"state": _state_style},
    )


@app.command("show")
def show(name: str, output: OutputOpt = Format.table) -> None:
    """Show one server: where it is, its BMC, NICs and cables, boards."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit, emit_one
    from fleetctl.inventory.queries import server_detail

    with conn() as c:
        detail = server_detail(c, name)
    emit_one(detail, output)
    if output == Format.table:
        emit(detail["nics"], output, title="NICs", columns=["name", "mac", "switch", "port", "vlans", "mode"])
        emit(detail["boards"], output, title="Boards", columns=["slot", "kind", "serial", "pci", "model", "state"])


@app.command("add")
def add(
    name: str,
    rack: Annotated[str, typer.Option(help="The rack (rack-12 or site/rack-12).")],
    position: Annotated[int, typer.Option(help="Lowest rack unit it occupies.", parser=whole(1))],
    model: Annotated[
        str | None, typer.Option(help="Hardware model name; without it (and --bmc), `server inspect` fills it from the BMC.")
    ] = None,
    serial: Annotated[str | None, typer.Option(help="Chassis serial number; without it, `server inspect` reads it from the BMC.")] = None,
    bmc: Annotated[str | None, typer.Option(help="BMC URL (https://...).")] = None,
    credential: Annotated[str | None, typer.Option(help="env:PREFIX, file:/ABS/PATH or cmd:NAME (see docs/security.md).")] = None,
    system_id: Annotated[str | None, typer.Option(help="Redfish system id where the BMC serves several.")] = None,
    nic: Annotated[list[str] | None, typer.Option(help="NAME or NAME=MAC (repeatable).")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="A tag (repeatable).")] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Add a server to a rack.

    Given only its BMC (--bmc and --credential), the server is enrolled with
    the model `unidentified` and the serial UNKNOWN-NAME; `fleetctl server
    inspect NAME` then reads both from the BMC and fills them in.
    """
    from fleetctl.cli.common import show_plan
    from fleetctl.errors import InputError
    from fleetctl.inventory import edits
    from fleetctl.inventory.schema import ServerSpec
    from fleetctl.inventory.service import edit_site

    if (model is None or serial is None) and not (bmc and credential):
        missing = " and ".join(f"--{o}" for o, v in (("model", model), ("serial", serial)) if v is None)
        raise InputError(f"give {missing}, or --bmc and --credential so that `server inspect` can read it from the BMC",
                         field="--model" if model is None else "--serial")  # fmt: skip
    site_name, rack_name = edits.site_of_rack(rack)

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        if model is None:
            edits.ensure_unidentified_model(doc)
        spec = ServerSpec.model_validate(
            {
                "name": name, "serial": serial if serial is not None else edits.placeholder_serial(name),
                "model": model if model is not None else edits.UNIDENTIFIED_MODEL, "position": position, "bmc": bmc,
                "credential": credential, "system_id": system_id,
                "nics": [edits.parse_nic(n) for n in nic or []], "tags": tag or [],
            }  # fmt: skip
        )
        edits.find_rack(doc, rack_name).servers.append(spec)

    plan = edit_site(site_name, mutate, action="server.add", dry_run=dry_run, reason=reason)
    show_plan(plan, dry_run=dry_run)
    if (model is None or serial is None) and not dry_run:
        typer.echo(f"next: fleetctl server inspect {name} --dry-run   # reads the model and serial from its BMC", err=True)


@app.command("set")
def set_(
    name: str,
    rack: Annotated[str | None, typer.Option(help="Move to this rack (same site).")] = None,
    position: Annotated[int | None, typer.Option(help="Move to this rack unit.", parser=whole(1))] = None,
    model: Annotated[str | None, typer.Option(help="Hardware model name.")] = None,
    serial: Annotated[str | None, typer.Option(help="Chassis serial number.")] = None,
    bmc: Annotated[str | None, typer.Option(help="BMC URL.")] = None,
    credential: Annotated[str | None, typer.Option(help="env:PREFIX, file:/ABS/PATH or cmd:NAME (see docs/security.md).")] = None,
    system_id: Annotated[str | None, typer.Option(help="Redfish system id.")] = None,
    nic: Annotated[list[str] | None, typer.Option(help="Add or update NAME=MAC (repeatable).")] = None,
    add_tag: Annotated[list[str] | None, typer.Option("--add-tag", help="Add a tag (repeatable).")] = None,
    remove_tag: Annotated[list[str] | None, typer.Option("--remove-tag", help="Remove a tag (repeatable).")] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Change a server's declared fields."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory import edits
    from fleetctl.inventory.schema import NicSpec
    from fleetctl.inventory.service import edit_site

    site_name = edits.site_of_server(name)

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        current_rack, spec = edits.find_server(doc, name)
        if rack is not None:
            target = edits.find_rack(doc, rack.rpartition("/")[2])
            if target is not current_rack:
                current_rack.servers.remove(spec)
                target.servers.append(spec)
        for field, value in (("position", position), ("model", model), ("serial", serial), ("bmc", bmc),
                             ("credential", credential), ("system_id", system_id)):  # fmt: skip
            if value is not None:
                setattr(spec, field, value)
        for text in nic or []:
            n = edits.parse_nic(text)
            spec.nics = [x for x in spec.nics if x.name != n["name"]] + [NicSpec.model_construct(**n)]
        tags = (set(spec.tags) | set(add_tag or [])) - set(remove_tag or [])
        spec.tags = sorted(tags)

    plan = edit_site(site_name, mutate, action="server.set", dry_run=dry_run, reason=reason)
    show_plan(plan, dry_run=dry_run)


@app.command("remove")
def remove(
    name: str,
    force: Annotated[bool, typer.Option("--force", help="Remove even a server that is in service.")] = False,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Remove a server, its boards and its cables from the inventory."""
    from fleetctl.cli.common import show_plan
    from fleetctl.errors import InputError
    from fleetctl.inventory import edits
    from fleetctl.inventory.service import edit_site

    site_name = edits.site_of_server(name)

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        rack, spec = edits.find_server(doc, name)
        if spec.state == "in-service" and not force:
            raise InputError(f"{name} is in service; give --force to remove it anyway", field="--force")
        rack.servers.remove(spec)
        edits.drop_cables_of(doc, server=name)

    plan = edit_site(site_name, mutate, action="server.remove", dry_run=dry_run, reason=reason)
    show_plan(plan, dry_run=dry_run)


@app.command("inspect")
def inspect(
    targets: Annotated[list[str], typer.Argument(help="Servers, racks, sites, selectors (state=, tag=, model=) or all.")],
    accept: Annotated[bool, typer.Option("--accept", help="Take the BMC's view where it disagrees with the inventory.")] = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Read each server's facts from its BMC into the inventory; report drift.

    Boards found fill a server that declares none; MACs fill declared NICs
    that have none; a server enrolled by its BMC alone gets its serial and its
    model (a declared model matching the BMC's manufacturer and model, or a new
    one). Where the BMC disagrees with what was declared, the drift is reported
    (exit code 1) and the inventory keeps its data, unless --accept. With
    --dry-run the BMCs are read and the plan shown; nothing is written.
    """
    from fleetctl.cli.bmcrun import resolve, run_with_progress, tally
    from fleetctl.cli.output import emit
    from fleetctl.workflows.inspect import reconcile

    servers = resolve(targets, output)

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.inventory.facts()

    outcomes = run_with_progress(servers, op, kind="inspect", targets=targets, args={"accept": accept, "dry_run": dry_run}, output=output)
    found = {r.server: r for r in reconcile({o.server: o.value for o in outcomes if o.ok}, accept=accept, dry_run=dry_run)}
    rows = []
    for o in outcomes:
        r = found.get(o.server)
        f = o.value if o.ok else None
        rows.append({
            "server": o.server, "ok": o.ok,
            "serial": f.serial if f else None, "power": str(f.power_state or "") if f else None,
            "boards": (f"{r.boards_found}/{r.boards_expected}" if r.boards_expected is not None else str(r.boards_found)) if r else None,
            "model": r.model if r else None, "new_model": r.new_model if r else None,
            "drift": r.drift if r else [], "filled": r.filled if r else [], "accepted": r.accepted if r else [],
            "error": o.error,
        } | ({"facts": f.model_dump(mode="json")} if f and output != Format.table else {}))  # fmt: skip
    if output == Format.table:
        emit([{**r, "drift": "; ".join(r["drift"]) or ("" if not r["ok"] else "none"), "filled": ", ".join(r["filled"]),
               "accepted": ", ".join(r["accepted"])} for r in rows], output,
             columns=["server", "ok", "serial", "power", "boards", "drift", "filled", "accepted", "error"],
             styles={"ok": lambda v: "green" if v else "bold red", "drift": lambda v: None if v in ("none", "") else "yellow"})  # fmt: skip
        tally(outcomes, output, problems=sum(1 for r in rows if r["drift"]), what="with drift")
        if dry_run and any(r["filled"] or r["accepted"] for r in rows):
            typer.echo("dry run: the BMCs were read, nothing was written (filled/accepted: what inspection would do)")
    else:
        emit(rows, output)
    if any(not o.ok for o in outcomes) or any(r["drift"] and not accept for r in rows):
        raise typer.Exit(1)


@app.command("health")
def health(
    targets: Annotated[list[str], typer.Argument(help="Servers, racks, sites, selectors (state=, tag=, model=) or all.")],
    logs: Annotated[bool, typer.Option("--logs", help="Also read BMC log entries newer than the last health check.")] = False,
    max_skew: Annotated[float, typer.Option(help="Flag a BMC clock off by more than this many seconds.", callback=finite(0))] = 30.0,
    output: OutputOpt = Format.table,
) -> None:
    """Read system and chassis health, PSUs, fans, temperatures, the BMC's firmware and clock.

    Exit code 1 when any server has a problem or could not be read.
    """
    import contextlib
    import json as _json

    from sqlalchemy import select

    from fleetctl.cli.bmcrun import resolve, run_with_progress, tally
    from fleetctl.cli.output import emit
    from fleetctl.store import get_engine
    from fleetctl.store import tables as T

    servers = resolve(targets, output)
    # The log cursor of each server: the newest entry seen by its last health run.
    cursors: dict[str, str | None] = {}
    if logs:
        with get_engine().connect() as c:
            q = (
                select(T.server.c.name, T.job_step.c.output)
                .join(T.job_step, T.job_step.c.server_id == T.server.c.id)
                .where(T.job_step.c.name == "health", T.job_step.c.state == "succeeded")
                .order_by(T.job_step.c.id)
            )
            for r in c.execute(q):
                with contextlib.suppress(ValueError):  # an output that is not JSON has no cursor
                    cursors[r.name] = _json.loads(r.output or "{}").get("log_cursor") or cursors.get(r.name)

    async def op(bmc):  # type: ignore[no-untyped-def]
        report = await bmc.health.report()
        manager = await bmc.manager.facts()
        out = {"report": report.model_dump(mode="json"), "problems": report.problems,
               "bmc_firmware": manager.firmware_version, "clock_skew_s": manager.clock_skew_seconds}  # fmt: skip
        if manager.clock_skew_seconds is not None and abs(manager.clock_skew_seconds) > max_skew:
            out["problems"] = [*out["problems"], f"BMC clock off by {manager.clock_skew_seconds:+.0f} s"]
        if logs:
            entries, cursor = await bmc.health.log_entries(since=cursors.get(bmc.target.name))
            out["log_cursor"] = cursor
            out["new_log_entries"] = [e.model_dump(mode="json") for e in entries]
        return out

    outcomes = run_with_progress(servers, op, kind="health", targets=targets, args={"logs": logs}, output=output)
    rows = []
    for o in outcomes:
        v = o.value or {}
        rows.append({
            "server": o.server, "ok": o.ok and not v.get("problems"),
            "problems": v.get("problems", []), "bmc_firmware": v.get("bmc_firmware"),
            "clock_skew_s": round(v["clock_skew_s"], 1) if v.get("clock_skew_s") is not None else None,
            "new_log_entries": len(v.get("new_log_entries", [])) if logs else None,
            "error": o.error,
        } | ({"report": v.get("report"), "log_entries": v.get("new_log_entries")} if output != Format.table else {}))  # fmt: skip
    if output == Format.table:
        emit([{**r, "problems": "; ".join(r["problems"]) or ("none" if r["error"] is None else "")} for r in rows], output,
             columns=["server", "ok", "problems", "bmc_firmware", "clock_skew_s"] + (["new_log_entries"] if logs else []) + ["error"],
             styles={"ok": lambda v: "green" if v else "bold red"})  # fmt: skip
        tally(outcomes, output, problems=sum(1 for r in rows if r["problems"]), what="with health problems")
    else:
        emit(rows, output)
    if any(not r["ok"] for r in rows):
        raise typer.Exit(1)


@app.command("set-state")
def set_state(
    name: str,
    state: Annotated[str, typer.Argument(help="The lifecycle state to move to.")],
    reason: Annotated[str, typer.Option("--reason", help="Why: recorded in the audit log (required).", callback=free_text)],
    force: Annotated[bool, typer.Option("--force", help="Allow a move the transition table does not list.")] = False,
) -> None:
    """Move a server along its lifecycle by hand, with a reason."""
    from fleetctl.inventory.service import actor
    from fleetctl.lifecycle.machine import move
    from fleetctl.store import write_transaction

    with write_transaction() as conn:
        old = move(conn, name, state, actor=actor(), reason=reason, force=force)
    typer.echo(f"{name}: {old} -> {state}")


@app.command("unlock")
def unlock(
    name: str,
    force: Annotated[bool, typer.Option("--force", help="Break the lock even if its owner may still run.")] = False,
) -> None:
    """Recover a server's lock left by a worker that died."""
    from fleetctl.lifecycle.locks import break_lock
    from fleetctl.store import get_engine

    old = break_lock(get_engine(), name, force=force)
    typer.echo(f"{name}: lock of {old} broken" if old else f"{name} was not locked")
