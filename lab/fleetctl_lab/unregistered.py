"""BMCs the lab's fleet does not hold: `fleetctl lab up --unregistered N` (issue #23 item 5).

What discovery has to find. Each unregistered BMC is served like any lab BMC
(its own loopback address, the lab's credential), cabled to a free port of
a served management switch (its MAC in that switch's MAC table, over the
CLI and SNMP; no LLDP: a BMC does not speak it), and is one of three kinds,
in turn:

- ``lease``: a server of a delivery. The lab's fleet plans it (the site
  file's server at a free unit with power to spare, in the switch's rack or
  else its site's emptiest, its ``bmc`` NIC without
  a MAC, the cable to the port) but holds no BMC for it: no address, no
  MAC, no credential. Its address is in the leases files.
- ``fixed``: the same, on a fixed address (in no leases file).
- ``unplanned``: nothing in the lab's fleet, on a port the plan cables to
  nothing; its address is in the leases files.

The leases files, written into ``<lab folder>/leases/``: ``kea-leases4.csv``
(ISC Kea's memfile CSV, the v4 header of Kea 2.x) and ``dnsmasq.leases``.
``unregistered.json`` beside them says which BMC is which (tests and
``lab status`` read it).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from fleetctl_lab.switch.spec import lab_mac

KINDS = ("lease", "fixed", "unplanned")
LEASES_DIR = "leases"
KEA_FILE = "kea-leases4.csv"
DNSMASQ_FILE = "dnsmasq.leases"
NOTE_FILE = "unregistered.json"
KEA_HEADER = "address,hwaddr,client_id,valid_lifetime,expire,subnet_id,fqdn_fwd,fqdn_rev,hostname,state,user_context,pool_id"
LEASE_S = 86_400


@dataclass
class Unregistered:
    """One unregistered BMC: where it is cabled and what the lab's fleet says of it."""

    name: str
    kind: str  # lease | fixed | unplanned
    mac: str
    serial: str
    switch: str
    port: str
    site: str
    rack: str
    position: int | None  # the planned unit (lease, fixed); None: unplanned
    model: str  # the hardware model's name in the site file
    vlan: int
    address: str | None = None  # filled once the daemon serves it


@dataclass
class Plan:
    bmcs: list[Unregistered] = field(default_factory=list)


def plan(conn: Any, count: int, sw_specs: list[Any]) -> Plan:
    """Where N unregistered BMCs go: free ports of the served management switches, free units of their racks.

    Raises:
        InputError: not enough free ports or units, or no served management switch.
    """
    from fleetctl.errors import InputError
    from fleetctl.inventory.queries import hm_t, link_t, port_t, rack_t, site_t, srv_t, sw_t

    served = {s.name: s for s in sw_specs}
    rows = conn.execute(select(sw_t.c.id, sw_t.c.name, sw_t.c.rack_id, rack_t.c.name.label("rack"), site_t.c.name.label("site"))
                        .join(rack_t, rack_t.c.id == sw_t.c.rack_id).join(site_t, site_t.c.id == rack_t.c.site_id)
                        .where(sw_t.c.role == "management").order_by(sw_t.c.name)).all()  # fmt: skip
    mgmt = [r for r in rows if r.name in served]
    if not mgmt:
        raise InputError("--unregistered: the lab serves no management switch (EOS or SONiC) to cable them to", field="--unregistered")
    model = conn.execute(select(hm_t.c.name, hm_t.c.power_peak_w).where(hm_t.c.kind == "server", hm_t.c.height == 1)
                         .order_by(hm_t.c.power_peak_w.is_(None), hm_t.c.power_peak_w, hm_t.c.name)).first()  # fmt: skip
    if model is None:
        raise InputError("--unregistered: the source declares no 1U server model for them", field="--unregistered")
    # Units taken and peak power drawn in each rack (servers and switches, by their height and model).
    racks = {r.id: r for r in conn.execute(select(rack_t.c.id, rack_t.c.name, rack_t.c.height, rack_t.c.power_budget_w,
                                                  site_t.c.name.label("site")).join(site_t, site_t.c.id == rack_t.c.site_id))}  # fmt: skip
    taken: dict[int, set[int]] = {}
    peak: dict[int, int] = {}
    for t in (srv_t, sw_t):
        for r in conn.execute(select(t.c.rack_id, t.c.position, t.c.height, hm_t.c.power_peak_w).join(hm_t, hm_t.c.id == t.c.model_id)):
            taken.setdefault(r.rack_id, set()).update(range(r.position, r.position + (r.height or 1)))
            peak[r.rack_id] = peak.get(r.rack_id, 0) + (r.power_peak_w or 0)

    def unit_for(sw: Any) -> tuple[Any, int] | None:
        """A free unit with power to spare: the switch's own rack first, then its site's emptiest."""
        own = racks[sw.rack_id]
        others = sorted((r for r in racks.values() if r.site == own.site and r.id != own.id),
                        key=lambda r: len(taken.get(r.id, set())) - r.height)  # fmt: skip
        for rack in (own, *others):
            free = [u for u in range(1, rack.height + 1) if u not in taken.get(rack.id, set())]
            room = rack.power_budget_w is None or peak.get(rack.id, 0) + (model.power_peak_w or 0) <= rack.power_budget_w
            if free and room:
                taken.setdefault(rack.id, set()).add(free[0])
                peak[rack.id] = peak.get(rack.id, 0) + (model.power_peak_w or 0)
                return rack, free[0]
        return None
    # The VLAN of each management switch's server cables (the BMC network).
    vlans: dict[int, int] = {}
    for r in conn.execute(select(port_t.c.switch_id, link_t.c.vlans).join(link_t, link_t.c.port_id == port_t.c.id)
                          .where(link_t.c.nic_id.is_not(None))):  # fmt: skip
        first = str(r.vlans or "").split(",")[0].strip()
        if first.isdigit():
            vlans.setdefault(r.switch_id, int(first))
    slots: list[tuple[Any, Any]] = []  # (switch row, free port spec), round robin over the switches
    def free(port: Any) -> bool:
        return port.neighbor is None and not port.learned and not port.name.lower().startswith(("management", "mgmt"))

    free_ports = {r.name: [p for p in served[r.name].ports if free(p)] for r in mgmt}
    while len(slots) < count and any(free_ports.values()):
        for r in mgmt:
            if free_ports[r.name] and len(slots) < count:
                slots.append((r, free_ports[r.name].pop(0)))
    if len(slots) < count:
        raise InputError(f"--unregistered {count}: the served management switches have {len(slots)} free ports", field="--unregistered")
    out = Plan()
    for i, (sw, port) in enumerate(slots, start=1):
        kind = KINDS[(i - 1) % len(KINDS)]
        position, rack_name = None, sw.rack
        if kind != "unplanned":
            spot = unit_for(sw)
            if spot is None:
                raise InputError(f"--unregistered {count}: site {sw.site} has no free unit with power to spare left",
                                 field="--unregistered")  # fmt: skip
            rack_name, position = spot[0].name, spot[1]
        name = f"unreg-{i:03d}"
        out.bmcs.append(Unregistered(name=name, kind=kind, mac=lab_mac(f"unregistered/{name}"), serial=f"UNREG{i:05d}",
                                     switch=sw.name, port=port.name, site=sw.site, rack=rack_name, position=position,
                                     model=model.name, vlan=vlans.get(sw.id, 1)))  # fmt: skip
        port.learned = [out.bmcs[-1].mac]  # the switch learns the BMC's MAC there
    return out


