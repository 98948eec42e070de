"""Natural ordering of names (kept apart: the fast read path imports it)."""

from __future__ import annotations

import re
from typing import Any

_DIGITS = re.compile(r"(\d+)")


def natural_key(value: str) -> tuple[Any, ...]:
    """Sort ``Ethernet2`` before ``Ethernet10`` and ``rack-9`` before ``rack-12``."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(value))
