"""`fleetctl lab`: a simulated datacenter for the inventory, in the background."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import OutputOpt
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("up")
def up(
    site: Annotated[str | None, typer.Option("--site", help="Import this site file or folder first.")] = None,
    server: Annotated[list[str] | None, typer.Option("--server", help="Only these servers (repeatable).")] = None,
    http: Annotated[bool, typer.Option("--http", help="Plain HTTP instead of HTTPS (benchmarks).")] = False,
    power_transition: Annotated[float, typer.Option(help="Seconds a power transition takes.")] = 2.0,
    output: OutputOpt = Format.table,
) -> None:
    """Start one simulated BMC for every server in the inventory."""
    from pathlib import Path

    from fleetctl.cli.output import emit_one
    from fleetctl.lab import inventory as lab

    if site:
        from fleetctl.inventory.service import import_path

        import_path(Path(site))
    st = lab.up(names=set(server) if server else None, tls=not http, config={"power_transition_s": power_transition})
    summary = {"running": st["running"], "bmcs": st.get("count"), "control_url": st.get("control_url"),
               "state_dir": st.get("state_dir"), "pid": st.get("pid")}  # fmt: skip
    emit_one(summary, output)
    if output == Format.table:
        typer.echo("commands on these servers now reach their lab BMCs; `fleetctl lab down` stops them")


@app.command("down")
def down() -> None:
    """Stop the lab."""
    from fleetctl.lab import inventory as lab

    res = lab.down()
    typer.echo("lab stopped" if res.get("stopped") else "no lab was running")


@app.command("status")
def status(output: OutputOpt = Format.table) -> None:
    """Is a lab running, and which BMCs does it serve."""
    from fleetctl.cli.output import emit, emit_one
    from fleetctl.lab import inventory as lab

    st = lab.status()
    emit_one({k: st.get(k) for k in ("running", "responding", "count", "control_url", "state_dir", "pid")}, output)
    if output == Format.table and st.get("running"):
        rows = [{"server": n, "url": s["url"], "flavour": s.get("flavour")} for n, s in sorted(st.get("servers", {}).items())]
        emit(rows[:20], output, title=f"BMCs ({len(rows)})")
    if not st.get("running"):
        raise typer.Exit(1)


@app.command("fault")
def fault(
    servers: Annotated[list[str], typer.Argument(help="Server names, or * for every lab BMC.")],
    set_: Annotated[list[str] | None, typer.Option("--set", help="FAULT=VALUE, e.g. latency_ms=50, psu_failed=true.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Clear every fault.")] = False,
) -> None:
    """Inject faults into lab BMCs while the lab runs."""
    import json
    import urllib.request

    from fleetctl.errors import FleetError, InputError
    from fleetctl.lab import inventory as lab

    st = lab.status()
    if not st.get("running"):
        raise FleetError("no lab is running; fleetctl lab up first")
    faults: dict[str, object] | None = None
    if not clear:
        if not set_:
            raise InputError("give --set FAULT=VALUE or --clear")
        faults = {}
        for item in set_:
            k, sep, v = item.partition("=")
            if not sep:
                raise InputError(f"--set {item!r}: expected FAULT=VALUE", field="--set")
            try:
                faults[k] = json.loads(v)
            except ValueError:
                faults[k] = v
    body = json.dumps({"names": "*" if servers == ["*"] else servers, "faults": faults}).encode()
    req = urllib.request.Request(st["control_url"] + "/lab/v1/faults", data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            typer.echo(r.read().decode()[:500])
    except urllib.error.HTTPError as e:
        raise InputError(f"the lab refused: {e.read().decode()[:300]}") from e
