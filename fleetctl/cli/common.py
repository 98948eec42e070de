"""Options and helpers shared by the sub-apps."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from pathlib import Path
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


# ---------------------------------------------------------------- input rules
#
# Every value a command reads from its command line goes through one of these,
# so a value that makes no sense is exit 2 and one line where it enters
# (docs/cli.md, "Input rules"), never an OverflowError or a ValueError deep in
# a query (exit 3), and never read as something else (an empty --board as every
# board, Arabic-Indic digits as a number).

ID_MAX = 2**63 - 1  # ids and counts go into SQLite INTEGER / PostgreSQL bigint columns: signed 64-bit
_WHOLE = re.compile(r"-?[0-9]+", re.ASCII)  # ASCII only: int() also reads Arabic-Indic and other Unicode digits
_WHOLE_MAX_LEN = 20  # digits: more than any 64-bit value has
# Dates are kept where a shift to any time zone (at most 26 h) and a duration of DURATION_MAX_DAYS cannot leave datetime's
# years 1..9999 (report --since 0001-01-01 under TZ=Asia/Tokyo was an OverflowError).
DATE_MIN = dt.date(1970, 1, 1)
DATE_MAX = dt.date(9000, 12, 31)
DURATION_MAX_DAYS = 36500  # a century, as `sweep --retention`
_DURATION = re.compile(r"([0-9]+)\s*([smhdw])", re.ASCII)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# Pseudo file systems: a report or a backup written there replaces a device node (as root, `db backup /dev/full
# --force` did) or fails half-way; never a destination.
_NOT_FILES = ("/proc", "/sys", "/dev")


def _bad(message: str) -> typer.BadParameter:
    return typer.BadParameter(message)


def whole(low: int | None = 0, high: int = ID_MAX) -> Callable[[Any], int]:
    """A typer ``parser`` for a whole number: ASCII digits (a leading ``-`` when ``low`` allows), low <= n <= high.

    ``high`` defaults to the 64-bit column range: a larger id or limit is
    refused here instead of overflowing the database driver.
    """

    def parse(value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):  # a default
            n = value
        else:
            text = str(value)
            if not _WHOLE.fullmatch(text):
                raise _bad(f"{text!r} is not a whole number (digits 0-9)")
            # More digits than any 64-bit value: refused before int() reads them (it reads at most 4,300).
            n = int(text) if len(text.lstrip("-")) <= _WHOLE_MAX_LEN else (-1 if text.startswith("-") else 1) * 10**_WHOLE_MAX_LEN
        if low is not None and n < low:
            raise _bad(f"{_shown(value)}: must be greater than or equal to {low}")
        if n > high:
            raise _bad(f"{_shown(value)}: must be less than or equal to {high}")
        return n

    return parse


def _shown(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:21]}..."


def id_text(value: str | None) -> str | None:
    """A typer callback for an argument that is an id or a name: an id (all digits) must be ASCII and fit 64 bits; never empty."""
    if value is None:
        return None
    if not value.strip():
        raise _bad("must not be empty")
    if any(ch.isdigit() or ch.isnumeric() for ch in value) and all(ch.isdigit() or ch.isnumeric() for ch in value):
        whole(1)(value)
    return value


def run_ref(value: str | None) -> str | None:
    """A typer callback for a run: an id, ``latest`` or ``latest~N`` (ASCII digits, in range); never empty."""
    if value is None:
        return None
    head, sep, back = value.partition("~")
    if head == "latest" and not sep:
        return value
    number = back if head == "latest" else value
    if (sep and head != "latest") or not _WHOLE.fullmatch(number) or number.startswith("-"):
        raise _bad(f"bad run {value!r}: give a run id, latest, or latest~N")
    whole(0 if head == "latest" else 1)(number)
    return value


def host_port(value: str | None) -> str | None:
    """A typer callback for HOST:PORT: the port is ASCII digits 0..65535 (``127.0.0.1:٩٨٧٧`` listened on 9877)."""
    if value is None:
        return None
    _, sep, port = value.rpartition(":")
    if not sep or not _WHOLE.fullmatch(port) or len(port) > 5 or not 0 <= int(port) <= 65535:
        raise _bad(f"{value!r}: give HOST:PORT, the port a number 0 to 65535 (digits 0-9)")
    return value


def non_empty(value: Any) -> Any:
    """A typer callback for a name or a filter: an empty (or blank) one is refused, never read as "any" or as the default."""
    for v in value if isinstance(value, list | tuple) else [value]:
        if v is not None and not str(v).strip():
            raise _bad("must not be empty")
    return value


def seconds(low: float, high: float, *, above: bool = False) -> Callable[[float | None], float | None]:
    """A typer callback for seconds: finite, ``low`` < (or <=) value <= ``high`` (`burnin --duration 1e12` was taken)."""
    first = finite(low, above=above)

    def check(value: float | None) -> float | None:
        first(value)
        if value is not None and value > high:
            raise _bad(f"{value:g} is more than {high:g} seconds")
        return value

    return check


def check_date(text: str) -> dt.date:
    """``2026-12-24``: a date in DATE_MIN..DATE_MAX (so no time zone can push it out of datetime's range)."""
    try:
        day = dt.date.fromisoformat(text.strip()[:10])
    except ValueError:
        raise _bad(f"{text!r} is not a date (2026-12-24)") from None
    if not DATE_MIN <= day <= DATE_MAX:
        raise _bad(f"{text!r} is out of range ({DATE_MIN} to {DATE_MAX})")
    return day


def when(units: str, words: tuple[str, ...] = (), times: bool = False) -> Callable[[str | None], str | None]:
    """A typer callback for a point in time given as text: a date, (``times``) a date and time, one of ``words``,
    or a duration ``7d`` in ``units`` of at most DURATION_MAX_DAYS. Returns the text unchanged (the command
    reads it), once it is known that reading it cannot overflow; an empty one is refused, never "none".
    """

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        t = value.strip().lower()
        if not t:
            raise _bad("must not be empty")
        if t in words:
            return value
        if m := _DURATION.fullmatch(t):
            if m.group(2) not in units:
                raise _bad(f"{value!r}: a duration's unit is one of {', '.join(units)}")
            count = m.group(1)
            if len(count) > 12 or int(count) * _UNIT_S[m.group(2)] > DURATION_MAX_DAYS * 86400:
                raise _bad(f"{value!r} is longer than {DURATION_MAX_DAYS} days")
            return value
        forms = ", ".join([*words, "a date (2026-12-24)", *(["a time (2026-12-24T08:00)"] if times else [])])
        forms += f" or a duration (7{units[-1]})"
        try:
            if not t.isascii():
                raise ValueError
            dt.date.fromisoformat(t[:10])
        except ValueError:  # neither a word nor a duration nor a date: say every form the option takes
            raise _bad(f"{value!r}: give {forms}") from None
        check_date(t)
        if times and len(t) > 10:
            try:
                dt.datetime.fromisoformat(value.strip())
            except ValueError:
                raise _bad(f"{value!r} is not a date and time (2026-12-24T08:00)") from None
        elif len(t) > 10:
            raise _bad(f"{value!r} is not a date (2026-12-24)")
        return value

    return check


def a_path(value: Any) -> Path:
    """A typer ``parser`` for a path a command reads (or a folder it fills): an empty one is refused, where
    ``Path("")`` is ``.`` (`inventory export --dir ''` wrote into the working folder, `inventory check ''` checked it)."""
    if isinstance(value, Path):
        return value
    if not str(value).strip():
        raise _bad("must not be empty")
    return Path(str(value))


def output_file(value: Any) -> Path:
    """A typer ``parser`` for a file a command writes: not empty, not a folder or a device, not under /proc, /sys or
    /dev, in a folder that exists and that we may write to.

    A write that fails later all the same (a full disk) is one line too: fleetctl/cli/app.py maps the OSError.
    """
    if isinstance(value, Path):
        path = value
    else:
        if not str(value).strip():
            raise _bad("must not be empty")
        path = Path(str(value))
    path = path.expanduser()
    real = Path(os.path.realpath(path))
    if any(real == Path(root) or real.is_relative_to(root) for root in _NOT_FILES):
        raise _bad(f"{path}: not a file fleetctl writes ({real} is under {', '.join(_NOT_FILES)})")
    try:
        if real.is_dir():
            raise _bad(f"{path}: is a folder; give a file name")
        if real.exists() and not real.is_file():
            raise _bad(f"{path}: not a regular file")
        parent = real.parent
        if not parent.is_dir():
            raise _bad(f"{path.parent}: no such folder")
    except OSError as e:  # a name longer than the file system takes (ENAMETOOLONG), a loop of links
        raise _bad(f"{str(path)[:80]}{'...' if len(str(path)) > 80 else ''}: {e.strerror or e}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _bad(f"{path.parent}: not writable")
    return path


IdArg = Annotated[int, typer.Argument(help="The id.", parser=whole(1))]
LimitOpt = Annotated[int, typer.Option("--limit", help="How many, newest first.", parser=whole(1))]


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

