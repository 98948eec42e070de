"""Shared by the commands that act on many BMCs: resolve, run, summarise.

Every such command works its servers in parallel, shows progress on a
terminal, ends with a per-server summary, and exits with the worst outcome
(0 all well, 1 some failed or found problems).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import typer

from fleetctl.cli.output import Format


def resolve(targets: list[str], output: Format = Format.table) -> list[Any]:
    """The servers the TARGETs name, after saying which fleet they belong to."""
    from fleetctl.cli.common import announce_fleet, conn
    from fleetctl.targets import resolve as resolve_targets

    with conn() as c:
        servers = resolve_targets(c, targets)
    announce_fleet(len(servers), "server", output)
    return servers


def refuse_in_service(servers: list[Any], allow: bool) -> None:
    from fleetctl.errors import InputError

    busy = [s.name for s in servers if s.state == "in-service"]
    if busy and not allow:
        more = f" and {len(busy) - 3} more" if len(busy) > 3 else ""
        raise InputError(f"{', '.join(busy[:3])}{more} in service; give --allow-in-service to act on them anyway")


def run_with_progress(
    servers: list[Any],
    operation: Callable[[Any], Awaitable[Any]],
    *,
    kind: str,
    targets: list[str],
    args: dict[str, Any] | None = None,
    output: Format = Format.table,
) -> list[Any]:
    """Run the operation over the servers' BMCs, with a progress bar on a terminal."""
    from fleetctl.workflows.bmc import run

    label = " ".join(targets)
    if not (sys.stderr.isatty() and output == Format.table and len(servers) > 1):
        return run(servers, operation, kind=kind, target_label=label, args=args)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fleetctl.cli.output import console

    bar = Progress(TextColumn(kind), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[last]}"), console=console(stderr=True), transient=True)  # fmt: skip
    with bar:
        task = bar.add_task(kind, total=len(servers), last="")

        def progress(done: int, total: int, name: str, ok: bool) -> None:
            bar.update(task, completed=done, total=total, last=f"{name} {'ok' if ok else 'FAILED'}")

        return run(servers, operation, kind=kind, target_label=label, args=args, progress=progress)


def execute(
    servers: list[Any],
    operation: Callable[[Any], Awaitable[Any]],
    *,
    kind: str,
    targets: list[str],
    args: dict[str, Any] | None = None,
    describe: Callable[[Any], dict[str, Any]] | None = None,
    output: Format = Format.table,
    columns: list[str] | None = None,
    title: str | None = None,
) -> list[Any]:
    """Run the operation over the servers' BMCs, print one row per server, exit 1 if any failed."""
    outcomes = run_with_progress(servers, operation, kind=kind, targets=targets, args=args, output=output)
    summarise(outcomes, describe=describe, output=output, columns=columns, title=title)
    return outcomes


def summarise(
    outcomes: list[Any],
    *,
    describe: Callable[[Any], dict[str, Any]] | None = None,
    extra: dict[str, dict[str, Any]] | None = None,
    output: Format = Format.table,
    columns: list[str] | None = None,
    title: str | None = None,
) -> None:
    """One row per server (``extra``: more columns of some servers, as what became of their Kubernetes node), the closing
    line, exit 1 if any failed."""
    from fleetctl.cli.output import emit

    rows = []
    for o in outcomes:
        row = {"server": o.server, "ok": o.ok}
        if o.ok and describe is not None:
            row.update(describe(o.value))
        row.update((extra or {}).get(o.server, {}))
        row["error"] = o.error
        row["elapsed"] = round(o.elapsed, 2)
        rows.append(row)
    cols = columns or list(dict.fromkeys(k for r in rows for k in r))
    emit(rows, output, columns=cols, title=title, styles={"ok": lambda v: "green" if v else "bold red"})
    tally(outcomes, output)
    if any(not o.ok for o in outcomes):
        raise typer.Exit(1)


def tally(outcomes: list[Any], output: Format, *, problems: int = 0, what: str = "with problems") -> None:
    """The closing line: how many answered, failed, and had problems (drift, health)."""
    if output != Format.table:
        return
    from fleetctl.cli.output import console

    failed = sum(1 for o in outcomes if not o.ok)
    line = f"{len(outcomes) - failed} ok, {failed} failed"
    if problems:
        line += f", {problems} {what}"
    console(stderr=True).print(line + (" (see the error column)" if failed else ""))
