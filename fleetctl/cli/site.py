"""`fleetctl site`: list, show, add, set, remove."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, ReasonOpt, free_text
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(output: OutputOpt = Format.table) -> None:
    """List sites."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import list_sites

    with conn() as c:
        emit(list_sites(c), output, columns=["name", "racks", "servers", "description"])


@app.command("show")
def show(name: str, output: OutputOpt = Format.table) -> None:
    """Show a site, its provisioning settings (defaults filled in) and its racks."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit, emit_one
    from fleetctl.errors import NotFound
    from fleetctl.inventory.queries import list_racks, list_sites, site_provisioning

    with conn() as c:
        site = next((s for s in list_sites(c) if s["name"] == name), None)
        if site is None:
            raise NotFound(f"no site named {name!r}")
        site["provisioning"] = site_provisioning(c, name)
        site["racks"] = list_racks(c, site=name)
    if output != Format.table:
        emit_one(site, output)
        return
    prov = site.pop("provisioning")
    emit_one(site if prov else {**site, "provisioning": "none"}, output)
    if prov:
        k8s = prov.pop("k8s") or {}
        rows = [{"setting": k, "value": v} for k, v in prov.items()]
        rows += [{"setting": f"k8s.{k}", "value": v} for k, v in k8s.items()]
        emit(rows, output, title="Provisioning", columns=["setting", "value"])
    columns = ["name", "row", "position", "height", "used_u", "servers", "switches", "peak_w", "power_budget"]
    emit(site["racks"], output, title="Racks", columns=columns)


@app.command("add")
def add(
    name: str,
    description: Annotated[str | None, typer.Option(help="Free text.", callback=free_text)] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Add a site."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory.service import edit_site

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        doc.sites[0].description = description

    show_plan(edit_site(name, mutate, action="site.add", dry_run=dry_run, reason=reason, create=True), dry_run=dry_run)


@app.command("set")
def set_(
    name: str,
    description: Annotated[str | None, typer.Option(help="Free text.", callback=free_text)] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Change a site's description."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory.service import edit_site

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        if description is not None:
            doc.sites[0].description = description

    show_plan(edit_site(name, mutate, action="site.set", dry_run=dry_run, reason=reason), dry_run=dry_run)


@app.command("remove")
def remove(name: str, dry_run: DryRunOpt = False, reason: ReasonOpt = None) -> None:
    """Remove an empty site."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory.service import remove_site

    show_plan(remove_site(name, dry_run=dry_run, reason=reason), dry_run=dry_run)
