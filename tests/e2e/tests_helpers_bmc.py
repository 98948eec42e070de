"""Reading a running lab daemon from tests (its lab.json and control endpoint)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any


def lab_doc(state_dir: Path) -> dict[str, Any]:
    return json.loads((state_dir / "lab.json").read_text())


def counters(lab: dict[str, Any], name: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{lab['control_url']}/lab/v1/bmcs/{name}/counters", timeout=10) as r:
        return json.loads(r.read())
