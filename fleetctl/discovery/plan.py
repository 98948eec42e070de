"""From what was found to proposed site-file entries: a plan, never a write to the store.

Each BMC found (a service root, a lease, an SSDP answer, what logging in read)
is matched against the inventory's declared servers, in this order, and the
first that answers decides:

1. the serial (read by ``--credential`` or given by the delivery sheet for its
   BMC MAC) equals a declared serial;
2. its BMC MAC (a lease's, the sheet's) equals a declared NIC's MAC;
3. its certificate's fingerprint equals a declared server's pinned one;
4. its address is a declared server's BMC address;
5. the switches place its MAC on a port the cabling plan gives to a declared
   server (``fleetctl.discovery.placement``).

A matched server whose BMC address differs is a *change* of address (never a
new server); one without a BMC yet is *adopted* (BMC, fingerprint, MAC, and
the serial and model where its entry holds placeholders); one whose entry
already says all of it is *unchanged*. A BMC matched by nothing and placed
nowhere is *unplaced*: a new server that needs a rack and a position from a
person. Declared servers whose BMC address was probed (a range or a lease)
and that answered nowhere are *missing*.

The proposal is written (``--write``) as the affected sites whole, as
``inventory export`` would write them, with the proposed values in place and
each one's source as a comment: ``inventory import`` replaces a site named in
a file as a whole, so a fragment holding only the changed servers would
remove the others.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from fleetctl.discovery.expect import Expected
from fleetctl.discovery.leases import Lease
from fleetctl.discovery.probe import ServiceRoot
from fleetctl.inventory.edits import UNIDENTIFIED_MODEL, is_placeholder_serial
from fleetctl.inventory.schema import ModelSpec, ServerSpec, SiteFile

#: The NIC name a BMC's port has in the site files (inventory/site-tyo1.yaml, the lab's sites).
BMC_NIC = "bmc"

KINDS = ("adopt", "moved", "unchanged", "unplaced", "problem")


@dataclass
class Inspected:
    """What logging in to a BMC read (``--credential``): as ``server inspect`` reads it."""

    serial: str | None = None
    model: str | None = None
    manufacturer: str | None = None
    uuid: str | None = None
    nics: list[tuple[str, str]] = field(default_factory=list)  # (name, mac) of the system's NICs
    boards: list[Any] = field(default_factory=list)  # fleetctl.interfaces.bmc.Board
    error: str | None = None
    bmc_macs: list[str] = field(default_factory=list)  # the BMC's own interfaces (its Managers' EthernetInterfaces)
    mac_error: str | None = None


@dataclass
class Found:
    """One BMC on the network, with everything every source said about it.

    ``sources`` maps a fact (``bmc``, ``mac``, ``serial``, ``model``,
    ``position``) to where it came from (``range probe 10.0.0.5:443``,
    ``lease kea.csv:12``, ``switch mgmt-1:Ethernet5``, ``inspect``, ``sheet
    delivery.csv:4``), for the plan's comments.
    """

    address: str
    root: ServiceRoot | None = None
    mac: str | None = None
    hostname: str | None = None
    inspected: Inspected | None = None
    placement: Any = None  # Placement | PlacementProblem | None
    expected: Expected | None = None
    probe_error: str | None = None
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def serial(self) -> str | None:
        if self.inspected and self.inspected.serial:
            return self.inspected.serial
        return self.expected.serial if self.expected else None

    @property
    def macs(self) -> list[str]:
        """Every MAC known to be this BMC's: the lease's, then what logging in read."""
        out = [self.mac] if self.mac else []
        if self.inspected:
            out += [m for m in self.inspected.bmc_macs if m not in out]
        return out

    @property
    def label(self) -> str:
        return self.root.url if self.root else self.address


@dataclass
class Proposal:
    """What the plan proposes for one BMC found.

    ``kind``: ``adopt`` (a declared server gets its BMC), ``moved`` (a declared
    server's BMC address changed), ``unchanged``, ``unplaced`` (a new server
    with no known place), ``problem`` (placement or identity that cannot be
    settled: said, never guessed). ``changes``: field -> (old, new).
    """

    kind: str
    found: Found
    server: str | None = None
    site: str | None = None
    rack: str | None = None
    position: int | None = None
    model: str | None = None
    matched_by: str | None = None
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        f = self.found
        return {
            "kind": self.kind, "server": self.server, "site": self.site, "rack": self.rack, "position": self.position,
            "address": f.address, "url": f.root.url if f.root else None, "mac": f.mac, "serial": f.serial,
            "bmc_macs": f.macs, "uuid": f.root.uuid if f.root else None, "vendor": f.root.vendor if f.root else None,
            "product": f.root.product if f.root else None, "redfish_version": f.root.redfish_version if f.root else None,
            "fingerprint": f.root.fingerprint if f.root else None, "model": self.model, "matched_by": self.matched_by,
            "changes": {k: {"from": a, "to": b} for k, (a, b) in self.changes.items()},
            "sources": dict(f.sources), "detail": self.detail,
        }  # fmt: skip


@dataclass
class Missing:
    """A declared server whose BMC address was probed and did not answer as a Redfish service."""

    server: str
    site: str
    rack: str
    bmc: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "site": self.site, "rack": self.rack, "bmc": self.bmc, "reason": self.reason}


@dataclass
class DiscoveryPlan:
    proposals: list[Proposal] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    new_models: list[dict[str, Any]] = field(default_factory=list)
    # Leased addresses that gave no service root and match nothing declared: listed, proposed as nothing.
    silent: list[Found] = field(default_factory=list)

    def of(self, kind: str) -> list[Proposal]:
        return [p for p in self.proposals if p.kind == kind]

    def counts(self) -> dict[str, int]:
        out = {k: len(self.of(k)) for k in KINDS}
        out["missing"] = len(self.missing)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"counts": self.counts(), "proposals": [p.as_dict() for p in self.proposals],
                "missing": [m.as_dict() for m in self.missing], "new_models": self.new_models,
                "no_redfish_answer": [{"address": f.address, "mac": f.mac, "hostname": f.hostname, "reason": f.probe_error,
                                       "source": f.sources.get("mac")} for f in self.silent]}  # fmt: skip


# ---------------------------------------------------------------- gathering


def gather(
    roots: Iterable[ServiceRoot],
    leases: Iterable[tuple[str, Lease]] = (),
    failures: Mapping[str, str] | None = None,
    *,
    ssdp: Iterable[str] = (),
) -> list[Found]:
    """One :class:`Found` per address: the service roots, with each lease's MAC laid on its address.

    ``leases`` are (file name, lease). A leased address that gave no service
    root is kept (``probe_error``: why) so that its MAC can still be placed and
    matched against a delivery sheet. ``ssdp`` are the addresses that answered
    an M-SEARCH.
    """
    by_addr: dict[str, Found] = {}
    ssdp_set = set(ssdp)
    for r in roots:
        f = by_addr.setdefault(r.address, Found(r.address))
        f.root = r
        f.sources["bmc"] = f"{'ssdp + ' if r.address in ssdp_set else ''}range probe {r.address}:{r.port}"
    for where, lease in leases:
        f = by_addr.setdefault(lease.address, Found(lease.address))
        if lease.mac:
            f.mac = lease.mac
            f.sources["mac"] = f"lease {where}:{lease.line}"
        f.hostname = lease.hostname
        if f.root is None:
            f.probe_error = (failures or {}).get(lease.address, "no answer")
        else:
            f.sources["bmc"] = f"lease {where}:{lease.line}, probed {f.root.address}:{f.root.port}"
    return sorted(by_addr.values(), key=lambda f: ipaddress.ip_address(f.address))


def lay_sheet(found: list[Found], sheet: Sequence[Expected], where: str) -> None:
    """Tie each sheet row to what was found with its BMC MAC (or, after inspection, its serial)."""
    by_mac = {e.bmc_mac: e for e in sheet}
    by_serial = {e.serial: e for e in sheet}
    for f in found:
        e = next((by_mac[m] for m in f.macs if m in by_mac), None)
        if e is None and f.inspected and f.inspected.serial:
            e = by_serial.get(f.inspected.serial)
        if e is not None:
            f.expected = e
            if not (f.inspected and f.inspected.serial):
                f.sources["serial"] = f"sheet {where}:{e.line}"
            if e.model:
                f.sources.setdefault("model", f"sheet {where}:{e.line}")


# ---------------------------------------------------------------- matching


@dataclass
class _Declared:
    site: str
    rack: str
    spec: ServerSpec


def _bmc_host(url: str | None) -> tuple[str | None, int | None]:
    if not url:
        return None, None
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _is_ip(host: str | None) -> bool:
    if not host:
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def build_plan(
    inventory: SiteFile,
    found: Sequence[Found],
    *,
    probed: Iterable[str] = (),
    port: int = 443,
) -> DiscoveryPlan:
    """Match what was found against the inventory (see the module's docstring) and propose the entries.

    Args:
        inventory: the store's inventory (``fleetctl.inventory.snapshot.read_inventory``).
        found: :func:`gather`'s output, placements and inspections laid on.
        probed: every address probed this pass (for *missing*).
        port: the port probed (a declared BMC on another port was not probed).
    """
    from fleetctl.workflows.inspect import match_model

    declared: list[_Declared] = [_Declared(s.name, r.name, srv) for s in inventory.sites for r in s.racks for srv in r.servers]
    by_name = {x.spec.name: x for x in declared}
    by_serial = {x.spec.serial: x for x in declared if not is_placeholder_serial(x.spec.name, x.spec.serial)}
    by_mac: dict[str, _Declared] = {}
    for x in declared:
        for nic in x.spec.nics:
            if nic.mac:
                by_mac[nic.mac] = x
    by_fp = {x.spec.fingerprint: x for x in declared if x.spec.fingerprint}
    by_addr: dict[tuple[str, int], _Declared] = {}
    for x in declared:
        host, bmc_port = _bmc_host(x.spec.bmc)
        if host and bmc_port:
            by_addr[(host, bmc_port)] = x
    models = list(inventory.models)
    plan = DiscoveryPlan()
    taken: dict[str, Proposal] = {}  # declared server -> the proposal that claimed it

    for f in found:
        root = f.root
        d: _Declared | None = None
        how = None
        if f.serial and f.serial in by_serial:
            d, how = by_serial[f.serial], "serial"
        elif any(m in by_mac for m in f.macs):
            d, how = by_mac[next(m for m in f.macs if m in by_mac)], "bmc mac"
        elif root and root.fingerprint and root.fingerprint in by_fp:
            d, how = by_fp[root.fingerprint], "fingerprint"
        elif root and (root.address, root.port) in by_addr:
            d, how = by_addr[(root.address, root.port)], "address"
        place = f.placement
        if root is None:
            # A lease that gave no service root: a BMC not answering yet, or no BMC at all (a laptop on the network).
            target = d
            if target is None and place is not None and getattr(place, "kind", None) is None:
                target, how = by_name.get(place.server or ""), f"switch port {place.switch}:{place.port}"
            if target is None:
                plan.silent.append(f)
            else:
                plan.proposals.append(Proposal("problem", f, server=target.spec.name, matched_by=how,
                                               detail=f"its BMC MAC {f.mac} holds the lease {f.address}, which gave no "
                                                      f"Redfish answer ({f.probe_error or 'no answer'})"))  # fmt: skip
            continue
        if place is not None and getattr(place, "kind", None) is not None:  # a PlacementProblem
            if d is None:
                plan.proposals.append(Proposal("problem", f, detail=f"{place.kind}: {place.detail}"))
                continue
        elif place is not None:
            f.sources["position"] = f"switch {place.switch}:{place.port}"
            if d is None and place.server in by_name:
                d, how = by_name[place.server], f"switch port {place.switch}:{place.port}"
            elif d is not None and place.server is not None and place.server != d.spec.name:
                plan.proposals.append(Proposal(
                    "problem", f, server=d.spec.name, matched_by=how,
                    detail=f"matched {d.spec.name} by {how}, but cabled to {place.switch}:{place.port}, "
                           f"which the plan gives to {place.server}",
                ))  # fmt: skip
                continue
        if d is None:
            p = Proposal("unplaced", f, detail="matched no declared server and no switch port of the plan saw its MAC")
            _propose_model(p, f, models, plan, match_model)
            plan.proposals.append(p)
            continue
        if d.spec.name in taken:
            other = taken[d.spec.name].found
            plan.proposals.append(Proposal("problem", f, server=d.spec.name, matched_by=how,
                                           detail=f"{d.spec.name} is matched by {other.label} too"))  # fmt: skip
            continue
        if f.serial and not is_placeholder_serial(d.spec.name, d.spec.serial) and f.serial != d.spec.serial:
            plan.proposals.append(Proposal(
                "problem", f, server=d.spec.name, matched_by=how,
                detail=f"matched {d.spec.name} by {how}, but its serial is {f.serial}, not the declared {d.spec.serial}",
            ))  # fmt: skip
            continue
        p = Proposal("unchanged", f, server=d.spec.name, site=d.site, rack=d.rack, position=d.spec.position,
                     model=d.spec.model, matched_by=how)  # fmt: skip
        _changes(p, d.spec, f, port)
        if d.spec.model == UNIDENTIFIED_MODEL:
            _propose_model(p, f, models, plan, match_model)
            if p.model and p.model != d.spec.model:
                p.changes["model"] = (d.spec.model, p.model)
        if "bmc" in p.changes:
            p.kind = "moved" if p.changes["bmc"][0] else "adopt"
        elif p.changes:
            p.kind = "adopt"
        taken[d.spec.name] = p
        plan.proposals.append(p)

    probed_set = set(probed)
    for x in declared:
        if x.spec.name in taken:
            continue
        host, bmc_port = _bmc_host(x.spec.bmc)
        if host and _is_ip(host) and host in probed_set and bmc_port == port:
            plan.missing.append(Missing(x.spec.name, x.site, x.rack, x.spec.bmc or "", "its BMC address was probed: no Redfish answer"))
    return plan


def _changes(p: Proposal, spec: ServerSpec, f: Found, port: int) -> None:
    root = f.root
    if root is not None:
        if spec.bmc != root.url:
            old_host, old_port = _bmc_host(spec.bmc)
            if not (old_host == root.address and old_port == root.port):
                p.changes["bmc"] = (spec.bmc, root.url)
        if root.fingerprint and spec.fingerprint != root.fingerprint:
            p.changes["fingerprint"] = (spec.fingerprint, root.fingerprint)
            f.sources["fingerprint"] = f"TLS certificate at {root.address}:{root.port}"
    if f.mac:
        nic = next((n for n in spec.nics if n.name == BMC_NIC), None)
        if nic is None or nic.mac is None:
            p.changes[f"nics.{BMC_NIC}.mac"] = (None, f.mac)
        elif nic.mac not in f.macs:
            # The declared MAC is the operator's word (as in `server inspect`): a difference is said, never written over.
            p.detail = f"the inventory's {BMC_NIC} MAC is {nic.mac}; the BMC's: {', '.join(f.macs)}"
    serial = f.serial
    if serial and is_placeholder_serial(spec.name, spec.serial):
        p.changes["serial"] = (spec.serial, serial)


def _propose_model(p: Proposal, f: Found, models: list[ModelSpec], plan: DiscoveryPlan, match_model: Any) -> None:
    """The declared model the BMC's words match, or a new one (only from inspection or the sheet, never a Product alone).

    ServiceRoot.Product is a model on some BMCs (HPE: ProLiant DL325 Gen10
    Plus) and the BMC's own name on others (Dell: Integrated Dell Remote Access
    Controller): it may match a declared model, but a new model is proposed
    only from what inspection read or the sheet says.
    """
    words: list[tuple[str | None, str | None, bool]] = []
    if f.inspected and f.inspected.model:
        words.append((f.inspected.manufacturer, f.inspected.model, True))
    if f.expected and f.expected.model:
        words.append((None, f.expected.model, True))
    if f.root and f.root.product:
        words.append((f.root.vendor, f.root.product, False))
    known = [*models, *(ModelSpec.model_validate(m) for m in plan.new_models)]
    for maker, model, may_propose in words:
        m = match_model(maker, model, known)
        if m.name:
            p.model = m.name
            f.sources.setdefault("model", "matched " + ("inspect" if f.inspected and f.inspected.model == model else "sheet" if
                                 f.expected and f.expected.model == model else "service root Product"))  # fmt: skip
            return
        if m.new and may_propose:
            plan.new_models.append(m.new)
            p.model = m.new["name"]
            f.sources["model"] = "proposed from " + ("inspect" if f.inspected and f.inspected.model == model else "sheet")
            return


# ---------------------------------------------------------------- the fragment


def proposed_site_file(inventory: SiteFile, plan: DiscoveryPlan) -> tuple[SiteFile, dict[str, Proposal]]:
    """The affected sites whole with the proposals applied, and the new models; {server: its proposal}.

    Raises:
        pydantic.ValidationError: never for a plan built from a valid inventory (the values are checked where they enter).
    """
    applied = {p.server: p for p in plan.proposals if p.kind in ("adopt", "moved") and p.server}
    sites = []
    for site in inventory.sites:
        if not any(srv.name in applied for r in site.racks for srv in r.servers):
            continue
        s = site.model_copy(deep=True)
        for r in s.racks:
            for i, srv in enumerate(r.servers):
                p = applied.get(srv.name)
                if p is not None:
                    r.servers[i] = _apply(srv, p)
        sites.append(s)
    doc = {"models": [m for m in plan.new_models if any(p.model == m["name"] for p in applied.values())],
           "sites": [s.model_dump(mode="json", exclude_defaults=True, exclude_none=True) for s in sites]}  # fmt: skip
    return SiteFile.model_validate(doc), applied


def _apply(spec: ServerSpec, p: Proposal) -> ServerSpec:
    data = spec.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
    for key, (_old, new) in p.changes.items():
        if key.startswith("nics."):
            nic_name = key.split(".")[1]
            nics = data.setdefault("nics", [])
            nic = next((n for n in nics if n["name"] == nic_name), None)
            if nic is None:
                nics.insert(0, {"name": nic_name, "mac": new})
            else:
                nic["mac"] = new
        else:
            data[key] = new
    return ServerSpec.model_validate(data)


def render_fragment(inventory: SiteFile, plan: DiscoveryPlan) -> str:
    """The site-file fragment as YAML: each proposed value with its source as a comment; the unplaced ones as comments."""
    from fleetctl.inventory.render import _SiteDumper, _style, to_document

    doc, applied = proposed_site_file(inventory, plan)
    lines = ["# fleetctl discover: proposed site-file entries. Review, then: fleetctl inventory import THIS-FILE --dry-run",
             "# A site below is written whole (inventory import replaces a site named in a file as a whole):",
             "# only the lines marked '# discover:' differ from the inventory when this was written."]  # fmt: skip
    body = ""
    data = to_document(doc)
    if data.get("models") or data.get("sites"):
        styled = _style(data)
        for site in styled.get("sites", []):
            for rack in site.get("racks", []):
                # Block style for the servers the plan changes, so that each field is a line with its own comment.
                rack["servers"] = [dict(s) if s.get("name") in applied else s for s in rack.get("servers", [])]
        body = yaml.dump(styled, Dumper=_SiteDumper, sort_keys=False, allow_unicode=True, width=120)
        body = _annotate(body, applied, {m["name"] for m in data.get("models", [])})
    out = "\n".join(lines) + "\n" + body
    unplaced = plan.of("unplaced") + plan.of("problem")
    if unplaced:
        out += "\n# Found, but not written above (each needs a person: a rack and a position, or a conflict settled):\n"
        for p in unplaced:
            out += "#   " + _one_line(p) + "\n"
    if plan.missing:
        out += "\n# Declared, not found (the inventory is left as it is):\n"
        for m in plan.missing:
            out += f"#   {m.server} ({m.site}/{m.rack}) {m.bmc}: {m.reason}\n"
    return out


def _one_line(p: Proposal) -> str:
    f = p.found
    r = f.root
    bits = [f"{p.kind}: {f.label}"]
    if r is not None:
        bits += [f"uuid {r.uuid}", f"vendor {r.vendor}", f"product {r.product}", f"fingerprint {r.fingerprint}"]
    if f.mac:
        bits.append(f"mac {f.mac}")
    if f.serial:
        bits.append(f"serial {f.serial}")
    if p.model:
        bits.append(f"model {p.model}")
    if f.probe_error:
        bits.append(f"probe: {f.probe_error}")
    return re.sub(r"[\r\n]", " ", "; ".join(bits) + (f" ({p.detail})" if p.detail else ""))


_KEY = re.compile(r"^(\s*)(- )?([A-Za-z_][A-Za-z0-9_]*):")


def _annotate(text: str, applied: Mapping[str, Proposal], new_models: set[str]) -> str:
    """Mark the proposed lines with their sources: ``# discover: <source>`` at the line's end."""
    out: list[str] = []
    servers_indent: int | None = None
    current: Proposal | None = None
    entry_indent = -1
    in_nics = False
    models_block = False
    for line in text.splitlines():
        m = _KEY.match(line)
        indent = len(line) - len(line.lstrip())
        if m and not m.group(2) and m.group(3) == "models" and indent == 0:
            models_block = True
        elif m and not m.group(2) and indent == 0:
            models_block = False
        if models_block and m and m.group(2) and m.group(3) == "name":
            name = line.split(":", 1)[1].strip()
            if name in new_models:
                line += "  # discover: a new hardware model, proposed from what the BMC reports"
        if m and not m.group(2) and m.group(3) == "servers":
            servers_indent = indent
            current = None
        elif servers_indent is not None and indent < servers_indent:
            servers_indent, current = None, None
        elif servers_indent is not None and indent == servers_indent and line.lstrip().startswith("- "):
            entry = line.split(":", 1)[1].strip() if m and m.group(3) == "name" else None
            current = applied.get(entry) if entry else None
            entry_indent = indent + 2
            in_nics = False
            if current is not None:
                out.append(f"{' ' * indent}# discover: {current.kind} ({_why(current)})")
        elif servers_indent is not None and indent == servers_indent and not line.lstrip().startswith("- "):
            servers_indent, current = None, None
        elif current is not None and m and indent == entry_indent and not m.group(2):
            key = m.group(3)
            in_nics = key == "nics"
            if key in current.changes:
                line += f"  # discover: {_source(current, key)}"
        elif current is not None and in_nics and line.lstrip().startswith("- ") and f"name: {BMC_NIC}" in line:
            key = f"nics.{BMC_NIC}.mac"
            if key in current.changes:
                line += f"  # discover: mac from {_source(current, 'mac')}"
        out.append(line)
    return "\n".join(out) + "\n"


def _why(p: Proposal) -> str:
    bits = [f"matched by {p.matched_by}"]
    if "bmc" in p.changes and p.changes["bmc"][0]:
        bits.append(f"BMC was {p.changes['bmc'][0]}")
    if "position" in p.found.sources:
        bits.append(f"cabled at {p.found.sources['position']}")
    return "; ".join(bits)


def _source(p: Proposal, key: str) -> str:
    src = p.found.sources
    if key in ("bmc", "fingerprint"):
        return src.get(key) or src.get("bmc", "range probe")
    if key == "serial":
        return src.get("serial", "inspect")
    if key == "model":
        return src.get("model", "inspect")
    return src.get(key, "discover")

