"""`fleetctl bios`: read attributes, stage settings, apply on reset, verify."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt
from fleetctl.cli.output import Format
from fleetctl.cli.power import TargetsArg

app = typer.Typer(no_args_is_help=True)
SetOpt = Annotated[list[str], typer.Option("--set", help="NAME=VALUE (repeatable); numbers and true/false are typed.")]


def _settings(pairs: list[str]) -> dict[str, Any]:
    from fleetctl.errors import InputError

    out: dict[str, Any] = {}
    for p in pairs:
        name, sep, raw = p.partition("=")
        if not sep or not name:
            raise InputError(f"--set {p!r}: expected NAME=VALUE", field="--set")
        try:
            value = json.loads(raw)
            if not isinstance(value, (int, float, bool)):
                value = raw
        except ValueError:
            value = raw
        out[name] = value
    return out


@app.command("show")
def show(
    targets: TargetsArg,
    attribute: Annotated[list[str] | None, typer.Option("--attribute", "-a", help="Only these attributes.")] = None,
    output: OutputOpt = Format.table,
) -> None:
    """Read BIOS attributes (and what is pending for the next reset)."""
    from fleetctl.cli.bmcrun import execute, resolve

    async def op(bmc):  # type: ignore[no-untyped-def]
        attrs = await bmc.bios.attributes()
        pending = await bmc.bios.pending()
        if attribute:
            attrs = {k: v for k, v in attrs.items() if k in attribute}
            pending = {k: v for k, v in pending.items() if k in attribute}
        return {"attributes": attrs, "pending": pending}

    execute(resolve(targets), op, kind="bios.show", targets=targets, output=output,
            describe=lambda v: {"attributes": json.dumps(v["attributes"], sort_keys=True),
                                "pending": json.dumps(v["pending"], sort_keys=True) if v["pending"] else ""})  # fmt: skip


@app.command("set")
def set_(
    targets: TargetsArg,
    settings: SetOpt,
    apply: Annotated[bool, typer.Option("--apply", help="Restart now to apply, then verify; otherwise staged for the next reset.")] = False,
    allow_in_service: Annotated[bool, typer.Option("--allow-in-service", help="Also restart servers in service.")] = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Stage BIOS settings; with --apply, restart and verify they took."""
    from fleetctl.cli.bmcrun import execute, refuse_in_service, resolve
    from fleetctl.errors import BMCError
    from fleetctl.interfaces.bmc import PowerState

    wanted = _settings(settings)
    servers = resolve(targets)
    if apply:
        refuse_in_service(servers, allow_in_service)

    async def plan(bmc):  # type: ignore[no-untyped-def]
        return await bmc.bios.verify(wanted)

    async def op(bmc):  # type: ignore[no-untyped-def]
        diff = await bmc.bios.verify(wanted)
        if not diff:
            return {"changed": [], "verified": True}
        await bmc.bios.stage({k: wanted[k] for k in diff})
        if not apply:
            return {"changed": sorted(diff), "verified": None}
        if await bmc.power.state() == PowerState.ON:
            await bmc.power.restart(force=True)
        else:
            await bmc.power.on()
        await bmc.power.wait_for(PowerState.ON, timeout=600)
        left = await bmc.bios.verify(wanted)
        if left:
            raise BMCError(f"{bmc.target.name}: after the reset BIOS still differs: " +
                           ", ".join(f"{k} is {h!r}, wanted {w!r}" for k, (w, h) in left.items()))  # fmt: skip
        return {"changed": sorted(diff), "verified": True}

    if dry_run:
        execute(servers, plan, kind="bios.plan", targets=targets, output=output,
                describe=lambda d: {"would_change": ", ".join(f"{k}: {h!r} -> {w!r}" for k, (w, h) in d.items()) or "(nothing)"})  # fmt: skip
        return
    execute(servers, op, kind="bios.set", targets=targets, args={"settings": wanted, "apply": apply}, output=output,
            describe=lambda v: {"changed": ", ".join(v["changed"]) or "(already set)",
                                "verified": {True: "yes", None: "at next reset"}.get(v["verified"], "no")})  # fmt: skip
