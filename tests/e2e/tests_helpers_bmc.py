"""Reading a running lab daemon from tests (its lab.json and control endpoint)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any


def lab_doc(state_dir: Path) -> dict[str, Any]:
    return json.loads((state_dir / "lab.json").read_text())


def serve(names: list[str]) -> list[str]:
    """`--server NAME` for each name: what `lab up` serves."""
    return [arg for n in names for arg in ("--server", n)]


def counters(lab: dict[str, Any], name: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{lab['control_url']}/lab/v1/bmcs/{name}/counters", timeout=10) as r:
        return json.loads(r.read())


def lab_db_of(out: str) -> str:
    """The lab's database from `fleetctl lab up`'s output: its `export FLEETCTL_DB=...` line (or JSON's "export")."""
    import json
    import shlex

    text = out.strip()
    lines = [json.loads(text)["export"]] if text.startswith("{") else [x for x in text.splitlines() if x.startswith("export FLEETCTL_DB=")]
    assert lines, f"no export line in: {out[-300:]}"
    return shlex.split(lines[-1].removeprefix("export "))[0].partition("=")[2]


def lab_up(cli, monkeypatch, *args: str):  # type: ignore[no-untyped-def]
    """`fleetctl lab up ARGS`, then FLEETCTL_DB points at the lab's fleet, as the export line says."""
    r = cli("lab", "up", *args)
    if r.code == 0:
        monkeypatch.setenv("FLEETCTL_DB", lab_db_of(r.out))
    return r


def selected_engine():  # type: ignore[no-untyped-def]
    """A plain engine on the database FLEETCTL_DB selects (a path or a URL)."""
    import os

    from sqlalchemy import create_engine

    raw = os.environ["FLEETCTL_DB"]
    return create_engine(raw if "://" in raw else f"sqlite:///{raw}")


def host_of(lab: dict[str, Any], name: str) -> dict[str, Any]:
    """The lab's view of one host (phase, install and boot ids, devices)."""
    with urllib.request.urlopen(f"{lab['control_url']}/lab/v1/hosts/{name}", timeout=10) as r:
        return json.loads(r.read())


def install_hosts(cli, lab: dict[str, Any], names: list[str], *, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Install the lab hosts of ``names`` with fleetctl's own `boot set` + `power on`, then mark them ready."""
    import time

    assert cli("boot", "set", *names, "--device", "pxe").code == 0
    assert cli("power", "on", *names, "--stagger", "0").code == 0
    deadline = time.monotonic() + timeout
    while not all(host_of(lab, n)["phase"] == "up" for n in names):
        assert time.monotonic() < deadline, {n: host_of(lab, n) for n in names}
        time.sleep(0.1)
    for n in names:
        assert cli("server", "set-state", n, "ready", "--force", "--reason", "test: installed by the lab").code == 0
