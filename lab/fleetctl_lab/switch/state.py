"""A lab switch's state: port configuration (running and saved), VLANs, faults.

The CLI sessions (``eos.py``, ``sonic.py``) change it; the SNMP data files
(``snmp.py``) are rendered from it. Anything that moves with time (counters,
a flapping port) is a function of the clock with its parameters kept here, so
the CLI and SNMP agree without a ticking task: the SNMP side evaluates the
same formulas in snmpsim (``snmp_variation/fleetlab.py``).
"""

from __future__ import annotations

import copy
import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetctl_lab.switch.spec import LabNeighbor, LabSwitchSpec, lab_mac

# Faults of one port; value None/False clears one.
PORT_FAULTS: dict[str, str] = {
    "flap": "link goes down and up every N seconds (True = 2 s); ifOperStatus/ifLastChange move",
    "crc": "ifInErrors grows by N per second (True = 50)",
    "miscabled": "LLDP reports another neighbour: True swaps with the next cabled port, a port name swaps "
    "with that port, {'system': ..., 'port': ...} names one",
    "down": "the link is down (cable pulled): oper down, no LLDP neighbour",
}
# Faults of the whole switch (port = None).
SWITCH_FAULTS: dict[str, str] = {
    "reboot": "the switch reboots now: sysUpTime and counters restart, unsaved changes are lost",
    "uptime_s": "the switch has been up N seconds (booted N s ago, as a switch racked long before the lab started; "
    "nothing else restarts)",
    "ssh_drop_after": "the SSH session is dropped after N more commands",
    "ssh_latency_ms": "every CLI answer is delayed by N ms",
    "overheat": "the ASIC temperature sensor reads N degrees C (True = 97)",
}


def _seconds(value: Any) -> float:
    """``uptime_s``'s value: seconds, 0 or more and finite (False/None: nothing to do)."""
    if value is None or value is False:
        return 0.0
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0 or value is True:
        raise ValueError(f"uptime_s wants seconds (0 or more), not {value!r}")
    return seconds


FLAP_PERIOD_S = 2.0
CRC_RATE = 50.0


@dataclass
class Counter:
    """A counter that grows at ``rate`` per second from ``base`` at ``t0``."""

    base: float = 0.0
    rate: float = 0.0
    t0: float = 0.0

    def value(self, now: float) -> int:
        return int(self.base + self.rate * max(0.0, now - self.t0))

    def set_rate(self, rate: float, now: float) -> None:
        self.base = float(self.value(now))
        self.t0 = now
        self.rate = rate


@dataclass
class PortConfig:
    """What the running (or saved) configuration says about a port."""

    mode: str = "access"  # access | trunk | routed
    access_vlan: int = 1
    trunk_vlans: list[int] | None = None  # None: all VLANs
    native_vlan: int | None = 1
    enabled: bool = True
    description: str = ""


@dataclass
class Port:
    name: str
    ifindex: int
    speed_mbps: int
    neighbor: LabNeighbor | None
    cfg: PortConfig
    last_change: float = 0.0
    in_octets: Counter = field(default_factory=Counter)
    out_octets: Counter = field(default_factory=Counter)
    in_errors: Counter = field(default_factory=Counter)
    share: float = 0.05  # of line rate, when up
    faults: dict[str, Any] = field(default_factory=dict)
    lldp_override: LabNeighbor | None = None
    learned: list[str] = field(default_factory=list)  # MACs behind the port besides its neighbour's


