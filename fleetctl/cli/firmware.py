"""`fleetctl firmware`: what each server runs, against its model's baseline."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt
from fleetctl.cli.output import Format
from fleetctl.cli.power import TargetsArg

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(targets: TargetsArg, output: OutputOpt = Format.table) -> None:
    """Firmware components per server, and where they differ from the baseline (exit 1)."""
    from sqlalchemy import select

    from fleetctl.cli.bmcrun import resolve, run_with_progress, tally
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import fb_t, srv_t
    from fleetctl.workflows.firmware import baseline_key

    servers = resolve(targets, output)
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
            key = baseline_key(want, comp)
            status = "" if key is None else ("ok" if want[key] == comp.version else "drift")
            drift |= status == "drift"
            rows.append({"server": o.server, "component": comp.id, "version": comp.version,
                         "baseline": want.get(key) if key else None, "status": status, "error": None})  # fmt: skip
    emit(rows, output, columns=["server", "component", "version", "baseline", "status", "error"],
         styles={"status": lambda v: {"ok": "green", "drift": "yellow", "error": "bold red"}.get(v)})  # fmt: skip
    tally(outcomes, output)
    if drift or any(not o.ok for o in outcomes):
        raise typer.Exit(1)


@app.command("update")
def update(
    targets: TargetsArg,
    image_base: Annotated[str, typer.Option("--image-base", help="URL the BMCs fetch firmware images from.")],
    template: Annotated[
        str, typer.Option(help="Image URL: {base}, {id} (the BMC's component), {component} (the baseline's), {version}.")
    ] = "{base}/{id}-{version}.bin",
    component: Annotated[list[str] | None, typer.Option("--component", help="Only this baseline component (repeatable).")] = None,
    canary: Annotated[int, typer.Option(help="Servers in the first wave.")] = 1,
    batch: Annotated[int, typer.Option(help="Servers in each wave after the canary.")] = 10,
    allow_in_service: Annotated[bool, typer.Option("--allow-in-service", help="Also update servers in service.")] = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Bring firmware to the baseline in waves (a canary, then batches), halting at the first failure."""
    from sqlalchemy import select

    from fleetctl.cli.bmcrun import refuse_in_service, resolve, run_with_progress
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.errors import InputError
    from fleetctl.inventory.queries import fb_t, srv_t
    from fleetctl.workflows.firmware import operation

    if not image_base.startswith(("http://", "https://")):
        raise InputError(f"{image_base!r} is not an http(s) URL", field="--image-base")
    if canary < 1 or batch < 1:
        raise InputError("--canary and --batch take positive numbers", field="--batch")
    servers = resolve(targets, output)
    refuse_in_service(servers, allow_in_service)
    want: dict[str, dict[str, str]] = {}
    with conn() as c:
        for r in c.execute(select(srv_t.c.name, fb_t.c.component, fb_t.c.version).join(fb_t, fb_t.c.model_id == srv_t.c.model_id)):
            want.setdefault(r.name, {})[r.component] = r.version
    op = operation(want, template=template, base=image_base, only=set(component) if component else None, dry_run=dry_run)
    waves = [servers[:canary]] + [servers[i : i + batch] for i in range(canary, len(servers), batch)]
    rows, failed, halted = [], 0, False
    for n, wave in enumerate(w for w in waves if w):
        if halted:
            rows += [{"wave": n, "server": s.name, "component": None, "from": None, "to": None, "result": "not attempted",
                      "message": "halted after a failure in an earlier wave"} for s in wave]  # fmt: skip
            continue
        outcomes = run_with_progress(wave, op, kind="firmware.plan" if dry_run else "firmware.update", targets=targets,
                                     args={"image_base": image_base, "wave": n}, output=output)  # fmt: skip
        for o in outcomes:
            if not o.ok:
                failed += 1
                rows.append({"wave": n, "server": o.server, "component": None, "from": None, "to": None,
                             "result": "failed", "message": o.error})  # fmt: skip
                continue
            if not o.value:
                rows.append({"wave": n, "server": o.server, "component": None, "from": None, "to": None,
                             "result": "at baseline", "message": None})  # fmt: skip
            for u in o.value:
                rows.append({"wave": n, "server": o.server, "component": u.id, "from": u.before, "to": u.baseline,
                             "result": "would update" if dry_run else u.state,
                             "message": u.image if dry_run else u.message})  # fmt: skip
        halted = failed > 0 and not dry_run
    emit(rows, output, columns=["wave", "server", "component", "from", "to", "result", "message"],
         styles={"result": lambda v: {"updated": "green", "at baseline": "green", "would update": "yellow"}.get(v, "bold red")},
         )  # fmt: skip
    if failed:
        raise typer.Exit(1)
