"""Turn loaded files into one desired inventory and check it as a whole.

Schema errors come from pydantic; the checks here are the ones that need the
whole picture: unique names, serials, MACs and addresses across every site
(those in the store included), references that resolve, devices inside their
rack and never sharing a unit, cables whose ends exist and are used once.
Every error names the file and line it came from (or the site in the store).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from fleetctl.errors import InputError
from fleetctl.inventory.loader import Loc, Source
from fleetctl.inventory.schema import CableSpec, ModelSpec, RackSpec, ServerSpec, SiteFile, SiteSpec, expand_ports


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass
class Origin:
    """Where a spec came from: a file and its path in it, or the store."""

    source: Source | None
    loc: Loc
    site: str | None = None

    def at(self, *more: str | int) -> tuple[str, str]:
        loc = self.loc + more
        if self.source is None:
            # From the store or a CLI edit: a path into a file would mean
            # nothing to the operator; the site and the field do.
            field = next((p for p in reversed(loc) if isinstance(p, str)), "")
            return (f"site {self.site}" if self.site else "inventory", field)
        return (self.source.where(loc), dotted(loc))


class Ref:
    """A spec whose origin is looked up only if a problem is reported about it.

    Building an origin for each of a 10,000-server fleet's 100,000 specs up
    front costs memory that a clean import never uses.
    """

    __slots__ = ("desired", "spec")

    def __init__(self, desired: Desired, spec: Any) -> None:
        self.desired, self.spec = desired, spec

    def at(self, *more: str | int) -> tuple[Ref, tuple[str | int, ...]]:
        return (self, more)

    def resolve(self, more: tuple[str | int, ...]) -> tuple[str, str]:
        return self.desired.origins().get(id(self.spec), Origin(None, ())).at(*more)


@dataclass
class Desired:
    """The inventory as it should be after an import or a CLI change."""

    models: dict[str, ModelSpec] = field(default_factory=dict)
    sites: dict[str, SiteSpec] = field(default_factory=dict)
    bios_profiles: dict[str, Any] = field(default_factory=dict)
    touched_sites: set[str] = field(default_factory=set)
    # (site, file or None, its path in the file), for origins on demand
    placed: list[tuple[SiteSpec, Source | None, Loc]] = field(default_factory=list)
    fixed: dict[int, Origin] = field(default_factory=dict)
    _origins: dict[int, Origin] | None = None

    def origin(self, spec: Any) -> Ref:
        return Ref(self, spec)

    def origins(self) -> dict[int, Origin]:
        if self._origins is None:
            self._origins = dict(self.fixed)
            for site, source, loc in self.placed:
                _register_site(self._origins, site, source, loc)
        return self._origins


class Problems:
    """Errors collected while checking; raised as one InputError."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str]] = []

    def add(self, where: tuple[Any, Any], message: str) -> None:
        self.items.append((where[0], where[1], message))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        resolved = []
        for a, b, msg in self.items:
            if isinstance(a, Ref):
                a, b = a.resolve(b)
            resolved.append((a, b, msg))
        self.items = resolved
        location, fld, message = self.items[0]
        more = len(self.items) - 1
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        err = InputError(message, location=location, field=fld)
        err.problems = list(self.items)  # type: ignore[attr-defined]
        raise err


def _schema_error(e: ValidationError, source: Source, prefix: Loc) -> InputError:
    first = e.errors()[0]
    loc = prefix + tuple(first["loc"])
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = f"unknown key {loc[-1]!r}"
    elif first["type"] == "missing":
        msg = f"missing required field {loc[-1]!r}"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    count = e.error_count()
    if count > 1:
        msg += f" (and {count - 1} more problem{'s' if count > 2 else ''})"
    source.release()  # the data may be half consumed; where() parses the text again
    return InputError(msg, location=source.where(loc), field=dotted(loc))


def parse_source(source: Source) -> SiteFile:
    """Validate one file's data against the schema.

    Racks and cables are validated one at a time and their raw data dropped
    as soon as each is a typed spec, so a 10,000-server file never holds both
    forms in full (that alone was a hundred megabytes).
    """
    data = source.data
    try:
        if not _regular(data):
            return SiteFile.model_validate(data)  # let pydantic name the odd shape
        shell = SiteFile.model_validate({**data, "sites": []})
        for si, raw_site in enumerate(data.get("sites") or []):
            racks_raw, cables_raw = raw_site.get("racks") or [], raw_site.get("cabling") or []
            prefix: Loc = ("sites", si)
            try:
                site = SiteSpec.model_validate({**raw_site, "racks": [], "cabling": []})
            except ValidationError as e:
                raise _schema_error(e, source, prefix) from None
            for ri in range(len(racks_raw)):
                try:
                    site.racks.append(RackSpec.model_validate(racks_raw[ri]))
                except ValidationError as e:
                    raise _schema_error(e, source, (*prefix, "racks", ri)) from None
                racks_raw[ri] = None
            for ci in range(len(cables_raw)):
                try:
                    site.cabling.append(CableSpec.model_validate(cables_raw[ci]))
                except ValidationError as e:
                    raise _schema_error(e, source, (*prefix, "cabling", ci)) from None
                cables_raw[ci] = None
            shell.sites.append(site)
        source.release()
        return shell
    except ValidationError as e:
        raise _schema_error(e, source, ()) from None


def _regular(data: Any) -> bool:
    """Whether the file has the usual shape (so it can be validated piecewise)."""
    sites = data.get("sites")
    if sites is None:
        return True
    if not isinstance(sites, list) or not all(isinstance(x, dict) for x in sites):
        return False
    return all(
        isinstance(x.get("racks") or [], list) and isinstance(x.get("cabling") or [], list) for x in sites
    )


def _register_site(o: dict[int, Origin], site: SiteSpec, source: Source | None, loc: Loc) -> None:
    o[id(site)] = Origin(source, loc, site.name)
    for ri, rack in enumerate(site.racks):
        rl = (*loc, "racks", ri)
        o[id(rack)] = Origin(source, rl, site.name)
        for si, server in enumerate(rack.servers):
            sl = (*rl, "servers", si)
            o[id(server)] = Origin(source, sl, site.name)
            for bi, board in enumerate(server.boards):
                o[id(board)] = Origin(source, (*sl, "boards", bi), site.name)
            for ni, nic in enumerate(server.nics):
                o[id(nic)] = Origin(source, (*sl, "nics", ni), site.name)
        for wi, switch in enumerate(rack.switches):
            o[id(switch)] = Origin(source, (*rl, "switches", wi), site.name)
    for ci, cable in enumerate(site.cabling):
        o[id(cable)] = Origin(source, (*loc, "cabling", ci), site.name)
    for ki, cluster in enumerate(site.clusters):
        o[id(cluster)] = Origin(source, (*loc, "clusters", ki), site.name)


def merge(current: SiteFile, sources: list[Source], files: list[SiteFile]) -> Desired:
    """The store's inventory with the files laid over it.

    A site named in a file is replaced by the file's version as a whole; other
    sites stay as they are. Models named in a file are added or replaced;
    other models stay.
    """
    desired = Desired()
    problems = Problems()
    model_seen: dict[str, Origin] = {}
    site_seen: dict[str, Origin] = {}
    profile_seen: dict[str, Origin] = {}
    for source, sf in zip(sources, files, strict=True):
        for i, prof in enumerate(sf.bios_profiles):
            here = Origin(source, ("bios_profiles", i))
            if prof.name in profile_seen:
                problems.add(here.at("name"), f"BIOS profile {prof.name!r} is also defined at {profile_seen[prof.name].at()[0]}")
                continue
            profile_seen[prof.name] = here
            desired.bios_profiles[prof.name] = prof
        for i, model in enumerate(sf.models):
            here = Origin(source, ("models", i))
            if model.name in model_seen:
                problems.add(here.at("name"), f"model {model.name!r} is also defined at {model_seen[model.name].at()[0]}")
                continue
            model_seen[model.name] = here
            desired.models[model.name] = model
            desired.fixed[id(model)] = here
        for i, site in enumerate(sf.sites):
            here = Origin(source, ("sites", i))
            if site.name in site_seen:
                problems.add(here.at("name"), f"site {site.name!r} is also defined at {site_seen[site.name].at()[0]}")
                continue
            site_seen[site.name] = here
            desired.sites[site.name] = site
            desired.touched_sites.add(site.name)
            desired.placed.append((site, source, ("sites", i)))
    problems.raise_if_any()
    for model in current.models:
        if model.name not in desired.models:
            desired.models[model.name] = model
    for prof in current.bios_profiles:
        desired.bios_profiles.setdefault(prof.name, prof)
    for site in current.sites:
        if site.name not in desired.sites:
            desired.sites[site.name] = site
            desired.placed.append((site, None, ()))
    return desired


