"""`fleetctl discover`: find the BMCs on a management network and propose their site-file entries.

Read only: nothing is written to the store; ``--write FILE`` writes a site
file for ``fleetctl inventory import``. Every input is checked before the
first packet (a bad one is one line, exit 2, nothing probed). See
docs/discovery.md.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from fleetctl.cli.common import a_path, finite, non_empty, output_file, seconds, whole


class PlanFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


def command(
    ranges: Annotated[
        list[str] | None,
        typer.Option(
            "--range", metavar="CIDR", help="A CIDR range to probe (repeatable); larger than a /16 needs --yes.", callback=non_empty
        ),
    ] = None,
    leases: Annotated[
        list[Path] | None,
        typer.Option(
            "--leases", metavar="FILE", help="A DHCP lease file: its addresses are probed, its MACs placed (repeatable).", parser=a_path
        ),
    ] = None,
    leases_format: Annotated[
        str | None, typer.Option("--leases-format", metavar="FORMAT", help="kea, dnsmasq or dhcpd (default: detected from the content).")
    ] = None,
    ssdp: Annotated[bool, typer.Option("--ssdp", help="Also ask by SSDP M-SEARCH (urn:dmtf-org:service:redfish-rest:1).")] = False,
    ssdp_wait: Annotated[
        float, typer.Option("--ssdp-wait", metavar="SECONDS", help="Seconds to collect SSDP answers.", callback=seconds(0, 60, above=True))
    ] = 3.0,
    ssdp_interface: Annotated[
        str | None,
        typer.Option("--ssdp-interface", metavar="ADDRESS", help="The local IPv4 address to send the M-SEARCH from.", callback=non_empty),
    ] = None,
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="The TCP port of the Redfish service.", parser=whole(1, 65535))] = 443,
    credential: Annotated[
        str | None,
        typer.Option(
            "--credential", metavar="REF", help="Log in with this reference and read serial, model, NICs, boards.", callback=non_empty
        ),
    ] = None,
    expect: Annotated[
        Path | None,
        typer.Option("--expect", metavar="SHEET", help="A delivery sheet (CSV: serial, bmc_mac, model) to check against.", parser=a_path),
    ] = None,
    switches: Annotated[
        list[str] | None,
        typer.Option(
            "--switches",
            metavar="TARGET",
            help="Read only these switches' MAC tables (TARGETs as `switch` takes them).",
            callback=non_empty,
        ),  # fmt: skip
    ] = None,
    no_switches: Annotated[bool, typer.Option("--no-switches", help="Do not read the switches: no placement.")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", metavar="N", help="Connections open at once.", parser=whole(1, 65536))] = 512,
    per_subnet: Annotated[
        int, typer.Option("--per-subnet", metavar="N", help="Connections open at once into one /24.", parser=whole(1, 65536))
    ] = 64,
    rate: Annotated[
        float, typer.Option("--rate", metavar="PER_SECOND", help="New connections per second.", callback=finite(0, above=True))
    ] = 2000.0,
    connect_timeout: Annotated[
        float,
        typer.Option(
            "--connect-timeout", metavar="SECONDS", help="Seconds for TCP connect and TLS handshake.", callback=seconds(0, 300, above=True)
        ),
    ] = 3.0,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", metavar="SECONDS", help="Seconds for one address, first byte to last.", callback=seconds(0, 600, above=True)
        ),
    ] = 10.0,
    yes: Annotated[bool, typer.Option("--yes", help="Probe a range larger than a /16, or one holding this machine's own address.")] = False,
    write: Annotated[
        Path | None, typer.Option("--write", metavar="FILE", help="Write the proposed site-file entries to this file.", parser=output_file)
    ] = None,
    output: Annotated[PlanFormat, typer.Option("--output", "-o", help="table, json or yaml.")] = PlanFormat.table,
) -> None:
    """Find BMCs (ranges, DHCP leases, SSDP), place them from the switches, and propose site-file entries.

    Never logs in unless --credential is given; never writes to the inventory.
    Exit 1 when something needs a person: a placement problem, a declared
    server not found, or (with --expect) an expected server not found.
    """
    import asyncio

    from fleetctl.discovery import leases as lease_io
    from fleetctl.discovery import probe
    from fleetctl.discovery.expect import read_sheet
    from fleetctl.errors import InputError
    from fleetctl.secrets import validate_ref

    # ---- every input checked before anything is sent
    if leases_format is not None and leases_format not in lease_io.FORMATS:
        raise InputError(f"{leases_format!r} is not a lease format ({', '.join(lease_io.FORMATS)})", field="--leases-format")
    if leases_format is not None and not leases:
        raise InputError("--leases-format needs --leases FILE", field="--leases-format")
    if not (ranges or leases or ssdp or expect):
        raise InputError("nothing to discover: give --range CIDR, --leases FILE, --ssdp or --expect SHEET")
    networks = [probe.parse_range(r, yes=yes) for r in ranges or []]
    if sum(n.num_addresses for n in networks) > probe.MAX_ADDRESSES:
        raise InputError(f"the ranges hold {sum(n.num_addresses for n in networks):,} addresses; one pass probes at most "
                         f"{probe.MAX_ADDRESSES:,}: split them", field="--range")  # fmt: skip
    probe.check_not_own(networks, yes=yes)
    held: list[tuple[str, Any]] = []
    for path in leases or []:
        _fmt, found_leases = lease_io.read_leases(path, leases_format)
        held += [(path.name, lease) for lease in found_leases]
    lease_addrs = [lease.address for _, lease in held]
    probe.check_not_own([probe.parse_range(a, what="--leases") for a in dict.fromkeys(lease_addrs)], yes=yes)
    sheet = read_sheet(expect) if expect is not None else []
    if credential is not None:
        from fleetctl.errors import SecretError

        try:
            validate_ref(credential)
        except SecretError as e:
            raise InputError(str(e), field="--credential") from None
    if ssdp_interface is not None:
        import ipaddress

        try:
            ipaddress.IPv4Address(ssdp_interface)
        except ValueError:
            raise InputError(f"{ssdp_interface!r} is not an IPv4 address", field="--ssdp-interface") from None
        if not ssdp:
            raise InputError("--ssdp-interface needs --ssdp", field="--ssdp-interface")

    limits = probe.ProbeLimits(concurrency=concurrency, per_subnet=per_subnet, rate=rate, connect_timeout=connect_timeout,
                               deadline=timeout)  # fmt: skip
    addresses: list[str] = []
    for net in networks:
        addresses += probe.host_addresses(net)
    addresses += lease_addrs
    by_port: dict[int, list[str]] = {port: addresses} if addresses else {}
    ssdp_addrs: list[str] = []
    if ssdp:
        from fleetctl.discovery.ssdp import search

        for reply in search(ssdp_wait, interface=ssdp_interface):
            ssdp_addrs.append(reply.address)
            by_port.setdefault(reply.port, []).append(reply.address)

    async def run() -> probe.ProbeReport:
        total = probe.ProbeReport()
        for p, addrs in by_port.items():
            r = await probe.probe_addresses(addrs, p, limits=limits, named=lease_addrs)
            total.found += r.found
            total.failures.update(r.failures)
            total.counts.update(r.counts)
            total.probed += r.probed
            total.seconds += r.seconds
        return total

    report = asyncio.run(run()) if by_port else probe.ProbeReport()
    _discover_rest(report, held, sheet, expect, ssdp_addrs, credential, switches, no_switches, port, write, output,
                   probed=set(addresses) | set(ssdp_addrs))  # fmt: skip


def _discover_rest(report: Any, held: list[tuple[str, Any]], sheet: list[Any], expect: Path | None, ssdp_addrs: list[str],
                   credential: str | None, switches: list[str] | None, no_switches: bool, port: int, write: Path | None,
                   output: PlanFormat, *, probed: set[str]) -> None:  # fmt: skip
    """Everything after the probe: inspection, the sheet, placement, the plan, its output."""
    import sys

    from fleetctl.cli.common import conn
    from fleetctl.discovery.plan import build_plan, gather, lay_sheet, render_fragment
    from fleetctl.inventory.snapshot import read_inventory

    found = gather(report.found, held, report.failures, ssdp=ssdp_addrs)
    if credential is not None:
        from fleetctl.discovery.inspect import inspect_found

        inspect_found(found, credential)
    where = expect.name if expect is not None else ""
    if sheet:
        lay_sheet(found, sheet, where)
    switch_errors: list[str] = []
    placed: dict[str, Any] = {}
    with conn() as c:
        inventory = read_inventory(c)
        macs = {m for f in found for m in f.macs} | {e.bmc_mac for e in sheet}
        has_switches = any(r.switches for s in inventory.sites for r in s.racks)
        if macs and has_switches and not no_switches:
            from fleetctl.discovery.placement import place, read_sightings

            sightings, switch_errors = read_sightings(c, switches)
            placed = place(c, sightings, macs)
    for f in found:
        at = next((m for m in f.macs if m in placed), None)
        if at is not None:
            f.placement = placed[at]
    plan = build_plan(inventory, found, probed=probed, port=port)
    expect_rows, unexpected = _expectations(sheet, found, placed, where) if sheet else ([], [])

    if write is not None:
        text = render_fragment(inventory, plan)
        write.write_text(text, encoding="utf-8")
    counts = plan.counts()
    if output != PlanFormat.table:
        payload: dict[str, Any] = {
            "probed": report.probed, "answers": dict(report.counts), "seconds": round(report.seconds, 3), **plan.as_dict(),
            "switch_errors": switch_errors, "failures": report.failures,
        }  # fmt: skip
        if sheet:
            payload["expected"] = expect_rows
            payload["unexpected"] = unexpected
        if write is not None:
            payload["written"] = str(write)
        if output == PlanFormat.json:
            import json

            sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
        else:
            import yaml

            sys.stdout.write(yaml.safe_dump(payload, sort_keys=False, allow_unicode=True))
    else:
        _print_tables(report, plan, switch_errors, expect_rows, unexpected, write)
    problems = counts["problem"] + counts["missing"] + sum(1 for r in expect_rows if r["status"] != "found")
    if problems:
        raise typer.Exit(1)


def _expectations(
    sheet: list[Any], found: list[Any], placed: dict[str, Any], where: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each sheet row: found or not, where cabled; and what was found that no row expects."""
    by_mac = {m: f for f in found for m in f.macs}
    by_serial = {f.serial: f for f in found if f.serial}
    rows = []
    matched: set[str] = set()
    for e in sheet:
        f = by_mac.get(e.bmc_mac) or by_serial.get(e.serial)
        p = placed.get(e.bmc_mac)
        cabled = None
        problem = None
        if p is not None and getattr(p, "kind", None) is None:
            cabled = f"{p.site}/{p.rack} U{p.position} ({p.switch}:{p.port})"
        elif p is not None:
            problem = f"{p.kind}: {p.detail}"
        status = "found" if f is not None and f.root is not None else "no redfish answer" if f is not None else "not found"
        if f is not None:
            matched.add(f.address)
        rows.append({"serial": e.serial, "bmc_mac": e.bmc_mac, "model": e.model, "line": f"{where}:{e.line}", "status": status,
                     "address": f.address if f else None, "cabled": cabled, "placement_problem": problem})  # fmt: skip
    unexpected = [{"address": f.address, "mac": f.mac, "serial": f.serial, "url": f.root.url if f.root else None,
                   "vendor": f.root.vendor if f.root else None, "product": f.root.product if f.root else None}
                  for f in found if f.address not in matched and f.root is not None]  # fmt: skip
    return rows, unexpected


