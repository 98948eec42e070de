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
            raise InputError(f"expected NAME=VALUE, got {p!r}", field="--set")
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

    execute(resolve(targets, output), op, kind="bios.show", targets=targets, output=output,
            describe=lambda v: {"attributes": json.dumps(v["attributes"], sort_keys=True),
                                "pending": json.dumps(v["pending"], sort_keys=True) if v["pending"] else ""})  # fmt: skip


async def _stage_and_apply(bmc, wanted: dict[str, Any], apply: bool) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Stage what differs; with ``apply``, reset the server and verify the settings took."""
    from fleetctl.errors import BMCError
    from fleetctl.interfaces.bmc import PowerState

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


def _describe_applied(v: dict[str, Any]) -> dict[str, Any]:
    return {"changed": ", ".join(v["changed"]) or "(already set)",
            "verified": {True: "yes", None: "at next reset"}.get(v["verified"], "no")}  # fmt: skip


def _describe_plan(d: dict[str, Any]) -> dict[str, Any]:
    return {"would_change": ", ".join(f"{k}: {h!r} -> {w!r}" for k, (w, h) in d.items()) or "(nothing)"}


def _bring_to(servers: list[Any], wanted_of: Any, *, apply: bool, dry_run: bool, kind: str, targets: list[str],
              args: dict[str, Any], output: Format) -> None:  # fmt: skip
    """Plan (--dry-run) or stage-and-apply ``wanted_of(server name)`` on every server."""
    from fleetctl.cli.bmcrun import execute

    async def plan(bmc):  # type: ignore[no-untyped-def]
        return await bmc.bios.verify(wanted_of(bmc.target.name))

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await _stage_and_apply(bmc, wanted_of(bmc.target.name), apply)

    if dry_run:
        execute(servers, plan, kind="bios.plan", targets=targets, output=output, describe=_describe_plan)
        return
    execute(servers, op, kind=kind, targets=targets, args=args, output=output, describe=_describe_applied)


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
    from fleetctl.cli.bmcrun import refuse_in_service, resolve

    wanted = _settings(settings)
    servers = resolve(targets, output)
    if apply:
        refuse_in_service(servers, allow_in_service)
    _bring_to(servers, lambda _name: wanted, apply=apply, dry_run=dry_run, kind="bios.set", targets=targets,
              args={"settings": wanted, "apply": apply}, output=output)  # fmt: skip


@app.command("apply-profile")
def apply_profile(
    targets: TargetsArg,
    apply: Annotated[bool, typer.Option("--apply", help="Restart now to apply, then verify; otherwise staged for the next reset.")] = False,
    allow_in_service: Annotated[bool, typer.Option("--allow-in-service", help="Also restart servers in service.")] = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Bring each server's BIOS to its hardware model's profile (bios_profiles: in the site files)."""
    from sqlalchemy import select

    from fleetctl.cli.bmcrun import refuse_in_service, resolve
    from fleetctl.cli.common import conn
    from fleetctl.errors import InputError
    from fleetctl.store import tables as T

    servers = resolve(targets, output)
    if apply:
        refuse_in_service(servers, allow_in_service)
    with conn() as c:
        rows = c.execute(
            select(T.server.c.name, T.bios_profile.c.name.label("profile"), T.bios_profile.c.attributes)
            .join(T.hardware_model, T.hardware_model.c.id == T.server.c.model_id)
            .outerjoin(T.bios_profile, T.bios_profile.c.name == T.hardware_model.c.bios_profile)
            .where(T.server.c.name.in_([s.name for s in servers]))
        )
        wanted = {r.name: dict(r.attributes or {}) for r in rows if r.profile}
    missing = [s.name for s in servers if s.name not in wanted]
    if missing:
        raise InputError(f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}: the hardware model names no BIOS profile")
    _bring_to(servers, wanted.__getitem__, apply=apply, dry_run=dry_run, kind="bios.profile", targets=targets,
              args={"apply": apply}, output=output)  # fmt: skip
