"""`fleetctl power`: state, on, off, cycle, restart, over many servers at once."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)
TargetsArg = Annotated[list[str], typer.Argument(help="Servers, racks, sites, selectors (state=, tag=, model=) or all.")]
AllowOpt = Annotated[bool, typer.Option("--allow-in-service", help="Also act on servers that are in service.")]


def _dry(servers: list, action: str) -> None:  # type: ignore[type-arg]
    for s in servers:
        typer.echo(f"would {action} {s.name} (rack {s.rack}, state {s.state})")
    typer.echo(f"dry run: {len(servers)} server(s), nothing changed")


@app.command("status")
def status(targets: TargetsArg, output: OutputOpt = Format.table) -> None:
    """Read the power state of each server."""
    from fleetctl.cli.bmcrun import execute, resolve

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.power.state()

    execute(resolve(targets), op, kind="power.status", targets=targets, output=output,
            describe=lambda v: {"power": str(v)}, columns=["server", "ok", "power", "error", "elapsed"])  # fmt: skip


@app.command("on")
def on(targets: TargetsArg, dry_run: DryRunOpt = False, output: OutputOpt = Format.table) -> None:
    """Power servers on; a server that is already on is left alone (never cycled)."""
    from fleetctl.cli.bmcrun import execute, resolve

    servers = resolve(targets)
    if dry_run:
        return _dry(servers, "power on")

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.power.on()

    execute(servers, op, kind="power.on", targets=targets, output=output,
            describe=lambda sent: {"action": "powered on" if sent else "already on"},
            columns=["server", "ok", "action", "error", "elapsed"])  # fmt: skip


@app.command("off")
def off(
    targets: TargetsArg,
    force: Annotated[bool, typer.Option("--force", help="Cut power (ForceOff) instead of a graceful shutdown.")] = False,
    allow_in_service: AllowOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Shut servers down (gracefully unless --force)."""
    from fleetctl.cli.bmcrun import execute, refuse_in_service, resolve

    servers = resolve(targets)
    refuse_in_service(servers, allow_in_service)
    if dry_run:
        return _dry(servers, "force off" if force else "shut down")

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.power.off(force=force)

    execute(servers, op, kind="power.off", targets=targets, args={"force": force}, output=output,
            describe=lambda sent: {"action": "powering off" if sent else "already off"},
            columns=["server", "ok", "action", "error", "elapsed"])  # fmt: skip


@app.command("cycle")
def cycle(targets: TargetsArg, allow_in_service: AllowOpt = False, dry_run: DryRunOpt = False, output: OutputOpt = Format.table) -> None:
    """Power-cycle servers (off, then on)."""
    from fleetctl.cli.bmcrun import execute, refuse_in_service, resolve

    servers = resolve(targets)
    refuse_in_service(servers, allow_in_service)
    if dry_run:
        return _dry(servers, "power-cycle")

    async def op(bmc):  # type: ignore[no-untyped-def]
        await bmc.power.cycle()
        return "cycled"

    execute(servers, op, kind="power.cycle", targets=targets, output=output,
            describe=lambda v: {"action": v}, columns=["server", "ok", "action", "error", "elapsed"])  # fmt: skip


@app.command("restart")
def restart(
    targets: TargetsArg,
    graceful: Annotated[bool, typer.Option("--graceful", help="Ask the OS to restart instead of forcing it.")] = False,
    allow_in_service: AllowOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Restart servers (forced unless --graceful)."""
    from fleetctl.cli.bmcrun import execute, refuse_in_service, resolve

    servers = resolve(targets)
    refuse_in_service(servers, allow_in_service)
    if dry_run:
        return _dry(servers, "restart")

    async def op(bmc):  # type: ignore[no-untyped-def]
        await bmc.power.restart(force=not graceful)
        return "restarted"

    execute(servers, op, kind="power.restart", targets=targets, output=output,
            describe=lambda v: {"action": v}, columns=["server", "ok", "action", "error", "elapsed"])  # fmt: skip
