"""`fleetctl inventory`: site files in and out, and the Ansible inventory."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, ReasonOpt, a_path
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


class PlanFormat(StrEnum):
    """A plan is a list of changes with their fields: no csv (click refuses it with exit 2)."""

    table = "table"
    json = "json"
    yaml = "yaml"


@app.command("import")
def import_(
    path: Annotated[str, typer.Argument(help="A site file, or a folder of them.")],
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
    output: Annotated[PlanFormat, typer.Option("--output", "-o", help="table, json or yaml.")] = PlanFormat.table,
) -> None:
    """Import site files, all or nothing; importing the same files again changes nothing."""
    from fleetctl.cli.common import show_plan
    from fleetctl.errors import InputError
    from fleetctl.inventory.service import import_path

    # Read as text: an empty PATH would become "." as a Path, importing every YAML file below the working folder.
    if not path.strip():
        raise InputError("PATH is empty: give a site file or a folder of them", field="PATH")
    plan = import_path(Path(path), dry_run=dry_run, reason=reason)
    show_plan(plan, Format(output.value), dry_run=dry_run)


class ExportFormat(StrEnum):
    yaml = "yaml"
    json = "json"


@app.command("export")
def export(
    output: Annotated[ExportFormat, typer.Option("--output", "-o", help="yaml or json.")] = ExportFormat.yaml,
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Write models.yaml and one file per site here instead of stdout.", parser=a_path)
    ] = None,
    site: Annotated[list[str] | None, typer.Option("--site", help="Only these sites (repeatable).")] = None,
) -> None:
    """Write the inventory as site files."""
    from fleetctl.inventory.render import dump_json, dump_yaml, to_document, write_folder
    from fleetctl.inventory.service import export_inventory

    inv = export_inventory(site_names=set(site) if site else None)
    if directory:
        for p in write_folder(inv, directory, output.value):
            typer.echo(str(p), err=True)
        return
    data = to_document(inv)
    sys.stdout.write(dump_yaml(data) if output == ExportFormat.yaml else dump_json(data))


@app.command("ansible")
def ansible(
    list_: Annotated[bool, typer.Option("--list", help="The whole inventory (Ansible's dynamic-inventory protocol).")] = False,
    host: Annotated[str | None, typer.Option("--host", help="One host's variables.")] = None,
) -> None:
    """The fleet as an Ansible dynamic inventory (used by inventory/fleetctl.py)."""
    import json

    from fleetctl.inventory.ansible import ansible_inventory, host_vars

    if host:
        sys.stdout.write(json.dumps(host_vars(host), indent=2, sort_keys=True) + "\n")
        return
    if not list_:
        raise typer.BadParameter("give --list or --host NAME")
    sys.stdout.write(json.dumps(ansible_inventory(), indent=2, sort_keys=True) + "\n")


@app.command("check")
def check(path: Annotated[Path, typer.Argument(help="A site file, or a folder of them.", parser=a_path)]) -> None:
    """Validate site files against the schema and the inventory; change nothing."""
    from fleetctl.inventory.service import import_path

    plan = import_path(path, dry_run=True)
    for w in plan.warnings:
        typer.echo(f"warning: {w}")
    typer.echo(f"ok: {len(plan.changes)} change(s) would be applied")
