"""`fleetctl finding`: acknowledge known problems (like an Alertmanager silence)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer

from fleetctl.cli.common import OutputOpt, free_text, id_text, when
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)
FindingArg = Annotated[str, typer.Argument(metavar="FINDING", help="A finding id (sweep show), or TARGET:CHECK[:SUBJECT].",
                                             callback=id_text)]


def parse_until(text: str) -> dt.datetime:
    """``2026-12-24``, ``2026-12-24T08:00``, or a duration ``7d``, ``12h``, ``30m`` from now."""
    from fleetctl.errors import InputError
    from fleetctl.times import duration, span

    t = text.strip()
    if d := duration(t):
        return dt.datetime.now(dt.UTC) + span(*d)
    try:
        v = dt.datetime.fromisoformat(t)
    except ValueError:
        raise InputError(f"--until {text!r}: give a date (2026-12-24), a time (2026-12-24T08:00) or a duration (7d, 12h)",
                         field="--until") from None  # fmt: skip
    return v.astimezone(dt.UTC) if v.tzinfo else v.astimezone().astimezone(dt.UTC)


@app.command("ack")
def ack(
    finding: FindingArg,
    reason: Annotated[str, typer.Option("--reason", help="Why it is known and acceptable for now (required).", callback=free_text)],
    until: Annotated[
        str | None, typer.Option("--until", help="Until a date (2026-12-24) or for a duration (7d); default: until it changes.",
                                  callback=when("mhdw", times=True))
    ] = None,
    output: OutputOpt = Format.table,
) -> None:
    """Silence a known problem until it expires, changes status, or clears; it still shows, marked.

    When the ack expires and the problem persists, the next sweep reports it as new again (its exit code, the
    new-findings metric), as an Alertmanager silence that expires notifies again.
    """
    from fleetctl.cli.output import emit_one
    from fleetctl.inventory.service import actor
    from fleetctl.store import get_engine, immediate
    from fleetctl.sweep import history

    when = parse_until(until) if until else None
    with immediate(get_engine()) as c:
        a = history.ack(c, finding, reason=reason, until=when, actor=actor())
    if output == Format.table:
        subject = f" {a['subject']}" if a["subject"] else ""
        typer.echo(f"acknowledged {a['target']} {a['check']}{subject} ({a['status']}) "
                   f"{'until ' + a['until'] if a['until'] else 'until it changes or clears'}: {reason} [ack {a['id']}]")  # fmt: skip
    else:
        emit_one(a, output)


@app.command("unack")
def unack(finding: FindingArg) -> None:
    """End the acknowledgement of a problem: the next sweep reports it as new again (and sets the exit code)."""
    from fleetctl.store import get_engine, immediate
    from fleetctl.sweep import history

    with immediate(get_engine()) as c:
        n = history.unack(c, finding)
    typer.echo(f"{finding}: {'acknowledgement ended' if n else 'was not acknowledged'}")


@app.command("acks")
def acks(
    all_: Annotated[bool, typer.Option("--all", help="Also acknowledgements that ended (expired, changed, resolved).")] = False,
    output: OutputOpt = Format.table,
) -> None:
    """The acknowledgements in force (or all of them)."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.sweep import history

    with conn() as c:
        rows = history.acks(c, include_ended=all_)
    cols = ["id", "target", "check", "subject", "status", "reason", "actor", "created_at", "until", "ended_at", "ended_why"]
    emit(rows, output, columns=cols)
