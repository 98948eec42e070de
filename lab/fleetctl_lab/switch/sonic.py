"""The SONiC CLI of a lab switch: the Linux shell with sonic-utilities.

The login lands in bash (``admin@name:~$``); ``show ...`` and
``sudo config ...`` are click programs. Errors are click's (``Usage: ...``,
``Try "show -h" for help.``, ``Error: No such command "foo".``) or bash's
(``-bash: foo: command not found``). ``sudo -s`` gives a root shell
(``root@name:/home/admin#``), which is what netmiko's ``edgecore_sonic``
(a LinuxSSH) uses for ``send_config_set``. Output formats follow
sonic-utilities' tests (../shared/switch-outputs/sonic).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import Any

from fleetctl_lab.switch.state import Port, SimSwitch

# What a failing SONiC command prints first (click usage errors, bash, sudo).
_FAILURE_PREFIXES = ("Usage:", "Error:", "-bash:", "Root privileges")


def _split_semicolons(line: str) -> list[str]:
    """Split a shell line on ``;`` outside quotes."""
    parts: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    for ch in line:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == ";":
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()] or [""]

class ClickError(Exception):
    """A click usage error: the message and the command path it belongs to."""

    def __init__(self, path: str, message: str, usage: str = "[OPTIONS] COMMAND [ARGS]...") -> None:
        super().__init__(message)
        self.path, self.message, self.usage = path, message, usage

    def render(self) -> str:
        return f'Usage: {self.path} {self.usage}\nTry "{self.path} -h" for help.\n\nError: {self.message}\n'


def table(headers: list[str], rows: list[list[str]], align: str) -> str:
    """tabulate's 'simple' format: columns two spaces apart, dashes under the headers.

    ``align`` has one letter per column: 'l' or 'r'.
    """
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells, widths, align, strict=True)).rstrip()

    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]) + "\n"


def grid(headers: list[str], rows: list[list[list[str]]]) -> str:
    """tabulate's 'grid' format; each row is a list of cells, each cell a list of lines."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max([widths[i]] + [len(x) for x in cell])
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    head_sep = "+" + "+".join("=" * (w + 2) for w in widths) + "+"

    def line(cells: list[str], first_right: bool = True) -> str:
        return "|" + "|".join(
            f" {c.rjust(w) if (i == 0 and first_right) else c.ljust(w)} " for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ) + "|"  # fmt: skip

    out = [sep, line(headers), head_sep]
    for r in rows:
        height = max(len(c) for c in r) or 1
        for k in range(height):
            out.append(line([c[k] if k < len(c) else "" for c in r]))
        out.append(sep)
    return "\n".join(out) + "\n"


