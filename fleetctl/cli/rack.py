"""`fleetctl rack`: list, show (the elevation), add, set, remove."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, ReasonOpt, non_empty, whole
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    site: Annotated[str | None, typer.Option(help="Only this site.", callback=non_empty)] = None,
    output: OutputOpt = Format.table,
) -> None:
    """List racks with their occupancy and peak power."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import list_racks

    with conn() as c:
        rows = list_racks(c, site=site)
    emit(rows, output, columns=["site", "name", "row", "position", "height", "used_u", "servers", "switches", "peak_w", "power_budget"])


@app.command("show")
def show(name: Annotated[str, typer.Argument(help="rack-12 or site/rack-12")], output: OutputOpt = Format.table) -> None:
    """Draw a rack's elevation, unit by unit, devices coloured by state."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit_one
    from fleetctl.inventory.queries import rack_elevation

    with conn() as c:
        rack = rack_elevation(c, name)
    if output != Format.table:
        emit_one(rack, output)
        return
    _draw(rack)


def _draw(rack: dict[str, Any]) -> None:
    from rich.markup import escape

    from fleetctl.cli.output import console
    from fleetctl.lifecycle.states import STATE_STYLE

    by_unit: dict[int, dict[str, Any]] = {}
    for d in rack["devices"]:
        for u in range(d["position"], d["position"] + d["height"]):
            by_unit[u] = d
    out = console()
    budget = f", budget {rack['power_budget']} W" if rack["power_budget"] else ""
    out.print(f"[bold]{rack['site']}/{rack['name']}[/]  row {rack['row'] or '-'} position {rack['position'] or '-'}, "
              f"{rack['height']}U, peak {rack['peak_w']} W{budget}")  # fmt: skip
    width = 44
    out.print("     +" + "-" * width + "+")
    for u in range(rack["height"], 0, -1):
        d = by_unit.get(u)
        if d is None:
            out.print(f" U{u:<2} |{' ' * width}|")
            continue
        top = d["position"] + d["height"] - 1
        style = "blue" if d["kind"] == "switch" else STATE_STYLE.get(d["state"], "white")
        if u == top:
            label = f" {d['name']} ({d['state']})"
        elif u == top - 1 and d["height"] > 1:
            label = f"   {d['model']}" + (f", {d['boards']}" if d["boards"] else "")
        else:
            label = "   :"
        label = label[:width].ljust(width)
        out.print(f" U{u:<2} |[{style} reverse]{escape(label)}[/]|")
    out.print("     +" + "-" * width + "+")
    legend = "  ".join(f"[{s} reverse] {n} [/]" for n, s in STATE_STYLE.items()) + "  [blue reverse] switch [/]"
    out.print(legend)


@app.command("add")
def add(
    name: str,
    site: Annotated[str, typer.Option(help="The site it stands in.")],
    height: Annotated[int, typer.Option(help="Height in rack units.", parser=whole(1, 60))] = 42,
    row: Annotated[str | None, typer.Option(help="Row in the hall.")] = None,
    position: Annotated[int | None, typer.Option(help="Position in the row.", parser=whole(0))] = None,
    power_budget: Annotated[int | None, typer.Option(help="Power budget in watts.", parser=whole(0))] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Add a rack to a site."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory.edits import the_site
    from fleetctl.inventory.schema import RackSpec
    from fleetctl.inventory.service import edit_site

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        the_site(doc).racks.append(
            RackSpec.model_validate({"name": name, "height": height, "row": row, "position": position, "power_budget": power_budget})
        )

    show_plan(edit_site(site, mutate, action="rack.add", dry_run=dry_run, reason=reason), dry_run=dry_run)


@app.command("set")
def set_(
    name: Annotated[str, typer.Argument(help="rack-12 or site/rack-12")],
    height: Annotated[int | None, typer.Option(help="Height in rack units.", parser=whole(1, 60))] = None,
    row: Annotated[str | None, typer.Option(help="Row in the hall.")] = None,
    position: Annotated[int | None, typer.Option(help="Position in the row.", parser=whole(0))] = None,
    power_budget: Annotated[int | None, typer.Option(help="Power budget in watts.", parser=whole(0))] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Change a rack's fields."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory import edits
    from fleetctl.inventory.service import edit_site

    site_name, rack_name = edits.site_of_rack(name)

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        rack = edits.find_rack(doc, rack_name)
        for field, value in (("height", height), ("row", row), ("position", position), ("power_budget", power_budget)):
            if value is not None:
                setattr(rack, field, value)

    show_plan(edit_site(site_name, mutate, action="rack.set", dry_run=dry_run, reason=reason), dry_run=dry_run)


@app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(help="rack-12 or site/rack-12")],
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Remove an empty rack."""
    from fleetctl.cli.common import show_plan
    from fleetctl.errors import InputError
    from fleetctl.inventory import edits
    from fleetctl.inventory.service import edit_site

    site_name, rack_name = edits.site_of_rack(name)

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        rack = edits.find_rack(doc, rack_name)
        if rack.servers or rack.switches:
            raise InputError(
                f"rack {rack_name} still holds {len(rack.servers)} servers and {len(rack.switches)} switches; remove them first"
            )
        edits.the_site(doc).racks.remove(rack)

    show_plan(edit_site(site_name, mutate, action="rack.remove", dry_run=dry_run, reason=reason), dry_run=dry_run)
