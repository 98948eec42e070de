"""`fleetctl events`: the audit log."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import OutputOpt, non_empty, whole
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option(help="How many, newest first.", parser=whole(1))] = 50,
    name: Annotated[
        str | None, typer.Option("--name", help="Only events about objects whose name contains this.", callback=non_empty)
    ] = None,
    output: OutputOpt = Format.table,
) -> None:
    """Who changed what, when and why."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import list_events

    with conn() as c:
        rows = list_events(c, limit=limit, name=name)
    emit(rows, output, columns=["at", "actor", "action", "object", "reason"])
