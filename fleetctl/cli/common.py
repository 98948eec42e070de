"""Options and helpers shared by the sub-apps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from fleetctl.cli.output import Format

OutputOpt = Annotated[Format, typer.Option("--output", "-o", help="table, json, yaml or csv.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would change; change nothing.")]
TEXT_MAX = 4096  # as a site file's free text (fleetctl/inventory/schema.py)


def free_text(value: str | None) -> str | None:
    """A typer callback for free text (``--reason``, ``--description``): at most TEXT_MAX characters, no control characters."""
    if value is None:
        return None
    if len(value) > TEXT_MAX:
        raise typer.BadParameter(f"{len(value)} characters; at most {TEXT_MAX}")
    bad = next((ch for ch in value if (ord(ch) < 32 and ch not in "\t\n") or 127 <= ord(ch) < 160), None)
    if bad is not None:
        raise typer.BadParameter(f"control character U+{ord(bad):04X} is not allowed")
    return value


ReasonOpt = Annotated[str | None, typer.Option("--reason", help="Why: recorded in the audit log.", callback=free_text)]


def finite(low: float, *, above: bool = False) -> Callable[[float | None], float | None]:
    """A typer callback for a float option: a finite number >= low (> low with ``above``).

    click's ``min=`` lets nan and inf through (``nan < 1`` is false), and a
    float option reads "nan" and "inf": refused here, where the value enters.
    """

    def check(value: float | None) -> float | None:
        if value is not None and (value != value or value in (float("inf"), float("-inf")) or value < low or (above and value == low)):
            raise typer.BadParameter(f"{value:g} is not a finite number {'>' if above else '>='} {low:g}")
        return value

    return check


def conn():  # type: ignore[no-untyped-def]
    """A read-only connection to the inventory."""
    from fleetctl.store import get_engine

    return get_engine().connect()


def fleet_label() -> str:
    """The selected database as operators name it: a SQLite path, or a URL without its password."""
    from sqlalchemy.engine import make_url

    from fleetctl.config import database_url

    url = make_url(database_url())
    if url.drivername.startswith("sqlite"):
        return url.database or ":memory:"
    return url.render_as_string(hide_password=True)


def announce_fleet(count: int, noun: str, output: Format) -> None:
    """Say which fleet a device command acts on, before it touches anything.

    The first line of a table's output (on stderr for machine formats, whose
    rows carry a ``fleet`` field instead): an operator with a lab running
    beside the real fleet sees at once which one the command goes to.
    """
    from fleetctl.cli import state

    state.fleet = fleet_label()
    typer.echo(f"fleet: {state.fleet} ({count} {noun}{'' if count == 1 else 's'})", err=output != Format.table)


def show_plan(plan: Any, fmt: Format = Format.table, *, dry_run: bool) -> None:
    """Print what a change did (or would do)."""
    import json
    import sys

    from fleetctl.cli.output import console

    if fmt != Format.table:
        payload = {"dry_run": dry_run, "changes": [c.as_dict() for c in plan.changes], "warnings": plan.warnings}
        if fmt == Format.yaml:
            import yaml

            sys.stdout.write(yaml.safe_dump(payload, sort_keys=False))
        else:
            sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
        return
    out = console()
    for w in plan.warnings:
        out.print(f"[yellow]warning:[/] {w}")
    if plan.empty:
        out.print("nothing to change")
        return
    verb = "would" if dry_run else ""
    marks = {"add": "[green]+[/]", "change": "[yellow]~[/]", "remove": "[red]-[/]"}
    shown = 0
    for c in plan.changes:
        if shown >= 200 and not dry_run:
            break
        detail = ""
        if c.fields:
            detail = "  " + ", ".join(f"{k}: {_short(a)} -> {_short(b)}" for k, (a, b) in c.fields.items())
        out.print(f"{marks[c.action]} {c.kind} {c.label}{detail}", markup=True, highlight=False)
        shown += 1
    if shown < len(plan.changes):
        out.print(f"... and {len(plan.changes) - shown} more")
    counts = plan.counts()
    summary = "; ".join(
        f"{kind}: " + ", ".join(f"{n} {a}" for a, n in c.items() if n) for kind, c in counts.items()
    )
    out.print(f"{'dry run, ' + verb + ' apply' if dry_run else 'applied'}: {summary}")


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 60 else s[:57] + "..."


def sigterm_as_ctrl_c(signum: int, frame: Any) -> None:
    """A SIGTERM handler that does what Ctrl-C does.

    Inside ``asyncio.run`` that is the runner's own SIGINT handler: it cancels
    the main task, which unwinds at an await (journal closed, locks released),
    and ``asyncio.run`` then raises KeyboardInterrupt. Elsewhere it is a
    KeyboardInterrupt. Raised straight from this handler inside the loop, the
    interrupt could land in a weakref callback or a ``__del__`` and be
    swallowed ("Exception ignored in ..."), and the command went on after
    `fleetctl jobs cancel` (seen once in the test suite).
    """
    import signal

    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt

