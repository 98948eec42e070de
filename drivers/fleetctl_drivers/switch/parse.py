"""CLI text -> records (dicts of str), then records -> fleetctl's typed models.

Two stages, both pure functions, tested against recorded output
(``../shared/switch-outputs``):

1. :func:`run_parser` turns a command's text into a list of records, with the
   parser the platform file names: an ntc-templates TextFSM template
   (``textfsm: [platform, command]``), a TextFSM template of our own kept in
   the platform's folder (``template: eos/x.textfsm``), or one of the Python
   parsers below (``python: name``) for output TextFSM handles badly (SONiC's
   tables, ``ip -j``, ``lldpctl -f keyvalue``).
2. :func:`rename` applies the platform file's ``fields`` map, and the
   ``to_*`` functions build models, translating vendor words through the
   tables in :mod:`fleetctl.interfaces.switch`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetctl.errors import SwitchError
from fleetctl.interfaces.switch import (
    Interface,
    LldpNeighbor,
    MacEntry,
    PortConfig,
    PortMode,
    SwitchFacts,
    canonical_mac,
    map_mode,
    map_status,
    parse_vlan_list,
)

if TYPE_CHECKING:  # platform.py imports this module
    from .platform import ShowCommand

PLATFORMS_DIR = Path(__file__).resolve().parent / "platforms"

Record = dict[str, Any]

# --------------------------------------------------------------------------
# Stage 1: text -> records
# --------------------------------------------------------------------------


def run_parser(spec: Mapping[str, Any], text: str) -> list[Record]:
    """Parse ``text`` with the parser a platform file's ``parser:`` entry names.

    ``replaces: [platform, command]`` beside ``template`` names the
    ntc-templates template ours stands in for (the recordings test holds ours
    to theirs on their own test data); it is not used to parse.
    """
    if "textfsm" in spec:
        platform, command = spec["textfsm"]
        return _ntc(platform, command, text)
    if "template" in spec:
        return _own_template(str(spec["template"]), text)
    if "python" in spec:
        name = str(spec["python"])
        fn = PYTHON_PARSERS.get(name)
        if fn is None:
            raise SwitchError(f"platform file names an unknown parser {name!r}")
        return fn(text)
    raise SwitchError(
        f"platform file has a parser entry without textfsm/template/python: {dict(spec)!r}"
    )


def _ntc(platform: str, command: str, text: str) -> list[Record]:
    from ntc_templates.parse import parse_output

    if not text.strip():
        return []
    try:
        out = parse_output(platform=platform, command=command, data=text)
    except Exception as e:  # textfsm raises its own errors on output it cannot follow
        raise SwitchError(
            f"could not parse {command!r} ({platform}): {type(e).__name__}: {e}"
        ) from e
    return [dict(r) for r in out]


@cache
def _template_text(rel: str) -> str:
    path = (PLATFORMS_DIR / rel).resolve()
    if PLATFORMS_DIR not in path.parents:
        raise SwitchError(f"template {rel!r} is outside the platforms folder")
    return path.read_text()


def _own_template(rel: str, text: str) -> list[Record]:
    import io

    import textfsm

    try:
        fsm = textfsm.TextFSM(io.StringIO(_template_text(rel)))
        rows = fsm.ParseText(text)
    except Exception as e:
        raise SwitchError(f"could not parse with {rel}: {type(e).__name__}: {e}") from e
    keys = [h.lower() for h in fsm.header]
    return [dict(zip(keys, row, strict=True)) for row in rows]


def parse_show(show: ShowCommand, text: str) -> list[Record]:
    """Parse one show command's output into records (fields renamed), or raise.

    Output is either recognised or refused, never read as "nothing": a
    parser that finds no records in output the platform file does not call
    legitimately empty (``empty``: a header without rows, "Total entries
    displayed: 0"), or a record whose fields do not look like what the
    command prints (``expect``: a port name, a VLAN number, a version with a
    digit), raises :class:`SwitchError` naming the command. Garbage (an
    error message the platform's error list lacks, a banner, binary junk, a
    truncated answer) then reads as an error, not as a switch with no ports.

    Raises:
        SwitchError: the output is not what ``show.command`` prints.
    """
    try:
        records = rename(run_parser(show.parser, text), show.fields)
    except SwitchError as e:
        if show.command in str(e):
            raise
        raise SwitchError(f"{show.command!r}: {e}") from e
    if not records:
        if show.empty is not None and re.search(show.empty, text, re.MULTILINE):
            return []
        raise SwitchError(
            f"{show.command!r}: output not recognised (nothing the parser knows in {_excerpt(text)})"
        )
    for field, pattern in show.expect.items():
        for rec in records:
            value = rec.get(field)
            if value is None or re.fullmatch(pattern, str(value).strip()) is None:
                raise SwitchError(
                    f"{show.command!r}: output not recognised ({field} {value!r} is not what "
                    f"the command prints, in {_excerpt(text)})"
                )
    return records


def _excerpt(text: str, limit: int = 120) -> str:
    """The start of an output, quoted, for an error message (binary junk shown escaped)."""
    head = text.strip()
    return repr(head[:limit] + ("..." if len(head) > limit else "")) if head else "an empty output"


def rename(records: Iterable[Record], fields: Mapping[str, str]) -> list[Record]:
    """Apply a platform file's ``fields`` map (ours: theirs); an empty map keeps records as they are."""
    if not fields:
        return [dict(r) for r in records]
    return [{ours: r.get(theirs) for ours, theirs in fields.items()} for r in records]


# --- SONiC ------------------------------------------------------------------


def dashed_table(text: str) -> list[Record]:
    """A table whose header is underlined with runs of dashes (SONiC, tabulate "simple").

    Column bounds come from the dash runs, so values with single spaces
    ("QSFP28 or later") and right-aligned columns both parse. Keys are the
    header words lower-cased without spaces.
    """
    lines = text.splitlines()
    for i in range(1, len(lines)):
        if re.fullmatch(r"\s*-+(\s+-+)*\s*", lines[i]) and lines[i - 1].strip():
            header, rule, body = lines[i - 1], lines[i], lines[i + 1 :]
            break
    else:
        return []
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    # Widen each column to the gap before the next, so values that overflow
    # the dash run (right-aligned numbers, long names) stay whole.
    bounds = []
    for k in range(len(spans)):
        lo = spans[k - 1][1] if k else 0
        hi = spans[k + 1][0] if k + 1 < len(spans) else None
        bounds.append((lo, hi))
    keys = [re.sub(r"\s+", "", header[lo:hi].strip().lower()) for lo, hi in bounds]
    out = []
    for line in body:
        if (
            not line.strip()
            or re.fullmatch(r"\s*-+\s*", line)
            or line.lstrip().startswith("Total entries")
        ):
            if re.fullmatch(r"\s*-{10,}\s*", line):
                break  # SONiC ends some tables with a long rule and a total line
            continue
        row = {
            keys[k]: line[lo:hi].strip() if hi is not None else line[lo:].strip()
            for k, (lo, hi) in enumerate(bounds)
        }
        out.append(row)
    return out


def sonic_table(text: str) -> list[Record]:
    return dashed_table(text)


def sonic_vlan_members(text: str) -> list[Record]:
    """``show vlan config`` -> one record per port: mode, access VLAN, trunk VLANs."""
    ports: dict[str, Record] = {}
    for row in dashed_table(text):
        member, mode, vid = (
            row.get("member", ""),
            row.get("mode", "").lower(),
            row.get("vid", ""),
        )
        if not member or not vid.isdigit():
            continue
        rec = ports.setdefault(
            member, {"name": member, "access_vlan": None, "tagged": []}
        )
        if mode == "untagged":
            rec["access_vlan"] = vid
        else:
            rec["tagged"].append(int(vid))
    out = []
    for rec in ports.values():
        tagged = rec.pop("tagged")
        rec["mode"] = "trunk" if tagged else "access"
        rec["trunk_vlans"] = ",".join(str(v) for v in sorted(tagged))
        out.append(rec)
    return out


def sonic_mac_table(text: str) -> list[Record]:
    """``show mac`` (sonic-utilities fdbshow) -> records mac, vlan, port, kind; the total line is no row."""
    out = []
    for row in dashed_table(text):
        mac, port = row.get("macaddress", ""), row.get("port", "")
        if not mac or not port or not row.get("no.", "").isdigit():
            continue  # "Total number of entries N" falls into the first columns
        out.append({"mac": mac, "vlan": row.get("vlan") or None, "port": port, "kind": row.get("type", "").lower() or "dynamic"})
    return out


def sonic_version(text: str) -> list[Record]:
    """``show version`` of SONiC: ``Key: value`` lines."""
    kv = _colon_pairs(text)
    if "sonic software version" not in kv:
        return []  # not SONiC's show version: nothing recognised (parse_show says so)
    return [
        {
            "os_version": kv.get("sonic software version"),
            # the vendor's model (syseeprom) where the platform has one; the HwSKU names the port layout, not the box
            "model": kv.get("model number") or kv.get("hwsku") or kv.get("platform"),
            "serial": kv.get("serial number"),
            "uptime": kv.get("uptime"),
        }
    ]


def _colon_pairs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out.setdefault(k.strip().lower(), v.strip())
    return out


def single_line(text: str) -> list[Record]:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return [{"value": lines[0]}] if lines else []


# --- Linux --------------------------------------------------------------------


def _sections(text: str) -> dict[str, str]:
    """Split ``@@name`` marked output into {name: text}."""
    out: dict[str, list[str]] = {}
    current = "_"
    for line in text.splitlines():
        m = re.fullmatch(r"\s*@@(\w+)\s*", line)
        if m:
            current = m.group(1)
            out.setdefault(current, [])
        else:
            out.setdefault(current, []).append(line)
    return {k: "\n".join(v).strip() for k, v in out.items()}


def linux_facts(text: str) -> list[Record]:
    s = _sections(text)
    if "kernel" not in s and "os" not in s:
        return []  # none of the command's @@ sections: not its output
    os_release = {}
    for line in s.get("os", "").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            os_release[k.strip()] = v.strip().strip('"')
    uptime = s.get("uptime", "").split()
    serial = s.get("serial") or None
    return [
        {
            "os_version": " ".join(
                x for x in (os_release.get("PRETTY_NAME"), s.get("kernel")) if x
            )
            or None,
            "hostname": s.get("host") or None,
            "uptime": uptime[0] if uptime else None,
            "serial": serial
            if serial and serial.lower() not in ("none", "not specified", "0")
            else None,
            "model": s.get("model") or None,
        }
    ]


def linux_links(text: str) -> list[Record]:
    """``ip -d -j link show`` (+ an ``@@speed`` section of ``name speed`` lines) -> records.

    Every link comes back (the driver keeps the ports); a port's ``master``
    names its bridge and so its VLAN.
    """
    s = _sections(text)
    raw = s.get("_", "").strip()
    links = _ip_json(raw)
    speeds: dict[str, str] = {}
    for line in s.get("speed", "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            speeds[parts[0]] = parts[1]
    out = []
    for link in links:
        name = link.get("ifname")
        flags = link.get("flags") or []
        info = link.get("linkinfo") or {}
        out.append(
            {
                "name": name,
                "admin_up": "UP" in flags,
                # NO-CARRIER / operstate DOWN: the other end is away. veths report
                # operstate UP, physical ports UP or DOWN; LOWERLAYERDOWN is down too.
                "oper_up": link.get("operstate") == "UP"
                or ("LOWER_UP" in flags and "UP" in flags),
                "master": link.get("master"),
                "kind": info.get("info_kind"),
                "description": link.get("ifalias") or None,
                "speed": speeds.get(str(name)),
            }
        )
    return out


def linux_bridges(text: str) -> list[Record]:
    return [{"name": link.get("ifname")} for link in _ip_json(text.strip())]


def _ip_json(raw: str) -> list[dict[str, Any]]:
    """``ip -j`` output: a JSON list of objects (nothing at all where there are none)."""
    try:
        links = json.loads(raw) if raw else []
    except json.JSONDecodeError as e:
        raise SwitchError(f"could not parse `ip -j link` output: {e}") from e
    if not isinstance(links, list) or not all(isinstance(x, dict) for x in links):
        raise SwitchError(f"`ip -j link` output is not a list of links: {_excerpt(raw)}")
    return links


def lldpctl_keyvalue(text: str) -> list[Record]:
    """``lldpctl -f keyvalue``: ``lldp.<port>.chassis.name=...`` lines, one neighbour per port."""
    ports: dict[str, Record] = {}
    for line in text.splitlines():
        if not line.startswith("lldp.") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        parts = key.split(".")
        if len(parts) < 3:
            continue
        port, rest = parts[1], ".".join(parts[2:])
        rec = ports.setdefault(port, {"local_port": port})
        if rest == "chassis.name":
            rec["remote_system"] = value
        elif rest in ("chassis.mac", "chassis.id") and "remote_chassis_id" not in rec:
            rec["remote_chassis_id"] = value
        elif rest == "port.ifname" or (
            rest in ("port.mac", "port.local") and "remote_port" not in rec
        ):
            rec["remote_port"] = value
    return list(ports.values())


PYTHON_PARSERS: dict[str, Callable[[str], list[Record]]] = {
    "sonic_table": sonic_table,
    "sonic_vlan_members": sonic_vlan_members,
    "sonic_mac_table": sonic_mac_table,
    "sonic_version": sonic_version,
    "single_line": single_line,
    "linux_facts": linux_facts,
    "linux_links": linux_links,
    "linux_bridges": linux_bridges,
    "lldpctl_keyvalue": lldpctl_keyvalue,
}

# --------------------------------------------------------------------------
# Stage 2: records -> models
# --------------------------------------------------------------------------


def canonical_name(name: str, abbreviations: Mapping[str, str]) -> str:
    """``Et3/1`` -> ``Ethernet3/1`` with the platform's table; unknown prefixes pass through."""
    name = name.strip()
    m = re.match(r"^([A-Za-z-]+)(.*)$", name)
    if not m:
        return name
    prefix, rest = m.groups()
    for short, long in abbreviations.items():
        if prefix.lower() == short.lower():
            return long + rest
    return name


_SPEED = re.compile(
    r"^(?:a-|auto-)?(\d+(?:\.\d+)?)\s*([GMK]?)(?:b(?:ps)?|bit)?$", re.IGNORECASE
)


def speed_mbps(value: str | None) -> int | None:
    """``a-40G`` -> 40000, ``1000`` -> 1000 (bare numbers are Mb/s), ``auto``/``unconf`` -> None."""
    if value is None:
        return None
    v = str(value).strip()
    m = _SPEED.match(v)
    if not m:
        return None
    n, unit = float(m.group(1)), m.group(2).upper()
    factor = {"G": 1000, "M": 1, "K": 0.001, "": 1}[unit]
    mbps = int(n * factor)
    return mbps if mbps > 0 else None


_UPTIME_UNITS = {
    "week": 604800,
    "day": 86400,
    "hour": 3600,
    "minute": 60,
    "min": 60,
    "second": 1,
    "sec": 1,
}


def uptime_seconds(value: str | None) -> int | None:
    """``2 days, 15 hours and 56 minutes``, ``123 day(s), 5 hour(s)``, ``12345.6`` (/proc/uptime),
    ``10:33:08 up 12 min, ...`` (uptime(1)) -> seconds; None when it cannot tell."""
    if not value:
        return None
    v = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?(\s+\d+(\.\d+)?)*", v):  # /proc/uptime: seconds first
        return int(float(v.split()[0]))
    if " up " in f" {v} ":  # uptime(1): "10:33:08 up 3 days,  4:05,  1 user, ..."
        rest = f" {v} ".split(" up ", 1)[1]
        m = re.match(r"^\s*(?:(\d+)\s+days?,\s*)?(?:(\d+):(\d+)|(\d+)\s+min)", rest)
        if m:
            d, h, mi = (
                int(m.group(1) or 0),
                int(m.group(2) or 0),
                int(m.group(3) or m.group(4) or 0),
            )
            return d * 86400 + h * 3600 + mi * 60
    total, found = 0, False
    for n, unit in re.findall(
        r"(\d+)\s*(week|day|hour|minute|min|second|sec)", v, re.IGNORECASE
    ):
        total += int(n) * _UPTIME_UNITS[unit.lower()]
        found = True
    return total if found else None


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    v = str(value).strip()
    return None if v in ("", "--", "N/A") else v


def to_facts(platform: str, records: Iterable[Record]) -> SwitchFacts:
    """Merge records (version, hostname ...) into one :class:`SwitchFacts`."""
    merged: Record = {}
    for r in records:
        for k, v in r.items():
            if _text(v) is not None and k not in merged:
                merged[k] = v
    return SwitchFacts(
        platform=platform,
        os_version=_text(merged.get("os_version")),
        serial=_text(merged.get("serial")),
        model=_text(merged.get("model")),
        hostname=_text(merged.get("hostname")),
        uptime_s=uptime_seconds(merged.get("uptime")),
    )


def chassis(records: Iterable[Record]) -> Record:
    """The chassis among ``show inventory`` records (named Chassis, else the first): model, serial."""
    recs = list(records)
    pick = next(
        (r for r in recs if str(r.get("name") or "").strip().lower() == "chassis"),
        recs[0] if recs else {},
    )
    return {"model": _text(pick.get("model")), "serial": _text(pick.get("serial"))}


def to_interface(rec: Record) -> Interface:
    """One merged record (status + switchport + description) -> :class:`Interface`.

    Known keys: name, status (one word for admin and oper) or admin/oper or
    admin_up/oper_up (bools), vlan (the status table's Vlan column: a number,
    ``trunk``, ``routed``), mode, access_vlan, trunk_vlans, speed, description.
    """
    admin_up, oper_up = rec.get("admin_up"), rec.get("oper_up")
    if rec.get("status") is not None and (admin_up is None or oper_up is None):
        a, o = map_status(rec.get("status"))
        admin_up = a if admin_up is None else admin_up
        oper_up = o if oper_up is None else oper_up
    if rec.get("admin") is not None and admin_up is None:
        admin_up = {"up": True, "down": False}.get(str(rec["admin"]).lower())
    if rec.get("oper") is not None and oper_up is None:
        oper_up = {"up": True, "down": False}.get(str(rec["oper"]).lower())
    vlan_col = _text(rec.get("vlan"))
    mode = map_mode(rec.get("mode")) if rec.get("mode") else PortMode.UNKNOWN
    if str(rec.get("switchport", "")).lower() == "disabled":
        mode = PortMode.ROUTED
    access_vlan = _int(rec.get("access_vlan"))
    if mode == PortMode.UNKNOWN and vlan_col is not None:
        mode = PortMode.ACCESS if vlan_col.isdigit() else map_mode(vlan_col)
    if (
        access_vlan is None
        and vlan_col is not None
        and vlan_col.isdigit()
        and mode == PortMode.ACCESS
    ):
        access_vlan = int(vlan_col)
    trunk: list[int] = []
    if mode == PortMode.TRUNK:
        try:
            trunk = parse_vlan_list(_text(rec.get("trunk_vlans")))
        except ValueError:
            trunk = []
    if mode != PortMode.ACCESS:
        access_vlan = None
    return Interface(
        name=str(rec["name"]),
        admin_up=admin_up if isinstance(admin_up, bool) else None,
        oper_up=oper_up if isinstance(oper_up, bool) else None,
        speed_mbps=speed_mbps(rec.get("speed")),
        mode=mode,
        access_vlan=access_vlan,
        trunk_vlans=trunk,
        description=_text(rec.get("description")),
    )


def merge_by_name(
    *tables: Iterable[Record], abbreviations: Mapping[str, str] | None = None
) -> list[Record]:
    """Join tables on the interface name (canonicalised); the first table sets the order and the ports."""
    abbreviations = abbreviations or {}
    order: list[str] = []
    merged: dict[str, Record] = {}
    for i, table in enumerate(tables):
        for rec in table:
            if not rec.get("name"):
                continue
            name = canonical_name(str(rec["name"]), abbreviations)
            if name not in merged:
                if i:
                    continue  # a port only a later table knows (a VLAN SVI ...): not a front-panel port
                merged[name] = {}
                order.append(name)
            target = merged[name]
            for k, v in rec.items():
                if v is not None and (
                    k not in target or _text(target.get(k)) is None or i
                ):
                    if i and _text(v) is None and k in target:
                        continue
                    target[k] = v
            target["name"] = name
    return [merged[n] for n in order]


def to_neighbor(
    rec: Record, abbreviations: Mapping[str, str] | None = None
) -> LldpNeighbor:
    return LldpNeighbor(
        local_port=canonical_name(str(rec["local_port"]), abbreviations or {}),
        remote_system=_text(rec.get("remote_system")),
        remote_port=_text(rec.get("remote_port")),
        remote_chassis_id=_text(rec.get("remote_chassis_id")),
    )


def to_mac_entries(records: Iterable[Record], abbreviations: Mapping[str, str] | None = None, *,
                   limit: int | None = None) -> list[MacEntry]:  # fmt: skip
    """MAC table records -> entries: MACs normalised, ports long-named.

    A row with several ports (a multicast group, EOS's second table), no port,
    or something that is not a MAC (a template's loose match) is no entry.
    At most ``limit`` entries, in the order printed.
    """
    out: list[MacEntry] = []
    for rec in records:
        if limit is not None and len(out) >= limit:
            break
        ports = rec.get("port")
        if isinstance(ports, list):
            if len(ports) != 1:
                continue
            ports = ports[0]
        mac = canonical_mac(_text(rec.get("mac")))
        port = _text(ports)
        if mac is None or not port:
            continue
        vlan = _text(rec.get("vlan"))
        out.append(MacEntry(mac=mac, port=canonical_name(port, abbreviations or {}), vlan=int(vlan) if vlan and vlan.isdigit() else None,
                            kind=(_text(rec.get("kind")) or "dynamic").lower()))  # fmt: skip
    return out


def to_port_config(iface: Interface) -> PortConfig:
    """The configurable part of an interface, every field filled."""
    return PortConfig(
        admin_up=iface.admin_up,
        mode=iface.mode,
        access_vlan=iface.access_vlan,
        trunk_vlans=list(iface.trunk_vlans) if iface.mode == PortMode.TRUNK else [],
        description=iface.description or "",
    )
