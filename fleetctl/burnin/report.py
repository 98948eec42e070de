"""The burn-in report as one self-contained HTML page (placeholder until the page lands: see render)."""

from __future__ import annotations

from typing import Any


def render(conn: Any, run_id: int | None = None) -> str:
    raise NotImplementedError("burnin report: being written")
