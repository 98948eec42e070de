"""`fleetctl lab`: a simulated datacenter for the inventory, in the background."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fleetctl.cli.common import OutputOpt
from fleetctl.cli.output import Format
from fleetctl_lab.k8s.cli import app as k8s_app

app = typer.Typer(no_args_is_help=True, help="The lab: a simulated datacenter (BMCs, switches, hosts) as a fleet of its own.")
app.add_typer(k8s_app, name="k8s")


@app.command("up")
def up(
    site: Annotated[
        str | None, typer.Option("--site", help="Serve this site file or folder (default: the fleet of the selected database).")
    ] = None,
    server: Annotated[list[str] | None, typer.Option("--server", help="Only these servers (repeatable).")] = None,
    http: Annotated[bool, typer.Option("--http", help="Plain HTTP instead of HTTPS (benchmarks).")] = False,
    power_transition: Annotated[float, typer.Option(help="Seconds a power transition takes.")] = 2.0,
    firmware_time: Annotated[float, typer.Option(help="Seconds a firmware update task takes.")] = 5.0,
    install_time: Annotated[float, typer.Option(help="Seconds an OS install takes after a PXE or virtual-media boot.")] = 30.0,
    os_boot_time: Annotated[float, typer.Option(help="Seconds an installed OS takes to boot from disk.")] = 1.0,
    hosts: Annotated[
        bool, typer.Option("--hosts/--no-hosts", help="Serve the host behind each BMC over SSH (not with --generate).")
    ] = True,
    generate: Annotated[int | None, typer.Option("--generate", help="Instead: N generated servers (benchmarks, scale tests).")] = None,
    lab_db: Annotated[
        str | None,
        typer.Option(
            "--lab-db",
            help="Put the lab's fleet in this (empty) database URL, e.g. PostgreSQL, instead of the lab folder's SQLite file.",
        ),
    ] = None,
    unregistered: Annotated[
        int,
        typer.Option("--unregistered", min=0, max=1000,
                     help="Also serve N BMCs the lab's fleet does not hold, for `fleetctl discover` (docs/lab.md)."),
    ] = 0,
    output: OutputOpt = Format.table,
) -> None:
    """Start a lab: a simulated BMC and host per server of a site (or of your fleet), and its switches.

    The lab is a fleet of its own: what it serves is written into the lab's
    database, and the last line printed is `export FLEETCTL_DB=...`, which
    points the CLI at it. Your fleet's database is only read.
    """
    import shlex
    from pathlib import Path

    from fleetctl.cli.output import emit_one
    from fleetctl.errors import InputError
    from fleetctl_lab import inventory as lab

    for name, value in (("--power-transition", power_transition), ("--firmware-time", firmware_time),
                        ("--install-time", install_time), ("--os-boot-time", os_boot_time)):  # fmt: skip
        if not value >= 0 or value == float("inf"):
            raise InputError(f"{name} must be a number of seconds >= 0, not {value}", field=name)
    if site and not Path(site).exists():
        raise InputError(f"{site}: no such file or folder", field="--site")
    config = {"power_transition_s": power_transition, "firmware_update_s": firmware_time,
              "install_s": install_time, "os_boot_s": os_boot_time}  # fmt: skip
    if not generate:
        config["hosts"] = hosts
    if generate is not None:
        if site or server or lab_db or unregistered:
            raise InputError("--generate makes its own servers: give it without --site, --server, --lab-db or --unregistered",
                             field="--generate")  # fmt: skip
        st = lab.up_generated(generate, tls=not http, config=config)
    else:
        st = lab.up(site=Path(site) if site else None, names=set(server) if server else None, tls=not http, config=config,
                    db_url=lab_db, unregistered=unregistered)
    # A URL's password is never printed: the export line then names the URL without it.
    export = f"export FLEETCTL_DB={shlex.quote(fleet_label_of(st['db']))}"
    summary = {"running": st["running"], "bmcs": st.get("count"), "switches": len(st.get("switches", {})),
               "hosts": len(st.get("hosts", {})), "serves": fleet_label_of(st.get("source") or ""), "db": fleet_label_of(st["db"]),
               "control_url": st.get("control_url"), "state_dir": st.get("state_dir"), "pid": st.get("pid")}  # fmt: skip
    if st.get("unregistered"):
        summary["unregistered"] = st["unregistered"]
        summary.update({f"leases_{k}": v for k, v in (st.get("leases") or {}).items()})
    if output != Format.table:
        summary["export"] = export
    emit_one(summary, output)
    if output == Format.table:
        typer.echo("the lab is a fleet of its own; point the CLI at its database (`fleetctl lab down` stops it):")
        typer.echo(export)


def fleet_label_of(url_or_path: str) -> str:
    """A database as shown to people: a path, or a URL without its password."""
    if "://" not in url_or_path:
        return url_or_path
    from sqlalchemy.engine import make_url

    return make_url(url_or_path).render_as_string(hide_password=True)


@app.command("down")
def down() -> None:
    """Stop the lab."""
    from fleetctl_lab import inventory as lab

    res = lab.down()
    typer.echo("lab stopped" if res.get("stopped") else "no lab was running")


@app.command("status")
def status(output: OutputOpt = Format.table) -> None:
    """Is a lab running, and which BMCs (and hosts, and switches) does it serve."""
    from fleetctl.cli.output import emit, emit_one
    from fleetctl_lab import inventory as lab

    st = lab.status()
    summary = {k: st.get(k) for k in ("running", "responding", "count", "control_url", "switch_control_url", "state_dir", "pid")}
    summary["db"] = fleet_label_of(lab.lab_db_url())
    summary["switches"] = len(st.get("switches", {}))
    if st.get("running"):
        from fleetctl_lab.unregistered import read_note

        note = read_note(Path(st.get("state_dir") or lab.lab_dir()))
        if note:
            # Where discovery's --leases finds the unregistered BMCs' addresses (Kea CSV, dnsmasq).
            summary["unregistered"] = len(note.get("bmcs", []))
            summary.update({f"leases_{k}": v for k, v in (note.get("leases") or {}).items()})
            if output != Format.table:
                summary["unregistered_bmcs"] = note.get("bmcs", [])
    phases = _host_phases(st) if st.get("running") and st.get("hosts") else {}
    if output != Format.table:
        summary["servers"] = {n: {k: v for k, v in s.items() if k != "fingerprint"} for n, s in st.get("servers", {}).items()}
        summary["switch_endpoints"] = {n: _without_community(sw, Path(st.get("state_dir") or "."), n)
                                       for n, sw in st.get("switches", {}).items()}  # fmt: skip
        summary["hosts"] = {
            n: {"ssh": f"{h['address']}:{h['port']}", "phase": phases.get(n, {}).get("phase"),
                "up_since": phases.get(n, {}).get("up_since"), "installs": phases.get(n, {}).get("installs")}
            for n, h in st.get("hosts", {}).items()
        }  # fmt: skip
    emit_one(summary, output)
    if output == Format.table and st.get("running"):
        rows = [{"server": n, "url": s["url"], "flavour": s.get("flavour")} for n, s in sorted(st.get("servers", {}).items())]
        emit(rows[:20], output, title=f"BMCs ({len(rows)})" + (" (first 20; --output json for all)" if len(rows) > 20 else ""))
        sws = [
            {"switch": n, "ssh": s.get("ssh"), "snmp": s.get("snmp"), "platform": s.get("platform")}
            for n, s in sorted(st.get("switches", {}).items())
        ]
        if sws:
            emit(sws, output, title=f"Switches ({len(sws)})")
        hosts = [{"host": n, "ssh": f"{h['address']}:{h['port']}", "phase": phases.get(n, {}).get("phase", "?")}
                 for n, h in sorted(st.get("hosts", {}).items())]  # fmt: skip
        if hosts:
            emit(hosts[:20], output, title=f"Hosts ({len(hosts)})" + (" (first 20; --output json for all)" if len(hosts) > 20 else ""))
    if not st.get("running"):
        raise typer.Exit(1)


def _without_community(switch: dict[str, Any], state_dir: Path, name: str) -> dict[str, Any]:
    """A lab switch's endpoints as `lab status` prints them: its SNMP community (a v2c password) never, only where it is.

    The reference is the credential file the lab's fleet uses (``file:DIR/snmp/NAME``, mode 0600); a switch the
    lab's fleet does not reach over SNMP says only whether it has one.
    """
    from fleetctl_lab.inventory import SNMP_DIR

    out = {k: v for k, v in switch.items() if k != "community"}
    if switch.get("community") is not None:
        ref = state_dir / SNMP_DIR / name
        out["community"] = f"file:{ref.absolute()}" if ref.is_file() else "set"
    else:
        out["community"] = None
    return out


def _host_phases(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{server: host info} from the control endpoint; {} when it does not answer."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(st["control_url"] + "/lab/v1/hosts", timeout=10) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError):
        return {}


@app.command("fault")
def fault(
    names: Annotated[list[str], typer.Argument(help="Server or switch names, or * for every lab BMC.")],
    set_: Annotated[list[str] | None, typer.Option("--set", help="FAULT=VALUE, e.g. latency_ms=50, psu_failed=true, crc=100.")] = None,
    port: Annotated[str | None, typer.Option("--port", help="For a switch: the port the fault is on (flap, crc, miscabled, down).")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Clear every fault (of the port, with --port).")] = False,
    board: Annotated[
        str | None,
        typer.Option("--board", help="An accelerator board of the server's host (slot, device or serial): --set fault=NAME (docs/lab.md)."),
    ] = None,
) -> None:
    """Inject faults into lab BMCs and switches while the lab runs."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from fleetctl.errors import FleetError, InputError
    from fleetctl_lab import inventory as lab

    st = lab.status()
    if not st.get("running"):
        raise FleetError(f"no lab is running from {lab.lab_dir()}; fleetctl lab up first")
    if board is not None:
        _board_fault(st, names, board, set_, clear)
        return
    faults: dict[str, object] | None = None
    if not clear:
        if not set_:
            raise InputError("give --set FAULT=VALUE or --clear")
        faults = {}
        for item in set_:
            k, sep, v = item.partition("=")
            if not sep:
                raise InputError(f"expected FAULT=VALUE, got {item!r}", field="--set")
            try:
                faults[k] = json.loads(v)
            except ValueError:
                faults[k] = v
    switches = set(st.get("switches", {}))
    on_switches = [n for n in names if n in switches]
    on_bmcs = [n for n in names if n not in switches]
    requests: list[tuple[str, str, str, dict[str, Any] | None]] = []
    if on_bmcs:
        body = {"names": "*" if on_bmcs == ["*"] else on_bmcs, "faults": faults}
        requests.append((st["control_url"], "POST", "/lab/v1/faults", body))
    for name in on_switches:
        base = st.get("switch_control_url") or st["control_url"]
        if clear:
            query = f"?port={urllib.parse.quote(port)}" if port else ""
            requests.append((base, "DELETE", f"/lab/v1/switches/{name}/faults{query}", None))
        else:
            requests.append((base, "POST", f"/lab/v1/switches/{name}/faults", {"port": port, "faults": faults}))
    for base, method, path, payload in requests:
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                typer.echo(r.read().decode()[:500] or "ok")
        except urllib.error.HTTPError as e:
            raise InputError(f"the lab refused: {e.read().decode()[:300]}") from e


def _board_fault(st: dict[str, Any], names: list[str], board: str, set_: list[str] | None, clear: bool) -> None:
    """A board fault (healthy, slow, hot, ...) in each named host's boards.json, read by the stand-ins' next run."""
    from pathlib import Path

    from fleetctl.errors import InputError
    from fleetctl_lab.host_standins import BOARD_FAULTS, set_board_fault

    if clear:
        fault = "healthy"
    else:
        items = [i.partition("=") for i in set_ or []]
        if len(items) != 1 or items[0][0] != "fault" or not items[0][1]:
            raise InputError("with --board: --set fault=NAME (one of " + ", ".join(sorted(BOARD_FAULTS)) + ") or --clear", field="--set")
        fault = items[0][2]
    hosts = st.get("hosts") or {}
    for name in names:
        if name not in hosts:
            raise InputError(f"{name}: the lab serves no host by that name", field="NAMES")
        try:
            set_board_fault(Path(hosts[name]["dir"]) / "boards.json", board, fault)
        except (ValueError, OSError) as e:
            raise InputError(f"{name}: {e}", field="--board") from e
        typer.echo(f"{name}: board {board}: {fault}")
