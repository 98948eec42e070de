"""`fleetctl report --html FILE`: the latest sweep as one self-contained HTML page.

Rack elevations coloured by health (click a device for its findings), a
filter box, what changed since a baseline sweep, firmware compliance and
plots; nothing on the page is fetched from the network. See docs/report.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetctl.cli.common import output_file, when


def command(
    html: Annotated[Path, typer.Option("--html", help="The HTML file to write (replaced atomically).", parser=output_file)],
    since: Annotated[
        str | None,
        typer.Option("--since", help="Baseline and plot window: yesterday, today, a date (2026-11-30) or a duration (12h, 7d, 2w).",
                     callback=when("hdw", ("today", "yesterday"))),
    ] = None,
) -> None:
    """Write the latest sweep's health report to one HTML file that needs no network to open."""
    from fleetctl.cli.common import conn, fleet_label
    from fleetctl.errors import InputError
    from fleetctl.sweep.report import build, parse_since, write_atomic

    start = parse_since(since) if since is not None else None
    target = html.expanduser()
    if not target.parent.is_dir():
        raise InputError(f"{target.parent}: no such directory", field="--html")
    if target.is_dir():
        raise InputError(f"{target}: is a directory", field="--html")
    with conn() as c:
        report = build(c, since=start, fleet=fleet_label())
    write_atomic(target, report.html)
    typer.echo(f"report: {target} ({report.servers} servers, {report.findings} findings)")
