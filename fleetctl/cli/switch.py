"""`fleetctl switch`: list, show, add, set, remove."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, ReasonOpt
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    rack: Annotated[str | None, typer.Option(help="Only this rack.")] = None,
    role: Annotated[str | None, typer.Option(help="leaf, spine or management.")] = None,
    site: Annotated[str | None, typer.Option(help="Only this site.")] = None,
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
    position: Annotated[int, typer.Option(help="Lowest rack unit it occupies.")],
    model: Annotated[str, typer.Option(help="Hardware model name (a switch model).")],
    platform: Annotated[str, typer.Option(help="sonic, eos, nxos or linux.")],
    role: Annotated[str, typer.Option(help="leaf, spine or management.")],
    address: Annotated[str, typer.Option(help="Management address.")],
    credential: Annotated[str | None, typer.Option(help="env:PREFIX, file:PATH or cmd:COMMAND.")] = None,
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
    position: Annotated[int | None, typer.Option(help="Move to this rack unit.")] = None,
    platform: Annotated[str | None, typer.Option(help="sonic, eos, nxos or linux.")] = None,
    role: Annotated[str | None, typer.Option(help="leaf, spine or management.")] = None,
    address: Annotated[str | None, typer.Option(help="Management address.")] = None,
    credential: Annotated[str | None, typer.Option(help="env:PREFIX, file:PATH or cmd:COMMAND.")] = None,
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