def _print_tables(report: Any, plan: Any, switch_errors: list[str], expect_rows: list[dict[str, Any]],
                  unexpected: list[dict[str, Any]], write: Path | None) -> None:  # fmt: skip
    from fleetctl.cli.output import Format, console, emit

    answers = ", ".join(f"{n} {k}" for k, n in sorted(report.counts.items(), key=lambda kv: -kv[1]))
    console(stderr=True).print(f"probed {report.probed} addresses in {report.seconds:.1f} s: {answers or 'none'}", highlight=False)
    for line in switch_errors:
        console(stderr=True).print(f"warning: {line}", highlight=False, markup=False)
    rows = []
    for p in plan.proposals:
        f = p.found
        where = f"{p.site}/{p.rack} U{p.position}" if p.site else ""
        changes = "; ".join(f"{k}: {a or '-'} -> {b}" for k, (a, b) in p.changes.items())
        rows.append({"kind": p.kind, "address": f.label, "server": p.server or "", "where": where, "serial": f.serial or "",
                     "mac": f.mac or "", "vendor": (f.root.vendor if f.root else "") or "",
                     "product": (f.root.product if f.root else "") or "",
                     "model": p.model or "", "changes / detail": changes or p.detail})  # fmt: skip
    styles = {"kind": lambda v: {"adopt": "green", "moved": "yellow", "problem": "bold red", "unplaced": "cyan"}.get(v)}
    emit(rows, Format.table, title="found", styles=styles)
    if plan.missing:
        emit([m.as_dict() for m in plan.missing], Format.table, title="declared, not found")
    if plan.silent:
        emit([{"address": f.address, "mac": f.mac or "", "hostname": f.hostname or "", "reason": f.probe_error or ""}
              for f in plan.silent], Format.table, title="leased, no Redfish answer")  # fmt: skip
    if expect_rows:
        emit(expect_rows, Format.table, title="expected",
             columns=["serial", "bmc_mac", "model", "status", "address", "cabled", "placement_problem"],
             styles={"status": lambda v: "green" if v == "found" else "bold red"})  # fmt: skip
        emit(unexpected, Format.table, title="on the network, not expected")
    counts = plan.counts()
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "nothing found"
    console(stderr=True).print(summary + (f"; proposed entries written to {write}" if write else ""), highlight=False)
