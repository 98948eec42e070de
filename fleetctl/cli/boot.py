"""`fleetctl boot`: the boot override (PXE, CD, HDD, a UEFI target)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt
from fleetctl.cli.output import Format
from fleetctl.cli.power import TargetsArg

app = typer.Typer(no_args_is_help=True)


class Device(StrEnum):
    pxe = "pxe"
    cd = "cd"
    hdd = "hdd"
    uefi = "uefi"
    bios = "bios"
    none = "none"


@app.command("show")
def show(targets: TargetsArg, output: OutputOpt = Format.table) -> None:
    """Read each server's boot override."""
    from fleetctl.cli.bmcrun import execute, resolve

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.boot.get()

    execute(resolve(targets, output), op, kind="boot.show", targets=targets, output=output,
            describe=lambda b: {"device": str(b.device), "persistent": b.persistent, "mode": b.mode,
                                "uefi_target": b.uefi_target})  # fmt: skip


@app.command("set")
def set_(
    targets: TargetsArg,
    device: Annotated[Device, typer.Option(help="Where to boot from.")],
    persistent: Annotated[bool, typer.Option("--persistent", help="Every boot, not only the next one.")] = False,
    uefi_target: Annotated[str | None, typer.Option(help="UEFI device path, with --device uefi.")] = None,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Override where servers boot from: the next boot only, or --persistent."""
    from fleetctl.cli.bmcrun import execute, resolve
    from fleetctl.errors import InputError
    from fleetctl.interfaces.bmc import BootDevice

    if (device == Device.uefi) != (uefi_target is not None):
        raise InputError("goes with --device uefi, and --device uefi needs it", field="--uefi-target")
    wanted = {Device.pxe: BootDevice.PXE, Device.cd: BootDevice.CD, Device.hdd: BootDevice.HDD,
              Device.uefi: BootDevice.UEFI_TARGET, Device.bios: BootDevice.BIOS_SETUP, Device.none: BootDevice.NONE}[device]  # fmt: skip
    servers = resolve(targets, output)
    if dry_run:
        for s in servers:
            typer.echo(f"would set {s.name} to boot from {device.value} ({'every boot' if persistent else 'next boot'})")
        return

    async def op(bmc):  # type: ignore[no-untyped-def]
        await bmc.boot.set(wanted, persistent=persistent, uefi_target=uefi_target)
        return await bmc.boot.get()

    execute(servers, op, kind="boot.set", targets=targets, args={"device": device.value, "persistent": persistent}, output=output,
            describe=lambda b: {"device": str(b.device), "persistent": b.persistent})  # fmt: skip