class SonicSession:
    """One SSH session's shell state."""

    def __init__(self, sw: SimSwitch, username: str = "admin") -> None:
        self.sw = sw
        self.username = username
        self.root = username == "root"
        self.last_status = 0  # $? of the last command
        self.closed = False

    def banner(self) -> str:
        return (
            "Linux {0} 6.1.0-11-2-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.38-4 (2023-08-08) x86_64\n"
            "You are on\n"
            "  ____   ___  _   _ _  ____\n"
            " / ___| / _ \\| \\ | (_)/ ___|\n"
            " \\___ \\| | | |  \\| | | |\n"
            "  ___) | |_| | |\\  | | |___\n"
            " |____/ \\___/|_| \\_|_|\\____|\n\n"
            "-- Software for Open Networking in the Cloud --\n\n"
            "Unauthorized access and/or use are prohibited.\n"
            "All access and/or use are subject to monitoring.\n\n"
            "Help:    https://sonic-net.github.io/SONiC/\n\n"
            f"Last login: {time.strftime('%a %b %d %H:%M:%S %Y')} from 127.0.0.1\n"
        ).format(self.sw.hostname)

    def prompt(self) -> str:
        if self.root:
            return f"root@{self.sw.hostname}:/home/{self.username if self.username != 'root' else 'admin'}# "
        return f"{self.username}@{self.sw.hostname}:~$ "

    # --- running a line ---------------------------------------------------------------------

    def execute(self, line: str) -> str:
        """Run a shell line: commands separated by ``;``, ``echo`` with ``$?``.

        SONiC's CLI is bash, and fleetctl's driver (like any script) appends
        ``; echo @@rc=$?`` to learn whether a command failed.
        """
        out = []
        for part in _split_semicolons(line):
            words = part.strip().split(None, 1)
            if words and words[0] == "echo":
                text = words[1] if len(words) > 1 else ""
                out.append(text.replace("$?", str(self.last_status)).strip("'\"") + "\n")
                self.last_status = 0
                continue
            res = self._execute_one(part)
            self.last_status = 1 if res.startswith(_FAILURE_PREFIXES) else 0
            out.append(res)
        return "".join(out)

    def _execute_one(self, line: str) -> str:
        line = line.strip()
        if not line or line.startswith("#"):
            return ""
        self.sw.counters["commands"] += 1
        try:
            argv = shlex.split(line)
        except ValueError:
            return "-bash: syntax error: unexpected end of file\n"
        grep = None
        if "|" in argv:
            i = argv.index("|")
            argv, grep = argv[:i], argv[i + 1 :]
        out = self._run(argv)
        if grep and grep[0] == "grep" and len(grep) > 1:
            pat = grep[-1]
            out = "".join(ln + "\n" for ln in out.splitlines() if pat in ln)
        if out.startswith(_FAILURE_PREFIXES):
            self.sw.counters["bad_commands"] += 1
        return out

    def _run(self, argv: list[str]) -> str:
        cmd, args = argv[0], argv[1:]
        sudo = False
        if cmd == "sudo":
            if not args:
                return "usage: sudo -h | -K | -k | -V\n"
            if args[0] in ("-s", "-i", "su", "bash"):
                self.root = True
                return ""
            sudo, cmd, args = True, args[0], args[1:]
        if cmd in ("exit", "logout"):
            if self.root and self.username != "root":
                self.root = False
            else:
                self.closed = True
            return ""
        if cmd == "show":
            return self._click(SHOW, "show", args)
        if cmd == "config":
            if not (sudo or self.root):
                return "Root privileges are required for this operation\n"
            return self._click(CONFIG, "config", args)
        if cmd == "hostname":
            return self.sw.hostname + "\n"
        if cmd == "whoami":
            return ("root" if (sudo or self.root) else self.username) + "\n"
        if cmd in ("echo",):
            return " ".join(args) + "\n"
        if cmd in ("true", ":"):
            return ""
        return f"-bash: {cmd}: command not found\n"

    def _click(self, tree: dict[str, Any], path: str, args: list[str]) -> str:
        """Walk a click group tree with sonic-utilities' AliasedGroup prefix matching."""
        node: Any = tree
        while isinstance(node, dict):
            if not args or args[0] in ("-h", "--help", "-?"):
                names = "\n".join(f"  {k}" for k in sorted(node))
                return f"Usage: {path} [OPTIONS] COMMAND [ARGS]...\n\nCommands:\n{names}\n"
            word, args = args[0], args[1:]
            if word in node:
                key = word
            else:
                hits = sorted(k for k in node if k.startswith(word))
                if len(hits) > 1:
                    return ClickError(path, f"Too many matches: {', '.join(hits)}").render()
                if not hits:
                    return ClickError(path, f'No such command "{word}".').render()
                key = hits[0]
            path, node = f"{path} {key}", node[key]
        fn: Callable[..., str] = node
        try:
            return fn(self, path, args)
        except ClickError as e:
            return e.render()

    # --- helpers -----------------------------------------------------------------------------

    def port_or_fail(self, path: str, name: str, usage: str) -> Port:
        p = self.sw.ports.get(name)
        if p is None:
            raise ClickError(path, "Interface name is invalid. Please enter a valid interface name!!", usage)
        return p

    def alias(self, p: Port) -> str:
        return f"etp{p.ifindex}"

    def vlan_word(self, p: Port) -> str:
        if p.cfg.mode == "routed":
            return "routed"
        return "trunk" if p.cfg.mode == "trunk" else "access"


# --- show --------------------------------------------------------------------------------------


