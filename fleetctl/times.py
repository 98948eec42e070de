"""Times as the commands read and show them: stored timestamps and durations like 7d.

Below every layer (standard library only): the sweep, burn-in and the HTML
reports they share read stored times the same way.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

_UNITS = {"m": dt.timedelta(minutes=1), "h": dt.timedelta(hours=1), "d": dt.timedelta(days=1), "w": dt.timedelta(weeks=1)}
_DURATION = re.compile(r"^(\d+)\s*([mhdw])$")


def utcnow() -> dt.datetime:
    """Now, in UTC, with its zone: every stored timestamp is made by this."""
    return dt.datetime.now(dt.UTC)


def aware_utc(v: Any) -> dt.datetime | None:
    """A stored timestamp (a datetime or ISO text) as an aware UTC datetime; SQLite hands them back naive, in UTC."""
    if v is None:
        return None
    if isinstance(v, str):
        v = dt.datetime.fromisoformat(v)
    return v.replace(tzinfo=dt.UTC) if v.tzinfo is None else v.astimezone(dt.UTC)


def duration(text: str, units: str = "mhdw") -> tuple[int, str] | None:
    """``7d`` -> (7, "d") when ``text`` is a count of one of ``units`` (m, h, d, w); None otherwise."""
    m = _DURATION.match(text.strip().lower())
    if not m or m.group(2) not in units:
        return None
    return int(m.group(1)), m.group(2)


def span(count: int, unit: str) -> dt.timedelta:
    return count * _UNITS[unit]
