"""What an import (or a CLI change) would do: the diff of two inventories.

Entities are compared by their identity (a model, site or server by name, a
rack by site and name, a board by serial, a cable by its switch port) on the
fields a site file declares. Lifecycle state is not compared: the file sets it
when a server is created, the lifecycle owns it after that. A BMC fingerprint
left out of a file keeps the pinned one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetctl.inventory.schema import CableSpec, ModelSpec, ProvisioningSpec, SiteSpec

KINDS = ("bios_profile", "model", "site", "rack", "server", "board", "switch", "cable")


def board_key(serial: str, position: int | None) -> str | tuple[str, int]:
    """A board's key: its serial, or (serial, position) for one of the boards sharing a serial."""
    return serial if position is None else (serial, position)


def board_identity(key: str | tuple[str, int]) -> tuple[str, int | None]:
    """(serial, position) of a board key."""
    return (key, None) if isinstance(key, str) else (key[0], key[1])


@dataclass
class Change:
    action: str  # add, change, remove
    kind: str
    key: Any
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        if isinstance(self.key, tuple):
            return "/".join(str(k) for k in self.key) if self.kind != "cable" else f"{self.key[0]}:{self.key[1]}"
        return str(self.key)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "kind": self.kind, "name": self.label}
        if self.fields:
            out["fields"] = {k: {"from": a, "to": b} for k, (a, b) in self.fields.items()}
        return out


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The entity tables (key -> declared fields) of both sides, for apply.
    before: dict[str, dict[Any, dict[str, Any]]] = field(default_factory=dict)
    after: dict[str, dict[Any, dict[str, Any]]] = field(default_factory=dict)

    def of(self, kind: str, action: str) -> list[Change]:
        return [c for c in self.changes if c.kind == kind and c.action == action]

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for c in self.changes:
            out.setdefault(c.kind, {"add": 0, "change": 0, "remove": 0})[c.action] += 1
        return out

    @property
    def empty(self) -> bool:
        return not self.changes


def cable_key(c: CableSpec) -> tuple[str, str]:
    if c.server is not None:
        return (c.switch, c.port)
    # A switch-to-switch cable may be written from either end: one identity.
    return min((c.switch, c.port), (c.peer or "", c.peer_port or ""))


def provisioning_row(s: SiteSpec) -> dict[str, Any] | None:
    """A site's provisioning block as stored: only what differs from the defaults.

    Kept minimal so that export, which leaves defaults out, writes back what
    the file said, and a default that changes later applies to every site.
    """
    p = s.provisioning
    return p.model_dump(mode="json", exclude_defaults=True) if p is not None else None


def clusters_row(s: SiteSpec) -> list[dict[str, Any]] | None:
    """A site's Kubernetes clusters as stored (references only; defaults left out); None: none declared."""
    return [c.model_dump(mode="json", exclude_defaults=True) for c in s.clusters] or None


def tables(
    models: dict[str, ModelSpec], sites: dict[str, SiteSpec], *, consume: bool = False
) -> dict[str, dict[Any, dict[str, Any]]]:
    """Flatten an inventory into one table per kind: identity -> declared fields.

    With ``consume`` each rack's devices and each site's cables are dropped
    from the specs once flattened, so a big import never holds both forms.
    """
    t: dict[str, dict[Any, dict[str, Any]]] = {k: {} for k in KINDS}
    for m in models.values():
        t["model"][m.name] = m.model_dump()
    for s in sites.values():
        t["site"][s.name] = {"description": s.description, "provisioning": provisioning_row(s), "k8s_clusters": clusters_row(s)}
        for r in s.racks:
            t["rack"][(s.name, r.name)] = {
                "row": r.row, "position": r.position, "height": r.height, "power_budget": r.power_budget,
            }  # fmt: skip
            for v in r.servers:
                model = models.get(v.model)
                default_kind = model.boards.kind if model and model.boards else None
                t["server"][v.name] = {
                    "site": s.name, "rack": r.name, "serial": v.serial, "model": v.model,
                    "position": v.position, "bmc": v.bmc, "system_id": v.system_id,
                    "credential": v.credential, "fingerprint": v.fingerprint,
                    "host": v.host, "host_vars": dict(sorted(v.host_vars.items())),
                    "nics": sorted((n.name, n.mac) for n in v.nics), "tags": sorted(set(v.tags)),
                    "state": v.state, "cluster": v.cluster, "node": v.node,
                }  # fmt: skip
                for b in v.boards:
                    t["board"][board_key(b.serial, b.position)] = {
                        "server": v.name, "slot": b.slot, "kind": b.kind or default_kind, "pci": b.pci,
                        "model": b.model, "firmware": dict(b.firmware), "state": b.state,
                    }  # fmt: skip
            for w in r.switches:
                t["switch"][w.name] = {
                    "site": s.name, "rack": r.name, "model": w.model, "platform": w.platform, "role": w.role,
                    "address": w.address, "position": w.position, "serial": w.serial, "credential": w.credential,
                    "ssh_port": w.ssh_port, "snmp": w.snmp.model_dump() if w.snmp else None,
                }  # fmt: skip
            if consume:
                r.servers, r.switches = [], []
        for c in s.cabling:
            key = cable_key(c)
            if c.server is not None:
                ends = {"server": c.server, "nic": c.nic, "peer": None, "peer_port": None}
            else:
                far = (c.peer, c.peer_port) if key == (c.switch, c.port) else (c.switch, c.port)
                ends = {"server": None, "nic": None, "peer": far[0], "peer_port": far[1]}
            t["cable"][key] = {**ends, "site": s.name, "vlans": list(c.vlans), "mode": c.mode}
        if consume:
            s.cabling = []
    return t