def _no_args(path: str, args: list[str]) -> None:
    if args:
        raise ClickError(path, f"Got unexpected extra argument ({args[0]})", "[OPTIONS]")


def show_version(s: SonicSession, path: str, args: list[str]) -> str:
    _no_args(path, args)
    sp = s.sw.spec
    up = int(s.sw.uptime())
    d, rem = divmod(up, 86400)
    h, m = divmod(rem // 60, 60)
    return (
        f"\nSONiC Software Version: {sp.os_version}\n"
        "SONiC OS Version: 12\n"
        "Distribution: Debian 12.5\n"
        "Kernel: 6.1.0-11-2-amd64\n"
        "Build commit: 3a5c5b8ee\n"
        "Build date: Mon Feb 26 10:14:29 UTC 2024\n"
        "Built by: sonicbld@jenkins-worker-4\n\n"
        "Platform: x86_64-mlnx_msn2700-r0\n"
        "HwSKU: Mellanox-SN2700\n"
        "ASIC: mellanox\n"
        "ASIC Count: 1\n"
        f"Serial Number: {sp.serial}\n"
        f"Model Number: {sp.model}\n"
        "Hardware Revision: A1\n"
        f"Uptime: {time.strftime('%H:%M:%S')} up {d} days, {h:2d}:{m:02d},  1 user,  load average: 0.52, 0.58, 0.59\n"
        f"Date: {time.strftime('%a %d %b %Y %H:%M:%S')}\n\n"
        "Docker images:\n"
        "REPOSITORY                 TAG                 IMAGE ID            SIZE\n"
        "docker-orchagent           latest              5f4c1e2a9b3d        345MB\n"
        "docker-syncd-mlnx          latest              8d1a7c3e6f20        640MB\n"
        "docker-lldp                latest              1b9e8f7d6c5a        314MB\n"
        "docker-snmp                latest              9c2d4e6f8a1b        324MB\n"
        "docker-database            latest              7a6b5c4d3e2f        301MB\n"
    )


def show_interfaces_status(s: SonicSession, path: str, args: list[str]) -> str:
    ports = list(s.sw.ports.values())
    if args:
        p = s.port_or_fail(path, args[0], "[OPTIONS] [INTERFACENAME]")
        ports = [p]
    now = time.time()
    rows = []
    for p in ports:
        lanes = ",".join(str(p.ifindex * 4 - 4 + k) for k in range(4)) if p.speed_mbps >= 40_000 else str(p.ifindex - 1)
        rows.append([p.name, lanes, f"{p.speed_mbps // 1000}G", "9100", "rs" if p.speed_mbps >= 25_000 else "N/A", s.alias(p),
                     s.vlan_word(p), "up" if s.sw.oper_up(p, now) else "down", "up" if p.cfg.enabled else "down",
                     "QSFP28 or later" if p.neighbor else "N/A", "off"])  # fmt: skip
    headers = ["Interface", "Lanes", "Speed", "MTU", "FEC", "Alias", "Vlan", "Oper", "Admin", "Type", "Asym PFC"]
    return table(headers, rows, "r" * len(headers))


def show_interfaces_description(s: SonicSession, path: str, args: list[str]) -> str:
    ports = list(s.sw.ports.values())
    if args:
        ports = [s.port_or_fail(path, args[0], "[OPTIONS] [INTERFACENAME]")]
    now = time.time()
    rows = [[p.name, "up" if s.sw.oper_up(p, now) else "down", "up" if p.cfg.enabled else "down", s.alias(p), p.cfg.description]
            for p in ports]  # fmt: skip
    return table(["Interface", "Oper", "Admin", "Alias", "Description"], rows, "rrrrr")


def show_vlan_brief(s: SonicSession, path: str, args: list[str]) -> str:
    _no_args(path, args)
    rows = []
    for v in sorted(s.sw.vlans):
        members = s.sw.vlan_members(v)
        rows.append([[str(v)], [], [p.name for p, _ in members], ["tagged" if t else "untagged" for _, t in members], [], ["disabled"]])
    return grid(["VLAN ID", "IP Address", "Ports", "Port Tagging", "DHCP Helper Address", "Proxy ARP"], rows)


def show_vlan_config(s: SonicSession, path: str, args: list[str]) -> str:
    _no_args(path, args)
    rows = []
    for v in sorted(s.sw.vlans):
        members = s.sw.vlan_members(v)
        if not members:
            rows.append([f"Vlan{v}", str(v), "", ""])
        for p, tagged in members:
            rows.append([f"Vlan{v}", str(v), p.name, "tagged" if tagged else "untagged"])
    return table(["Name", "VID", "Member", "Mode"], rows, "lrll")


def show_mac(s: SonicSession, path: str, args: list[str]) -> str:
    """sonic-utilities' fdbshow: one row per FDB entry, then the total."""
    _no_args(path, args)
    rows = [[str(i), str(vlan), mac.upper(), p.name, "Dynamic"]  # fdbshow prints the MAC upper-case
            for i, (vlan, mac, p) in enumerate(s.sw.mac_table(), start=1)]  # fmt: skip
    return table(["No.", "Vlan", "MacAddress", "Port", "Type"], rows, "rrlll") + f"Total number of entries {len(rows)}\n"


def show_lldp_table(s: SonicSession, path: str, args: list[str]) -> str:
    _no_args(path, args)
    now = time.time()
    rows = []
    for p in s.sw.ports.values():
        nb = s.sw.lldp_neighbor(p, now)
        if nb:
            rows.append([p.name, nb.system, nb.port, "BR" if nb.kind == "switch" else "R", nb.port])
    out = "Capability codes: (R) Router, (B) Bridge, (O) Other\n"
    out += table(["LocalPort", "RemoteDevice", "RemotePortID", "Capability", "RemotePortDescr"], rows, "lllll")
    return out + "-" * 50 + f"\nTotal entries displayed:  {len(rows)}\n"


def show_lldp_neighbors(s: SonicSession, path: str, args: list[str]) -> str:
    ports = list(s.sw.ports.values())
    if args:
        ports = [s.port_or_fail(path, args[0], "[OPTIONS] [INTERFACENAME]")]
    now = time.time()
    bar = "-" * 79
    out = [bar, "LLDP neighbors:", bar]
    for p in ports:
        nb = s.sw.lldp_neighbor(p, now)
        if nb is None:
            continue
        up = int(now - max(s.sw.last_change(p, now), s.sw.table_changed))
        d, rem = divmod(up, 86400)
        descr = nb.description or (
            "Debian GNU/Linux 12 (bookworm) Linux 6.1.0-18-amd64 #1 SMP x86_64" if nb.kind == "server"
            else f"SONiC Software Version: {s.sw.spec.os_version}"
        )  # fmt: skip
        out += [
            f"Interface:    {p.name}, via: LLDP, RID: {p.ifindex}, Time: {d} day, {rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d}",
            "  Chassis:",
            f"    ChassisID:    mac {nb.chassis_id}",
            f"    SysName:      {nb.system}",
            f"    SysDescr:     {descr}",
            f"    Capability:   Bridge, {'on' if nb.kind == 'switch' else 'off'}",
            "    Capability:   Router, on",
            "  Port:",
            f"    PortID:       ifname {nb.port}",
            f"    PortDescr:    {nb.port}",
            "    TTL:          120",
            bar,
        ]
    return "\n".join(out) + "\n"


def show_interfaces_counters(s: SonicSession, path: str, args: list[str]) -> str:
    """portstat's table: packets, rates, utilisation, errors (RX_ERR counts CRC errors)."""
    now = time.time()
    rows = []
    for p in s.sw.ports.values():
        up = s.sw.oper_up(p, now)
        rx, tx = p.in_octets.value(now), p.out_octets.value(now)
        line = p.speed_mbps * 1e6 / 8

        def bps(v: float) -> str:
            return f"{v / 1e6:.2f} MB/s" if v >= 1e6 else (f"{v / 1e3:.2f} KB/s" if v >= 1e3 else f"{v:.2f} B/s")

        rows.append([p.name, "U" if up else ("X" if not p.cfg.enabled else "D"), f"{rx // 800:,}", bps(p.in_octets.rate),
                     f"{100 * p.in_octets.rate / line:.2f}%", f"{p.in_errors.value(now):,}", "0", "0", f"{tx // 800:,}",
                     bps(p.out_octets.rate), f"{100 * p.out_octets.rate / line:.2f}%", "0", "0", "0"])  # fmt: skip
    headers = ["IFACE", "STATE", "RX_OK", "RX_BPS", "RX_UTIL", "RX_ERR", "RX_DRP", "RX_OVR",
               "TX_OK", "TX_BPS", "TX_UTIL", "TX_ERR", "TX_DRP", "TX_OVR"]  # fmt: skip
    return table(headers, rows, "r" * len(headers))


def show_running_interfaces(s: SonicSession, path: str, args: list[str]) -> str:
    import json

    doc: dict[str, Any] = {}
    for p in s.sw.ports.values():
        doc[p.name] = {"admin_status": "up" if p.cfg.enabled else "down", "alias": s.alias(p), "description": p.cfg.description,
                       "index": str(p.ifindex), "mtu": "9100", "speed": str(p.speed_mbps)}  # fmt: skip
    return json.dumps({"PORT": doc}, indent=4) + "\n"


# --- config ------------------------------------------------------------------------------------


def _vid(path: str, word: str, usage: str) -> int:
    if not word.isdigit():
        raise ClickError(path, f"Invalid value for \"<vid>\": {word} is not a valid integer", usage)
    v = int(word)
    if not 1 <= v <= 4094:
        raise ClickError(path, f"Invalid VLAN ID {v} (2-4094)", usage)
    return v


def config_vlan_add(s: SonicSession, path: str, args: list[str]) -> str:
    usage = "[OPTIONS] <vid>"
    if len(args) != 1:
        raise ClickError(path, 'Missing argument "<vid>".' if not args else f"Got unexpected extra argument ({args[1]})", usage)
    v = _vid(path, args[0], usage)
    if v in s.sw.vlans:
        raise ClickError(path, f"Vlan{v} already exists", usage)
    s.sw.vlans[v] = f"Vlan{v}"
    s.sw.changed()
    return ""


def config_vlan_del(s: SonicSession, path: str, args: list[str]) -> str:
    usage = "[OPTIONS] <vid>"
    if len(args) != 1:
        raise ClickError(path, 'Missing argument "<vid>".' if not args else f"Got unexpected extra argument ({args[1]})", usage)
    v = _vid(path, args[0], usage)
    if v not in s.sw.vlans:
        raise ClickError(path, f"Vlan{v} does not exist", usage)
    if s.sw.vlan_members(v):
        raise ClickError(path, f"Vlan{v} can not be removed. First remove all members assigned to this VLAN.", usage)
    del s.sw.vlans[v]
    s.sw.changed()
    return ""


def _member_args(path: str, args: list[str], allow_untagged: bool) -> tuple[int, str, bool]:
    usage = "[OPTIONS] <vid> port"
    untagged = False
    rest = []
    for a in args:
        if a in ("-u", "--untagged") and allow_untagged:
            untagged = True
        elif a.startswith("-"):
            raise ClickError(path, f"no such option: {a}", usage)
        else:
            rest.append(a)
    if len(rest) < 2:
        raise ClickError(path, 'Missing argument "<vid>".' if not rest else 'Missing argument "port".', usage)
    if len(rest) > 2:
        raise ClickError(path, f"Got unexpected extra argument ({rest[2]})", usage)
    return _vid(path, rest[0], usage), rest[1], untagged


def _member_port(s: SonicSession, path: str, v: int, name: str) -> tuple[Port, str]:
    """The port a `config vlan member add|del` names, after SONiC's checks (VLAN, then port)."""
    usage = "[OPTIONS] <vid> port"
    if v not in s.sw.vlans:
        raise ClickError(path, f"Vlan{v} does not exist", usage)
    p = s.sw.ports.get(name)
    if p is None:
        raise ClickError(path, f"{name} does not exist", usage)
    return p, usage


def config_member_add(s: SonicSession, path: str, args: list[str]) -> str:
    v, name, untagged = _member_args(path, args, True)
    p, usage = _member_port(s, path, v, name)
    c = p.cfg
    if any(q is p for q, _ in s.sw.vlan_members(v)):
        raise ClickError(path, f"{name} is already a member of Vlan{v}", usage)
    if untagged:
        current = c.access_vlan if c.mode == "access" else (c.native_vlan if c.mode == "trunk" else None)
        if current is not None:
            raise ClickError(path, f"{name} is already untagged member!", usage)
        if c.mode == "routed":
            c.mode, c.access_vlan, c.trunk_vlans = "access", v, None
        else:
            c.native_vlan = v
    else:
        if c.mode == "routed":
            c.mode, c.trunk_vlans, c.native_vlan = "trunk", [v], None
        elif c.mode == "access":
            c.mode, c.trunk_vlans, c.native_vlan = "trunk", [v], c.access_vlan
        else:
            c.trunk_vlans = sorted(set(c.trunk_vlans or []) | {v})
    s.sw.changed()
    return ""


def config_member_del(s: SonicSession, path: str, args: list[str]) -> str:
    v, name, _ = _member_args(path, args, False)
    p, usage = _member_port(s, path, v, name)
    c = p.cfg
    if not any(q is p for q, _ in s.sw.vlan_members(v)):
        raise ClickError(path, f"{name} is not a member of Vlan{v}", usage)
    if c.mode == "access":
        c.mode, c.native_vlan = "routed", None
    else:
        if c.native_vlan == v:
            c.native_vlan = None
        if c.trunk_vlans is not None:
            c.trunk_vlans = [x for x in c.trunk_vlans if x != v]
        if not c.trunk_vlans:
            if c.native_vlan is not None:
                c.mode, c.access_vlan, c.trunk_vlans = "access", c.native_vlan, None
            else:
                c.mode, c.trunk_vlans = "routed", None
    s.sw.changed()
    return ""


def _port_arg(s: SonicSession, path: str, args: list[str], usage: str, extra: int = 0) -> Port:
    if not args:
        raise ClickError(path, 'Missing argument "<interface_name>".', usage)
    if len(args) > 1 + extra:
        raise ClickError(path, f"Got unexpected extra argument ({args[1 + extra]})", usage)
    return s.port_or_fail(path, args[0], usage)


def config_startup(s: SonicSession, path: str, args: list[str]) -> str:
    s.sw.set_enabled(_port_arg(s, path, args, "[OPTIONS] <interface_name>"), True)
    return ""


def config_shutdown(s: SonicSession, path: str, args: list[str]) -> str:
    s.sw.set_enabled(_port_arg(s, path, args, "[OPTIONS] <interface_name>"), False)
    return ""


def config_description(s: SonicSession, path: str, args: list[str]) -> str:
    usage = "[OPTIONS] <interface_name> <interface_decription>"
    if len(args) < 2:
        raise ClickError(path, 'Missing argument "<interface_decription>".' if args else 'Missing argument "<interface_name>".', usage)
    p = _port_arg(s, path, args, usage, extra=1)
    p.cfg.description = args[1]
    s.sw.changed()
    return ""


def config_save(s: SonicSession, path: str, args: list[str]) -> str:
    if "-y" not in args and "--yes" not in args:
        # click.confirm would wait for an answer; the lab answers no, as an empty line does.
        return "Existing files will be overwritten, continue? [y/N]: Aborted!\n"
    s.sw.save()
    return "Running command: /usr/local/bin/sonic-cfggen -d --print-data > /etc/sonic/config_db.json\n"


SHOW: dict[str, Any] = {
    "version": show_version,
    "interfaces": {"status": show_interfaces_status, "description": show_interfaces_description,
                   "counters": show_interfaces_counters},
    "vlan": {"brief": show_vlan_brief, "config": show_vlan_config},
    "lldp": {"table": show_lldp_table, "neighbors": show_lldp_neighbors},
    "mac": show_mac,
    "runningconfiguration": {"interfaces": show_running_interfaces},
}
CONFIG: dict[str, Any] = {
    "vlan": {"add": config_vlan_add, "del": config_vlan_del, "member": {"add": config_member_add, "del": config_member_del}},
    "interface": {"startup": config_startup, "shutdown": config_shutdown, "description": config_description},
    "save": config_save,
}
