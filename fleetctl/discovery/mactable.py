"""The switches' MAC address tables (and LLDP neighbours) as sightings.

Each switch of the inventory is read once: over SNMP (the poller's ``fdb``
part: Q-BRIDGE-MIB/BRIDGE-MIB with ifName, and ``lldp``) where the inventory
gives it SNMP settings, else over its CLI (the switch driver's ``mac_table``
capability: the platform's command and parser as data, and its LLDP
neighbours); a switch whose agent does not answer is read over its CLI
where it has a credential. ``via="both"`` reads both ways (tests compare them).

Bounded: a cap on MAC table rows per switch (kept rows, a warning past it),
one deadline for the whole read (a switch still unread then is an error
line, the others' sightings are kept), switches read concurrently under the
drivers' own bounds. The core never sees a varbind or a CLI line: only
``FdbEntry`` / ``MacEntry`` / LLDP models from the interfaces.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy.engine import Connection

from fleetctl.interfaces.snmp import ETHERNET_IF_TYPES
from fleetctl.interfaces.switch import canonical_mac

__all__ = ["MAX_ROWS", "MacSighting", "Via", "read_inventory_switches", "sightings_from_cli", "sightings_from_snmp"]

Via = Literal["auto", "snmp", "cli", "both"]
SightingSource = Literal["snmp", "cli", "lldp"]


@dataclass(frozen=True)
class MacSighting:
    """One MAC learned on one switch port.

    Attributes:
        switch: the switch's name in the inventory.
        port: the port's long name as the plan spells it (``Ethernet4``).
        mac: lower-case, colon-separated (the ``Nic.mac`` rule).
        vlan: the VLAN it was learned in, None where the table does not say.
        source: ``snmp`` (BRIDGE-MIB / Q-BRIDGE-MIB), ``cli`` (the MAC table
            command) or ``lldp`` (a neighbour's chassis id).
    """

    switch: str
    port: str
    mac: str
    vlan: int | None
    source: str  # SightingSource


#: MAC table rows kept per switch: a management switch holds one or two per
#: cabled port; a core switch tens of thousands, which say nothing about
#: where a BMC is cabled and would only cost memory.
MAX_ROWS = 16_384

#: SSH sessions at once (each a thread in the switch driver's sweep).
CLI_CONCURRENCY = 16


def sightings_from_snmp(result: Any) -> list[MacSighting]:
    """A ``PollResult`` (``fdb``, ``lldp``) -> sightings; rows on a LAG, a VLAN interface or no port are left out."""
    out: list[MacSighting] = []
    for e in result.fdb:
        if not e.port or (e.if_type is not None and e.if_type not in ETHERNET_IF_TYPES):
            continue
        out.append(MacSighting(result.target, e.port, e.mac, e.vlan, "snmp"))
    for n in result.lldp:
        mac = canonical_mac(n.remote_chassis_id)
        if mac and n.local_port:
            out.append(MacSighting(result.target, n.local_port, mac, None, "lldp"))
    return out


def sightings_from_cli(switch: str, entries: Iterable[Any], neighbors: Iterable[Any] = ()) -> list[MacSighting]:
    """``MacEntry`` rows and ``LldpNeighbor``s of one switch -> sightings."""
    out = [MacSighting(switch, e.port, e.mac, e.vlan, "cli") for e in entries]
    for n in neighbors:
        mac = canonical_mac(n.remote_chassis_id)
        if mac and n.local_port:
            out.append(MacSighting(switch, n.local_port, mac, None, "lldp"))
    return out


def _read_cli(sw: Any, limit: int) -> tuple[list[Any], list[Any]]:
    """One switch's MAC table and LLDP neighbours (an operation of the switch sweep)."""
    from fleetctl.errors import SwitchError

    entries = sw.get_mac_table(limit=limit)
    try:
        neighbors = sw.get_lldp_neighbors()
    except SwitchError:
        neighbors = []  # no LLDP on this switch (NoopLldp): the MAC table alone
    return entries, neighbors


def read_inventory_switches(
    c: Connection,
    switches: Sequence[str] | None = None,
    *,
    deadline_s: float = 60.0,
    via: Via = "auto",
    max_rows: int = MAX_ROWS,
) -> tuple[list[MacSighting], list[str]]:
    """Read the MAC tables of the inventory's switches (see :func:`fleetctl.discovery.placement.read_sightings`).

    Args:
        via: ``auto`` (SNMP where the inventory has SNMP settings, else the
            CLI; the CLI too where SNMP fails and there is a credential),
            ``snmp``, ``cli``, or ``both``.
        max_rows: MAC table rows kept per switch.

    Returns:
        The sightings and one line per switch not read (``switch: why``).

    For callers without an event loop (it runs one for the SNMP read).
    """
    from fleetctl.errors import NotFound
    from fleetctl.targets import resolve_switches, snmp_targets, switch_targets

    try:
        refs = resolve_switches(c, list(switches) if switches else ["all"])
    except NotFound:
        if switches:
            raise
        return [], []  # an inventory without switches: nothing to read
    deadline = time.monotonic() + deadline_s
    snmp_refs = [r for r in refs if via in ("snmp", "both") or (via == "auto" and r.snmp_credential)]
    cli_refs = [r for r in refs if via in ("cli", "both") or (via == "auto" and not r.snmp_credential)]
    errors: list[str] = []
    sightings: list[MacSighting] = []
    snmp_t, snmp_bad = snmp_targets(snmp_refs) if snmp_refs else ([], {})
    cli_t, cli_bad = switch_targets(cli_refs) if cli_refs else ([], {})
    errors += [f"{name}: {why}" for name, why in {**snmp_bad, **cli_bad}.items()]
    snmp_t = [t.model_copy(update={"max_fdb_rows": max_rows}) for t in snmp_t]
    cli = _CliRead(cli_t, max_rows) if cli_t else None
    if snmp_t:
        got, failed, notes = _read_snmp(snmp_t, deadline)
        sightings += got
        errors += notes
        # auto: a switch whose agent did not answer is read over its CLI, where it has a credential
        fallback = [r for r in refs if via == "auto" and r.name in failed and r.credential]
        fb_t, _ = switch_targets(fallback) if fallback else ([], {})
        if fb_t:
            got, fb_errors = _CliRead(fb_t, max_rows).collect(deadline, deadline_s)
            sightings += got
            fb_failed = {name: why for name, _, why in (e.partition(": ") for e in fb_errors)}
            for t in fb_t:
                why = failed.pop(t.name)
                if t.name in fb_failed:
                    errors.append(f"{t.name}: over SNMP: {why}; over the CLI: {fb_failed[t.name]}")
        errors += [f"{n}: {why}" for n, why in failed.items()]
    if cli is not None:
        got, cli_errors = cli.collect(deadline, deadline_s)
        sightings += got
        errors += cli_errors
    return sightings, sorted(set(errors))


class _CliRead:
    """One switch sweep reading MAC tables and LLDP, in a thread of its own, collected by a deadline."""

    def __init__(self, targets: list[Any], max_rows: int) -> None:
        from fleetctl.plugins import sweep

        self.targets = targets
        self.done: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mactable-cli")
        self.future = self.pool.submit(sweep, "switch", targets, lambda sw: _read_cli(sw, max_rows), concurrency=CLI_CONCURRENCY,
                                       progress=self._progress)  # fmt: skip

    def _progress(self, _done: int, _total: int, result: Any) -> None:
        with self.lock:
            self.done[result.target] = result

    def collect(self, deadline: float, deadline_s: float) -> tuple[list[MacSighting], list[str]]:
        crashed: str | None = None
        try:
            self.future.result(timeout=max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            pass  # the sessions end by their own timeouts; what finished is kept
        except Exception as e:  # noqa: BLE001 (a driver that cannot load: each switch not read says so)
            crashed = f"{type(e).__name__}: {e}"
        self.pool.shutdown(wait=False, cancel_futures=True)
        with self.lock:
            done = dict(self.done)
        sightings: list[MacSighting] = []
        errors: list[str] = []
        for t in self.targets:
            r = done.get(t.name)
            if r is None:
                errors.append(f"{t.name}: {crashed or f'no MAC table over the CLI within {deadline_s:g} s'}")
            elif not r.ok:
                errors.append(f"{t.name}: {r.error}")
            else:
                entries, neighbors = r.value
                sightings += sightings_from_cli(t.name, entries, neighbors)
        return sightings, errors


def _read_snmp(targets: list[Any], deadline: float) -> tuple[list[MacSighting], dict[str, str], list[str]]:
    """Poll every agent's ``fdb`` and ``lldp`` by the deadline: the sightings, why each agent not read was not,
    and a line for each MAC table cut at the row cap."""
    from fleetctl.plugins import sweep_async

    done: dict[str, Any] = {}

    def progress(_done: int, _total: int, result: Any) -> None:
        done[result.target] = result

    async def run() -> None:
        with contextlib.suppress(TimeoutError):  # the agents that answered are in ``done``
            await asyncio.wait_for(sweep_async("snmp", targets, what=("fdb", "lldp"), progress=progress),
                                   timeout=max(0.0, deadline - time.monotonic()))  # fmt: skip

    asyncio.run(run())
    out: list[MacSighting] = []
    failed: dict[str, str] = {}
    notes: list[str] = []
    for t in targets:
        r = done.get(t.name)
        if r is None:
            failed[t.name] = "no MAC table over SNMP before the deadline"
        elif not r.ok:
            failed[t.name] = str(r.error)
        else:
            out += sightings_from_snmp(r)
            notes += [f"{t.name}: {w}" for w in r.warnings if "rows; the first" in w]
    return out, failed, notes
