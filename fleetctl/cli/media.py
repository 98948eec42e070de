"""`fleetctl media`: virtual media (an ISO the BMC mounts as a CD)."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt
from fleetctl.cli.output import Format
from fleetctl.cli.power import TargetsArg

app = typer.Typer(no_args_is_help=True)
SlotOpt = Annotated[str | None, typer.Option(help="The slot, where a BMC has several (default: the first CD slot).")]


@app.command("show")
def show(targets: TargetsArg, output: OutputOpt = Format.table) -> None:
    """List each server's virtual media slots and what is inserted."""
    from fleetctl.cli.bmcrun import execute, resolve

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.media.slots()

    execute(resolve(targets, output), op, kind="media.show", targets=targets, output=output,
            describe=lambda slots: {"slots": "; ".join(f"{m.slot}: {m.image or '(empty)'}" for m in slots)})  # fmt: skip


@app.command("insert")
def insert(
    targets: TargetsArg,
    image: Annotated[str, typer.Option(help="URL of the ISO; the BMC downloads it.")],
    slot: SlotOpt = None,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Insert an ISO into each server's virtual CD."""
    from fleetctl.cli.bmcrun import execute, resolve
    from fleetctl.errors import InputError

    if not image.startswith(("http://", "https://", "nfs://", "cifs://")):
        raise InputError(f"{image!r} is not a URL the BMC can fetch (http, https, nfs, cifs)", field="--image")
    servers = resolve(targets, output)
    if dry_run:
        for s in servers:
            typer.echo(f"would insert {image} into {s.name}")
        return

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.media.insert(image, slot=slot)

    execute(servers, op, kind="media.insert", targets=targets, args={"image": image}, output=output,
            describe=lambda m: {"slot": m.slot, "image": m.image})  # fmt: skip


@app.command("eject")
def eject(targets: TargetsArg, slot: SlotOpt = None, dry_run: DryRunOpt = False, output: OutputOpt = Format.table) -> None:
    """Eject whatever is in each server's virtual CD."""
    from fleetctl.cli.bmcrun import execute, resolve

    servers = resolve(targets, output)
    if dry_run:
        for s in servers:
            typer.echo(f"would eject the virtual media of {s.name}")
        return

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.media.eject(slot=slot)

    execute(servers, op, kind="media.eject", targets=targets, output=output,
            describe=lambda m: {"slot": m.slot, "inserted": m.inserted})  # fmt: skip