class SimSwitch:
    """One lab switch. Not thread-safe: used on the lab's event loop."""

    def __init__(self, spec: LabSwitchSpec, *, index: int = 0, utilisation: float = 0.05) -> None:
        self.spec = spec.filled()
        self.index = index
        self.name = self.spec.name
        self.platform = self.spec.platform
        self.hostname = self.spec.name
        now = time.time()
        self.boot_time = now
        self.ports: dict[str, Port] = {}
        for i, sp in enumerate(self.spec.ports, start=1):
            if sp.mode == "trunk":
                cfg = PortConfig(mode="trunk", trunk_vlans=sorted(set(sp.vlans)) or None,
                                 native_vlan=sp.native_vlan if sp.native_vlan is not None else (1 if self.platform == "eos" else None),
                                 enabled=sp.enabled, description=sp.description)  # fmt: skip
            elif sp.mode == "routed" or (self.platform == "sonic" and not sp.vlans):
                cfg = PortConfig(mode="routed", enabled=sp.enabled, description=sp.description, native_vlan=None)
            else:
                cfg = PortConfig(mode="access", access_vlan=(sp.vlans or [1])[0], enabled=sp.enabled, description=sp.description)
            # A stable per-port share of line rate around the configured mean.
            share = utilisation * (0.5 + (zlib.crc32(f"{self.name}/{sp.name}".encode()) % 1000) / 1000)
            self.ports[sp.name] = Port(sp.name, i, sp.speed_mbps, sp.neighbor, cfg, last_change=now, share=share,
                                       learned=[m.lower() for m in sp.learned])  # fmt: skip
        self.vlans: dict[int, str] = {}
        for v in ([1] if self.platform == "eos" else []) + list(self.spec.vlans):
            self.vlans.setdefault(v, "default" if v == 1 else f"VLAN{v:04d}")
        for p in self.ports.values():  # a planned VLAN exists on the switch
            for v in [p.cfg.access_vlan] if p.cfg.mode == "access" else (p.cfg.trunk_vlans or []):
                self.vlans.setdefault(v, "default" if v == 1 else f"VLAN{v:04d}")
        self.saved: dict[str, PortConfig] = copy.deepcopy({n: p.cfg for n, p in self.ports.items()})
        self.saved_vlans = dict(self.vlans)
        self.faults: dict[str, Any] = {}
        self.counters: dict[str, int] = {"logins": 0, "auth_failures": 0, "sessions_open": 0, "commands": 0,
                                         "config_changes": 0, "saves": 0, "bad_commands": 0, "drops": 0,
                                         "reboots": 0}  # fmt: skip
        self.table_changed = now
        self.on_change: Callable[[SimSwitch], None] | None = None
        self._rebase(now)

    # --- derived state ------------------------------------------------------------

    def port(self, name: str) -> Port | None:
        return self.ports.get(name)

    def cabled(self, p: Port) -> bool:
        return (p.neighbor is not None or bool(p.learned)) and not p.faults.get("down")

    def oper_up(self, p: Port, now: float | None = None) -> bool:
        if not p.cfg.enabled or not self.cabled(p):
            return False
        flap = p.faults.get("flap")
        if flap:
            now = time.time() if now is None else now
            period, t0 = flap["period"], flap["t0"]
            return int((now - t0) // period) % 2 == 1  # down first, then up, ...
        return True

    def last_change(self, p: Port, now: float | None = None) -> float:
        flap = p.faults.get("flap")
        if flap and p.cfg.enabled and self.cabled(p):
            now = time.time() if now is None else now
            period, t0 = flap["period"], flap["t0"]
            return t0 + math.floor((now - t0) / period) * period
        return p.last_change

    def lldp_neighbor(self, p: Port, now: float | None = None) -> LabNeighbor | None:
        """What LLDP learns on the port: nothing while the port is shut or the cable is out.

        A flapping link keeps its neighbour: LLDP entries live for their TTL
        (120 s), longer than a flap.
        """
        if not p.cfg.enabled or not self.cabled(p):
            return None
        nb = p.lldp_override or p.neighbor
        if nb is None:
            return None
        if not nb.chassis_id:
            nb = nb.model_copy(update={"chassis_id": lab_mac(nb.system)})
        return nb

    def mac_table(self, now: float | None = None) -> list[tuple[int, str, Port]]:
        """The MAC address table: (VLAN, MAC, port), sorted by VLAN and MAC as switches print it.

        A port learns while its link is up and it switches (a routed port, a
        SONiC port in no VLAN, learns nothing): its server neighbour's MAC (the
        NIC cabled there; a switch neighbour's own MAC stays out, as its
        control plane's would), and the MACs learned behind it. The VLAN is
        the access VLAN, or a trunk's native one (else its first allowed VLAN).
        """
        now = time.time() if now is None else now
        rows: list[tuple[int, str, Port]] = []
        for p in self.ports.values():
            if not self.oper_up(p, now) or p.cfg.mode == "routed":
                continue
            vlan = p.cfg.access_vlan if p.cfg.mode == "access" else p.cfg.native_vlan or (p.cfg.trunk_vlans or [1])[0]
            macs = list(p.learned)
            nb = p.neighbor
            if nb is not None and nb.kind == "server":
                macs.insert(0, (nb.chassis_id or lab_mac(nb.system)).lower())
            rows += [(vlan, m, p) for m in dict.fromkeys(macs)]
        rows.sort(key=lambda r: (r[0], r[1]))
        return rows

    def vlan_members(self, vlan: int) -> list[tuple[Port, bool]]:
        """Ports carrying ``vlan``: (port, tagged)."""
        out = []
        for p in self.ports.values():
            c = p.cfg
            if c.mode == "access" and c.access_vlan == vlan:
                out.append((p, False))
            elif c.mode == "trunk":
                if c.native_vlan == vlan and (c.trunk_vlans is None or vlan in c.trunk_vlans or self.platform == "sonic"):
                    out.append((p, False))
                elif (c.trunk_vlans is None or vlan in c.trunk_vlans) and vlan != c.native_vlan:
                    out.append((p, True))
        return out

    def uptime(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.boot_time

    def temperatures(self) -> list[tuple[str, int]]:
        base = 30 + self.index % 5
        asic = self.faults.get("overheat")
        return [("Inlet", base - 6), ("Outlet", base + 4), ("CPU", base + 12),
                ("ASIC", int(asic) if asic else base + 21), ("PSU1", base + 8)]  # fmt: skip

    # --- changes ------------------------------------------------------------------

    def changed(self, *, config: bool = True) -> None:
        """Something the SNMP side shows has changed; re-render it."""
        if config:
            self.counters["config_changes"] += 1
        if self.on_change is not None:
            self.on_change(self)

    def set_enabled(self, p: Port, enabled: bool) -> None:
        if p.cfg.enabled != enabled:
            now = time.time()
            p.cfg.enabled = enabled
            p.last_change = now
            self._rebase(now, [p])
        self.changed()

    def save(self) -> None:
        self.saved = copy.deepcopy({n: p.cfg for n, p in self.ports.items()})
        self.saved_vlans = dict(self.vlans)
        self.counters["saves"] += 1

    def unsaved(self) -> bool:
        return {n: p.cfg for n, p in self.ports.items()} != self.saved or self.vlans != self.saved_vlans

    def reboot(self) -> None:
        now = time.time()
        self.boot_time = now
        self.vlans = dict(self.saved_vlans)
        for n, p in self.ports.items():
            p.cfg = copy.deepcopy(self.saved[n])
            p.last_change = now
            p.in_octets, p.out_octets, p.in_errors = Counter(t0=now), Counter(t0=now), Counter(t0=now)
        self.counters["reboots"] += 1
        self._rebase(now)

    def _rebase(self, now: float, ports: list[Port] | None = None) -> None:
        """Restart each port's counters at the rates its present state implies."""
        for p in ports if ports is not None else self.ports.values():
            up = p.cfg.enabled and self.cabled(p)
            line = p.speed_mbps * 1e6 / 8
            p.in_octets.set_rate(line * p.share if up else 0.0, now)
            p.out_octets.set_rate(line * p.share * 0.8 if up else 0.0, now)
            crc = p.faults.get("crc")
            p.in_errors.set_rate(float(crc) if crc and up else 0.0, now)

    # --- faults -------------------------------------------------------------------

    def set_fault(self, port: str | None, fault: str, value: Any = True) -> dict[str, Any]:
        """Set (or, with None/False, clear) a fault; returns the faults in force."""
        now = time.time()
        if port is None:
            if fault not in SWITCH_FAULTS:
                raise ValueError(f"unknown switch fault {fault!r}; known: {sorted(SWITCH_FAULTS)} (port faults need a port)")
            if fault == "reboot":
                if value:
                    self.reboot()
            elif fault == "uptime_s":
                seconds = _seconds(value)
                if seconds:  # only the boot moves back: counters, ports and the configuration stay as they are
                    self.boot_time = now - seconds
            elif value is None or value is False:
                self.faults.pop(fault, None)
            else:
                self.faults[fault] = 97 if (fault == "overheat" and value is True) else (1 if value is True else value)
            self.changed(config=False)
            return self.faults_dict()
        p = self.ports.get(port)
        if p is None:
            raise ValueError(f"switch {self.name} has no port {port!r}")
        if fault not in PORT_FAULTS:
            raise ValueError(f"unknown port fault {fault!r}; known: {sorted(PORT_FAULTS)}")
        clear = value is None or value is False
        if fault == "miscabled":
            self._miscable(p, None if clear else value)
        elif clear:
            if p.faults.pop(fault, None) is not None:
                p.last_change = now
        elif fault == "flap":
            p.faults["flap"] = {"period": FLAP_PERIOD_S if value is True else float(value), "t0": now}
        elif fault == "crc":
            p.faults["crc"] = CRC_RATE if value is True else float(value)
        elif fault == "down":
            p.faults["down"] = True
            p.last_change = now
        self._rebase(now, [p])
        self.table_changed = now
        self.changed(config=False)
        return self.faults_dict()

    def _miscable(self, p: Port, value: Any) -> None:
        # Undo a previous swap first (both ends).
        old = p.faults.pop("miscabled", None)
        if isinstance(old, dict) and old.get("swapped_with") in self.ports:
            q = self.ports[old["swapped_with"]]
            q.lldp_override = None
            q.faults.pop("miscabled", None)
        p.lldp_override = None
        if value is None:
            return
        if isinstance(value, dict):
            p.lldp_override = LabNeighbor.model_validate({"kind": "server", **value})
            p.faults["miscabled"] = {"neighbor": p.lldp_override.model_dump()}
            return
        if value is True:
            names = [n for n, q in self.ports.items() if q.neighbor is not None]
            if p.name not in names or len(names) < 2:
                raise ValueError(f"port {p.name} has no cabled port to swap with; name a neighbour instead")
            other = names[(names.index(p.name) + 1) % len(names)]
        else:
            other = str(value)
        mate = self.ports.get(other)
        if mate is None or mate is p:
            raise ValueError(f"cannot swap {p.name} with {other!r}")
        p.lldp_override, mate.lldp_override = mate.neighbor, p.neighbor
        p.faults["miscabled"] = {"swapped_with": mate.name}
        mate.faults["miscabled"] = {"swapped_with": p.name}

    def clear_faults(self, port: str | None = None) -> None:
        """Clear every fault of one port, or of the switch and all its ports."""
        targets = [self.ports[port]] if port else list(self.ports.values())
        for p in targets:
            for f in list(p.faults):
                self.set_fault(p.name, f, None)
        if port is None:
            self.faults.clear()
            self.changed(config=False)

    def faults_dict(self) -> dict[str, Any]:
        return {"switch": dict(self.faults), "ports": {n: dict(p.faults) for n, p in self.ports.items() if p.faults}}

    # --- a view for the control endpoint --------------------------------------------

    def describe(self) -> dict[str, Any]:
        now = time.time()
        ports = {}
        for n, p in self.ports.items():
            nb = self.lldp_neighbor(p, now)
            ports[n] = {
                "ifindex": p.ifindex, "mode": p.cfg.mode,
                "access_vlan": p.cfg.access_vlan if p.cfg.mode == "access" else None,
                "trunk_vlans": p.cfg.trunk_vlans if p.cfg.mode == "trunk" else None,
                "native_vlan": p.cfg.native_vlan if p.cfg.mode == "trunk" else None,
                "enabled": p.cfg.enabled, "oper_up": self.oper_up(p, now), "description": p.cfg.description,
                "cabled_to": f"{p.neighbor.system}:{p.neighbor.port}" if p.neighbor else None,
                "lldp": f"{nb.system}:{nb.port}" if nb else None,
                "in_octets": p.in_octets.value(now), "in_errors": p.in_errors.value(now), "faults": dict(p.faults),
            }  # fmt: skip
        return {"name": self.name, "platform": self.platform, "uptime_s": round(self.uptime(now), 1),
                "vlans": sorted(self.vlans), "unsaved_changes": self.unsaved(), "counters": dict(self.counters),
                "faults": dict(self.faults), "ports": ports}  # fmt: skip
