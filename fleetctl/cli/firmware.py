"""`fleetctl firmware`: what each server runs, against its model's baseline."""

from __future__ import annotations

import typer

from fleetctl.cli.common import OutputOpt
from fleetctl.cli.output import Format
from fleetctl.cli.power import TargetsArg

app = typer.Typer(no_args_is_help=True)


def _baseline_key(want: dict[str, str], comp: object) -> str | None:
    """The baseline component a firmware component answers to.

    By id or name, case-insensitively; a board's component (the lab and
    several vendors say ``mncore2_slot0_mncore2-board``) also by its suffix.
    """
    cid, name = comp.id.lower(), (getattr(comp, "name", None) or "").lower()  # type: ignore[attr-defined]
    for k in want:
        lk = k.lower()
        if lk in (cid, name) or cid.endswith("_" + lk):
            return k
    return None


@app.command("list")
def list_(targets: TargetsArg, output: OutputOpt = Format.table) -> None:
    """Firmware components per server, and where they differ from the baseline (exit 1)."""
    from sqlalchemy import select

    from fleetctl.cli.bmcrun import resolve, run_with_progress, tally
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import fb_t, srv_t

    servers = resolve(targets)
    with conn() as c:
        baseline: dict[str, dict[str, str]] = {}
        for r in c.execute(select(srv_t.c.name, fb_t.c.component, fb_t.c.version).join(fb_t, fb_t.c.model_id == srv_t.c.model_id)):
            baseline.setdefault(r.name, {})[r.component] = r.version

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.firmware.inventory()

    outcomes = run_with_progress(servers, op, kind="firmware.list", targets=targets, output=output)
    rows, drift = [], False
    for o in outcomes:
        if not o.ok:
            rows.append({"server": o.server, "component": None, "version": None, "baseline": None, "status": "error", "error": o.error})
            continue
        want = baseline.get(o.server, {})
        seen = {}
        for comp in o.value:
            seen[comp.id] = comp.version
            key = _baseline_key(want, comp)
            status = "" if key is None else ("ok" if want[key] == comp.version else "drift")
            drift |= status == "drift"
            rows.append({"server": o.server, "component": comp.id, "version": comp.version,
                         "baseline": want.get(key) if key else None, "status": status, "error": None})  # fmt: skip
    emit(rows, output, columns=["server", "component", "version", "baseline", "status", "error"],
         styles={"status": lambda v: {"ok": "green", "drift": "yellow", "error": "bold red"}.get(v)})  # fmt: skip
    tally(outcomes, output)
    if drift or any(not o.ok for o in outcomes):
        raise typer.Exit(1)
