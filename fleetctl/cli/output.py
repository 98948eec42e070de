"""Render results for humans (rich tables) and scripts (json, yaml, csv)."""

from __future__ import annotations

import csv
import io
import json
import sys
from enum import StrEnum
from typing import Any, Literal

from fleetctl.term import use_color


class Format(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"
    csv = "csv"


def console(stderr: bool = False):  # type: ignore[no-untyped-def]
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped into a file or another program, a table is not cut to 80 columns.
    width = None if stream.isatty() else 240
    # emoji=False: a fingerprint like ...:CD:... must not become a CD emoji. color_system=None renders no style at all
    # (rich's own NO_COLOR handling drops colours but keeps bold: escape codes in a log all the same).
    color_system: Literal["auto"] | None = "auto" if use_color(stream) else None
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width, emoji=False, color_system=color_system)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple | set):
        return ",".join(str(v) for v in value)
    return str(value)


def emit(
    rows: list[dict[str, Any]],
    fmt: Format,
    *,
    columns: list[str] | None = None,
    title: str | None = None,
    styles: dict[str, Any] | None = None,
) -> None:
    """Print rows in the chosen format.

    ``columns`` picks and orders what the table and CSV show (JSON and YAML
    carry every key); ``styles`` maps a column to a function value -> rich style.
    A device command's rows carry the fleet it acted on (``fleet``) in the
    machine formats; its table's first line named it already.
    """
    fleet = _fleet()
    if fleet and fmt != Format.table:
        rows = [{"fleet": fleet, **r} for r in rows]
        columns = ["fleet", *columns] if columns else None
    if fmt == Format.json:
        sys.stdout.write(json.dumps(rows, indent=2, default=str) + "\n")
        return
    if fmt == Format.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(rows, sort_keys=False, default_flow_style=False, allow_unicode=True))
        return
    cols = columns or (list(rows[0]) if rows else [])
    if fmt == Format.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in cols])
        sys.stdout.write(buf.getvalue())
        return
    from rich.table import Table

    table = Table(title=title, show_edge=False, header_style="bold")
    for c in cols:
        table.add_column(c)
    styles = styles or {}
    for r in rows:
        cells = []
        for c in cols:
            text = _cell(r.get(c))
            style = styles[c](r.get(c)) if c in styles else None
            cells.append(f"[{style}]{_escape(text)}[/]" if style else _escape(text))
        table.add_row(*cells)
    out = console()
    if rows:
        out.print(table)
    else:
        out.print("(nothing)" if not title else f"{title}: (nothing)")


def _fleet() -> str | None:
    from fleetctl.cli import state

    return state.fleet


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def emit_one(obj: dict[str, Any], fmt: Format) -> None:
    """Print one object: key/value lines for people, the object for scripts."""
    fleet = _fleet()
    if fleet and fmt != Format.table:
        obj = {"fleet": fleet, **obj}
    if fmt in (Format.json, Format.yaml):
        if fmt == Format.json:
            sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
        else:
            import yaml

            sys.stdout.write(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True))
        return
    if fmt == Format.csv:
        emit([obj], fmt)
        return
    from rich.table import Table

    t = Table(show_header=False, show_edge=False, box=None)
    t.add_column(style="bold")
    t.add_column()
    for k, v in obj.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            continue  # nested tables are printed by the caller
        t.add_row(k, _escape(_cell(v)))
    console().print(t)
