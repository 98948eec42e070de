"""What a stream may carry: ANSI styling only for a terminal (the CLI's consoles and the demo's plain prints)."""

from __future__ import annotations

import os
from typing import Any


def use_color(stream: Any) -> bool:
    """Whether text for ``stream`` may carry ANSI styling (bold, colour): only for a terminal, never under NO_COLOR.

    A file or a pipe (``make demo > log``, ``fleetctl ... | less``, a CI log) gets plain text. ``NO_COLOR`` (any
    non-empty value, https://no-color.org) wins over everything; ``FORCE_COLOR`` asks for styling into a pipe, as
    rich and most tools read it.
    """
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