def check(desired: Desired) -> list[str]:
    """Check the desired inventory as a whole; return warnings, raise errors."""
    problems = Problems()
    warnings: list[str] = []
    models = desired.models
    unique: dict[str, dict[Any, str]] = {k: {} for k in ("device", "serial", "mac", "bmc", "address", "board")}

    def claim(kind: str, value: Any, what: str, where: tuple[Any, Any], label: str) -> None:  # where: as Problems.add
        table = unique[kind]
        if value in table:
            problems.add(where, f"{label} {value!r} is already used by {table[value]}")
        else:
            table[value] = what

    # A serial is a board's own (no position) or shared by several (each with one), never both.
    board_modes: dict[str, tuple[bool, str]] = {}

    def board_mode(serial: str, shared: bool, what: str, where: tuple[Any, Any]) -> None:
        first = board_modes.setdefault(serial, (shared, what))
        if first[0] != shared:
            here, there = ("with" if shared else "without"), ("with" if first[0] else "without")
            problems.add(where, f"board serial {serial!r} is given {here} a position here and {there} one by {first[1]}: "
                                "boards sharing a serial each give theirs")  # fmt: skip

    for name, spec in desired.models.items():
        if spec.bios_profile and spec.bios_profile not in desired.bios_profiles:
            where = desired.fixed.get(id(spec))
            problems.add(where.at("bios_profile") if where else ("inventory", "bios_profile"),
                         f"model {name!r} names BIOS profile {spec.bios_profile!r}, which is not defined (bios_profiles:)")  # fmt: skip
    # Sites kept from the store first: when a file clashes with them, the
    # problem is blamed on the file's line, which is what the operator edits.
    ordered = sorted(desired.sites.values(), key=lambda s: s.name in desired.touched_sites)
    for site in ordered:
        rack_names: set[str] = set()
        switch_ports: dict[str, set[str]] = {}
        server_nics: dict[str, set[str]] = {}
        for rack in site.racks:
            ro = desired.origin(rack)
            if rack.name in rack_names:
                problems.add(ro.at("name"), f"rack {rack.name!r} appears twice in site {site.name!r}")
            rack_names.add(rack.name)
            units: dict[int, str] = {}
            peak = 0
            for kind, devices in (("server", rack.servers), ("switch", rack.switches)):
                for dev in devices:
                    o = desired.origin(dev)
                    claim("device", dev.name, f"{kind} in rack {rack.name}", o.at("name"), "name")
                    model = models.get(dev.model)
                    if model is None:
                        problems.add(o.at("model"), f"unknown hardware model {dev.model!r}")
                        continue
                    if model.kind != kind:
                        problems.add(o.at("model"), f"model {dev.model!r} is a {model.kind} model, not a {kind} model")
                        continue
                    top = dev.position + model.height - 1
                    if top > rack.height:
                        problems.add(
                            o.at("position"),
                            f"{dev.name} at U{dev.position} is {model.height}U high and would end at U{top}, "
                            f"beyond the rack's {rack.height}U",
                        )
                    for u in range(dev.position, min(top, rack.height) + 1):
                        if u in units:
                            problems.add(o.at("position"), f"{dev.name} overlaps {units[u]} at U{u} in rack {rack.name}")
                            break
                        units[u] = dev.name
                    if isinstance(dev, ServerSpec):  # kind == "server"
                        if model.power:
                            peak += model.power.peak
                        _check_server(dev, model, o, desired, claim, problems, warnings, board_mode)
                        server_nics[dev.name] = {n.name for n in dev.nics}
                    else:
                        if dev.serial:
                            claim("serial", dev.serial, f"switch {dev.name}", o.at("serial"), "serial")
                        claim("address", dev.address, f"switch {dev.name}", o.at("address"), "management address")
                        switch_ports[dev.name] = set(expand_ports(model.ports or []))
            if rack.power_budget is not None and peak > rack.power_budget:
                warnings.append(
                    f"rack {site.name}/{rack.name}: peak power of its servers ({peak} W) exceeds its "
                    f"budget ({rack.power_budget} W); power-on will be staggered"
                )
        _check_cabling(site, desired, switch_ports, server_nics, problems)
        _check_nodes(site, desired, problems)
    problems.raise_if_any()
    return warnings