# Fields that are set on creation only, or kept when the new side leaves them out.
_CREATE_ONLY = {"server": {"state"}, "board": {"state"}}
_KEEP_IF_UNSET = {"server": {"fingerprint"}}
# Mappings whose changes are shown key by key (``provisioning.vlan: 200 -> 210``),
# so that one setting changed is not lost in a long line; a setting back at its
# default shows the default. Apply writes them whole.
_NESTED: dict[str, dict[str, type[Any]]] = {"site": {"provisioning": ProvisioningSpec}}


def _nested_delta(name: str, old: Any, new: Any, spec: type[Any] | None = None) -> dict[str, tuple[Any, Any]]:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return {name: (old, new)}  # a block added or removed: shown whole, as stored
    if spec is not None:  # both sides in the spec's key order, defaults filled in
        fields = spec.model_fields
        keys = list(fields)
        fill = {k: f.get_default(call_default_factory=True) for k, f in fields.items() if not f.is_required()}
        old, new = ({k: d.get(k, fill.get(k)) for k in keys} for d in (old, new))
    out: dict[str, tuple[Any, Any]] = {}
    for k in [*new, *(k for k in old if k not in new)]:
        if old.get(k) != new.get(k):
            out.update(_nested_delta(f"{name}.{k}", old.get(k), new.get(k)))
    return out


def diff(
    before_models: dict[str, ModelSpec],
    before_sites: dict[str, SiteSpec],
    after_models: dict[str, ModelSpec],
    after_sites: dict[str, SiteSpec],
    *,
    before_profiles: dict[str, Any] | None = None,
    after_profiles: dict[str, Any] | None = None,
    consume: bool = False,
) -> Plan:
    """The changes that turn ``before`` into ``after``.

    Models and BIOS profiles are only added or changed, never removed: one
    missing from the files may still be used by a site not being imported.
    """
    before = tables(before_models, before_sites, consume=consume)
    after = tables(after_models, after_sites, consume=consume)
    before["bios_profile"] = {n: p.model_dump() for n, p in (before_profiles or {}).items()}
    after["bios_profile"] = {n: p.model_dump() for n, p in (after_profiles or {}).items()}
    plan = Plan(before=before, after=after)
    for kind in KINDS:
        old, new = before[kind], after[kind]
        for key, fields in new.items():
            if key not in old:
                plan.changes.append(Change("add", kind, key))
                continue
            prev = old[key]
            delta = {}
            for name, value in fields.items():
                if name in _CREATE_ONLY.get(kind, ()):
                    continue
                if value is None and name in _KEEP_IF_UNSET.get(kind, ()):
                    fields[name] = prev.get(name)
                    continue
                if prev.get(name) != value:
                    if name in _NESTED.get(kind, {}):
                        delta.update(_nested_delta(name, prev.get(name), value, _NESTED[kind][name]))
                    else:
                        delta[name] = (prev.get(name), value)
            if delta:
                plan.changes.append(Change("change", kind, key, delta))
        if kind in ("model", "bios_profile"):
            continue
        for key in old:
            if key not in new:
                plan.changes.append(Change("remove", kind, key))
    return plan