def server_specs(p: Plan, template: Any, password: str) -> list[Any]:
    """A LabServerSpec per unregistered BMC, of the template's vendor and model (its BMC NIC carries the MAC)."""
    from fleetctl_lab.bmc.spec import LabNic

    return [template.model_copy(update={"name": b.name, "serial": b.serial, "password": password, "boards": [], "address": None,
                                        "nics": [LabNic(name="bmc", mac=b.mac, speed_mbps=1000)]})  # fmt: skip
            for b in p.bmcs]  # fmt: skip


def add_to_fleet(doc: dict[str, Any], p: Plan) -> None:
    """The planned ones (lease, fixed) into the lab's fleet document: a server without a BMC, its cable."""
    for site in doc.get("sites", []):
        for rack in site.get("racks", []):
            for b in p.bmcs:
                if b.kind == "unplanned" or b.site != site["name"] or b.rack != rack["name"]:
                    continue
                rack.setdefault("servers", []).append({"name": b.name, "serial": b.serial, "model": b.model, "position": b.position,
                                                       "nics": [{"name": "bmc"}]})  # fmt: skip
        for b in p.bmcs:
            if b.kind != "unplanned" and b.site == site["name"]:
                site.setdefault("cabling", []).append({"switch": b.switch, "port": b.port, "server": b.name, "nic": "bmc",
                                                       "vlans": [b.vlan]})  # fmt: skip


def write_files(sd: Path, p: Plan, servers: dict[str, Any], now: float | None = None) -> dict[str, str]:
    """The leases files (Kea CSV, dnsmasq) and unregistered.json; returns their paths by name."""
    now = time.time() if now is None else now
    folder = sd / LEASES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for b in p.bmcs:
        url = str((servers.get(b.name) or {}).get("url") or "")
        b.address = url.split("://", 1)[-1].rsplit(":", 1)[0] or None
    leased = [b for b in p.bmcs if b.kind != "fixed" and b.address]
    expire = int(now) + LEASE_S
    kea = [KEA_HEADER] + [f"{b.address},{b.mac},,{LEASE_S},{expire},1,0,0,{b.name},0,,0" for b in leased]
    dnsmasq = [f"{expire} {b.mac} {b.address} {b.name} 01:{b.mac}" for b in leased]
    paths = {"kea": folder / KEA_FILE, "dnsmasq": folder / DNSMASQ_FILE}
    paths["kea"].write_text("\n".join(kea) + "\n")
    paths["dnsmasq"].write_text("\n".join(dnsmasq) + ("\n" if dnsmasq else ""))
    note = {"leases": {k: str(v) for k, v in paths.items()}, "bmcs": [asdict(b) for b in p.bmcs]}
    (folder / NOTE_FILE).write_text(json.dumps(note, indent=1))
    return {k: str(v) for k, v in paths.items()}


def clear(sd: Path) -> None:
    """Forget a previous lab's unregistered BMCs (a new `lab up` writes its own)."""
    folder = sd / LEASES_DIR
    for name in (KEA_FILE, DNSMASQ_FILE, NOTE_FILE):
        (folder / name).unlink(missing_ok=True)


def read_note(sd: Path) -> dict[str, Any] | None:
    """unregistered.json of the lab in ``sd``, or None."""
    try:
        return dict(json.loads((sd / LEASES_DIR / NOTE_FILE).read_text()))
    except (OSError, ValueError):
        return None


__all__ = ["KINDS", "Plan", "Unregistered", "add_to_fleet", "clear", "plan", "read_note", "server_specs", "write_files"]