def _check_server(dev, model, o, desired, claim, problems, warnings, board_mode) -> None:  # type: ignore[no-untyped-def]
    claim("serial", dev.serial, f"server {dev.name}", o.at("serial"), "serial")
    if dev.bmc:
        claim("bmc", (dev.bmc, dev.system_id), f"server {dev.name}", o.at("bmc"), "BMC")
    nic_names: set[str] = set()
    for nic in dev.nics:
        no = desired.origin(nic)
        if nic.name in nic_names:
            problems.add(no.at("name"), f"{dev.name} has two NICs named {nic.name!r}")
        nic_names.add(nic.name)
        if nic.mac:
            claim("mac", nic.mac, f"{dev.name}/{nic.name}", no.at("mac"), "MAC")
    slots: set[int] = set()
    for board in dev.boards:
        bo = desired.origin(board)
        # A board is (serial, position): boards sharing a serial (NVIDIA GB200/GB300
        # modules) each give their position; a serial of a board's own gives none.
        if board.position is None:
            claim("board", board.serial, f"a board in {dev.name}", bo.at("serial"), "board serial")
        else:
            claim("board", (board.serial, board.position), f"a board in {dev.name}", bo.at("position"), "board serial and position")
        board_mode(board.serial, board.position is not None, f"a board in {dev.name}", bo.at("position"))
        if board.slot in slots:
            problems.add(bo.at("slot"), f"{dev.name} has two boards in slot {board.slot}")
        slots.add(board.slot)
        kind = board.kind or (model.boards.kind if model.boards else None)
        if kind is None:
            problems.add(bo.at("kind"), f"board {board.serial}: model {model.name!r} declares no board kind, give one")
        elif model.boards and kind != model.boards.kind:
            problems.add(bo.at("kind"), f"board {board.serial} is {kind} but model {model.name!r} holds {model.boards.kind}")
    if model.boards and len(dev.boards) > model.boards.count:
        problems.add(o.at("boards"), f"{dev.name} declares {len(dev.boards)} boards; model {model.name!r} holds {model.boards.count}")
    elif model.boards and dev.boards and len(dev.boards) < model.boards.count:
        warnings.append(f"{dev.name}: {len(dev.boards)} of {model.boards.count} {model.boards.kind} boards declared")


def _check_nodes(site: SiteSpec, desired: Desired, problems: Problems) -> None:
    """Clusters named once; a server's cluster is one of its site's; a node is one server's."""
    clusters: set[str] = set()
    for cluster in site.clusters:
        if cluster.name in clusters:
            problems.add(desired.origin(cluster).at("name"), f"cluster {cluster.name!r} appears twice in site {site.name!r}")
        clusters.add(cluster.name)
    only = site.clusters[0].name if len(site.clusters) == 1 else None
    nodes: dict[tuple[str, str], str] = {}
    for rack in site.racks:
        for server in rack.servers:
            o = desired.origin(server)
            if server.cluster is not None and server.cluster not in clusters:
                known = ", ".join(sorted(clusters)) or "none declared (clusters:)"
                problems.add(o.at("cluster"), f"{server.name}: cluster {server.cluster!r} is not one of site {site.name!r}'s ({known})")
                continue
            if server.node is not None and (server.cluster or only) is None:
                problems.add(o.at("node"), f"{server.name}: a node name needs a cluster (cluster:, or one under the site's clusters:)")
                continue
            if server.node is not None:
                key = (server.cluster or only or "", server.node)
                if key in nodes:
                    problems.add(o.at("node"), f"node {server.node!r} of cluster {key[0]!r} is already {nodes[key]}'s")
                nodes[key] = server.name


def _check_cabling(site, desired, switch_ports, server_nics, problems) -> None:  # type: ignore[no-untyped-def]
    used_ports: dict[tuple[str, str], str] = {}
    used_nics: dict[tuple[str, str], str] = {}

    def use_port(sw: str, port: str, where: tuple[Any, Any], who: str, sw_where: tuple[Any, Any]) -> None:
        if sw not in switch_ports:
            problems.add(sw_where, f"no switch {sw!r} in site {site.name!r}")
        elif port not in switch_ports[sw]:
            problems.add(where, f"switch {sw!r} has no port {port!r}")
        elif (sw, port) in used_ports:
            problems.add(where, f"port {sw}:{port} is already cabled to {used_ports[(sw, port)]}")
        else:
            used_ports[(sw, port)] = who

    for cable in site.cabling:
        co = desired.origin(cable)
        if cable.server is not None:
            far = f"{cable.server}/{cable.nic}"
            use_port(cable.switch, cable.port, co.at("port"), far, co.at("switch"))
            if cable.server not in server_nics:
                problems.add(co.at("server"), f"no server {cable.server!r} in site {site.name!r}")
            elif cable.nic not in server_nics[cable.server]:
                problems.add(co.at("nic"), f"server {cable.server!r} has no NIC {cable.nic!r}")
            elif (cable.server, cable.nic) in used_nics:
                problems.add(co.at("nic"), f"NIC {far} is already cabled to {used_nics[(cable.server, cable.nic)]}")
            else:
                used_nics[(cable.server, cable.nic)] = f"{cable.switch}:{cable.port}"
        else:
            use_port(cable.switch, cable.port, co.at("port"), f"{cable.peer}:{cable.peer_port}", co.at("switch"))
            use_port(cable.peer, cable.peer_port, co.at("peer_port"), f"{cable.switch}:{cable.port}", co.at("peer"))
