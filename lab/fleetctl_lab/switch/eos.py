"""The Arista EOS CLI of a lab switch (netmiko ``arista_eos``).

Modes and prompts as on EOS: ``name>`` (exec), ``name#`` (after ``enable``),
``name(config)#``, ``name(config-if-Et1)#``, ``name(config-vlan-10)#``.
``show`` commands work in every mode, as on EOS. Output formats follow what
real switches print (see ../shared/switch-outputs/arista_eos); the text is
generated here from the switch's state.
"""

from __future__ import annotations

import re
import time
import zlib
from typing import Any

from fleetctl_lab.switch.grammar import (
    AMBIGUOUS,
    INCOMPLETE,
    OK,
    Grammar,
    Match,
    format_vlans,
)
from fleetctl_lab.switch.state import Port, SimSwitch

# EOS's own error texts.
ERR_INVALID = "% Invalid input"
ERR_INCOMPLETE = "% Incomplete command"
ERR_AMBIGUOUS = "% Ambiguous command"
ERR_PRIVILEGED = "% Invalid input (privileged mode required)"

_SHORT = {"Ethernet": "Et", "Management": "Ma", "Port-Channel": "Po", "Vlan": "Vl"}


def short_name(name: str) -> str:
    for long, short in _SHORT.items():
        if name.startswith(long):
            return short + name[len(long):]
    return name


def speed_label(mbps: int) -> str:
    return f"{mbps // 1000}G" if mbps >= 1000 else f"{mbps}M"


def phy_type(p: Port) -> str:
    if p.name.startswith("Management"):
        return "10/100/1000"
    return {100_000: "100GBASE-CR4", 40_000: "40GBASE-CR4", 25_000: "25GBASE-CR", 10_000: "10GBASE-CR"}.get(
        p.speed_mbps, "1000BASE-T"
    )


def uptime_words(seconds: float) -> str:
    """EOS style: '2 days, 15 hours and 56 minutes'."""
    m = int(seconds // 60)
    d, rem = divmod(m, 1440)
    h, mi = divmod(rem, 60)
    parts = ([f"{d} day{'s' if d != 1 else ''}"] if d else []) + ([f"{h} hour{'s' if h != 1 else ''}"] if h or d else [])
    last = f"{mi} minute{'s' if mi != 1 else ''}"
    return f"{', '.join(parts)} and {last}" if parts else last


def ago(seconds: float) -> str:
    s = int(max(0, seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d} days, " if d else "") + f"{h}:{m:02d}:{s:02d} ago"


def dotted_mac(mac: str) -> str:
    h = mac.replace(":", "").lower()
    return f"{h[0:4]}.{h[4:8]}.{h[8:12]}"


class EOSSession:
    """One SSH session's CLI state."""

    def __init__(self, sw: SimSwitch, username: str = "admin") -> None:
        self.sw = sw
        self.username = username
        self.mode = "exec"  # exec | enable | config | config-if | config-vlan
        self.intf: str | None = None
        self.vlan: int | None = None
        self.closed = False
        self.term_length = 24
        self.term_width = 80
        self.exec_g, self.enable_g, self.config_g, self.if_g, self.vlan_g = (Grammar() for _ in range(5))
        self._build()

    # --- the prompt -------------------------------------------------------------------

    def banner(self) -> str:
        return f"Last login: {time.strftime('%a %b %d %H:%M:%S %Y')} from 127.0.0.1\n"

    def prompt(self) -> str:
        h = self.sw.hostname
        if self.mode == "exec":
            return f"{h}>"
        if self.mode == "enable":
            return f"{h}#"
        if self.mode == "config":
            return f"{h}(config)#"
        if self.mode == "config-if":
            return f"{h}(config-if-{short_name(self.intf or '')})#"
        return f"{h}(config-vlan-{self.vlan})#"

    # --- running a line ------------------------------------------------------------------

    def execute(self, line: str) -> str:
        """Run one line; return its output ('' or text ending in a newline)."""
        line = line.strip()
        if not line or line.startswith("!"):
            return ""
        self.sw.counters["commands"] += 1
        pipe = None
        if "|" in line:
            line, _, pipe = line.partition("|")
            line, pipe = line.strip(), pipe.strip()
        out = self._dispatch(line)
        if pipe and out and not out.startswith("%"):
            out = self._filter(out, pipe)
        if out.startswith("%"):
            self.sw.counters["bad_commands"] += 1
        return out if not out or out.endswith("\n") else out + "\n"

    def _grammars(self) -> list[Grammar]:
        if self.mode == "exec":
            return [self.exec_g]
        if self.mode == "enable":
            return [self.enable_g, self.exec_g]
        if self.mode == "config":
            return [self.config_g, self.enable_g, self.exec_g]
        if self.mode == "config-if":
            return [self.if_g, self.config_g, self.enable_g, self.exec_g]
        return [self.vlan_g, self.config_g, self.enable_g, self.exec_g]

    def _dispatch(self, line: str) -> str:
        best: Match | None = None
        for g in self._grammars():
            m = g.match(line)
            if m.status == OK:
                assert m.handler is not None
                return m.handler(*m.args) or ""
            if best is None or m.depth > best.depth:
                best = m
        if self.mode == "exec":
            # A privileged command typed before `enable`.
            for g in (self.enable_g, self.config_g):
                if g.match(line).status == OK or (line.split()[0].lower() in ("configure", "conf", "config")):
                    return ERR_PRIVILEGED
        assert best is not None
        if best.status == AMBIGUOUS:
            return ERR_AMBIGUOUS
        if best.status == INCOMPLETE:
            return ERR_INCOMPLETE
        return ERR_INVALID

    @staticmethod
    def _filter(out: str, pipe: str) -> str:
        verb, _, arg = pipe.partition(" ")
        verb = verb.lower()
        lines = out.splitlines()
        if "include".startswith(verb) and arg:
            lines = [ln for ln in lines if re.search(arg, ln)]
        elif "exclude".startswith(verb) and arg:
            lines = [ln for ln in lines if not re.search(arg, ln)]
        elif "begin".startswith(verb) and arg:
            for i, ln in enumerate(lines):
                if re.search(arg, ln):
                    lines = lines[i:]
                    break
            else:
                lines = []
        elif "no-more".startswith(verb):
            pass
        else:
            return ERR_INVALID
        return "\n".join(lines) + ("\n" if lines else "")

    # --- the command table ---------------------------------------------------------------

    def _build(self) -> None:
        ex, en, cf, ifg, vg = self.exec_g, self.enable_g, self.config_g, self.if_g, self.vlan_g
        add = Grammar.add
        # exec (and every mode above it)
        add(ex, "enable", self._enable)
        add(ex, "disable", self._disable)
        for w in ("exit", "logout", "quit"):
            add(ex, w, self._exit)
        add(ex, "terminal length <num>", self._term_length)
        add(ex, "terminal width <num>", self._term_width)
        add(ex, "terminal dont-ask", lambda: "")
        add(ex, "show version", self.show_version)
        add(ex, "show hostname", lambda: f"Hostname: {self.sw.hostname}\nFQDN:     {self.sw.hostname}\n")
        add(ex, "show clock", lambda: time.strftime("%a %b %d %H:%M:%S %Y\nTimezone: UTC\nClock source: local\n", time.gmtime()))
        add(ex, "show interfaces", self.show_interfaces)
        add(ex, "show interfaces <intf>", lambda i: self.show_interfaces(i))
        add(ex, "show interfaces status", self.show_interfaces_status)
        add(ex, "show interfaces <intf> status", lambda i: self.show_interfaces_status(i))
        add(ex, "show interfaces description", self.show_interfaces_description)
        add(ex, "show interfaces switchport", self.show_switchport)
        add(ex, "show interfaces <intf> switchport", lambda i: self.show_switchport(i))
        add(ex, "show vlan", self.show_vlan)
        add(ex, "show vlan brief", self.show_vlan)
        add(ex, "show vlan <vlan>", lambda v: self.show_vlan(v))
        add(ex, "show lldp neighbors", self.show_lldp)
        add(ex, "show lldp neighbors detail", lambda: self.show_lldp_detail())
        add(ex, "show lldp neighbors <intf>", lambda i: self.show_lldp(i))
        add(ex, "show lldp neighbors <intf> detail", lambda i: self.show_lldp_detail(i))
        add(ex, "show inventory", self.show_inventory)
        add(ex, "show mac address-table", self.show_mac_address_table)
        add(ex, "show mac address-table dynamic", self.show_mac_address_table)
        add(ex, "show mac address-table interface <intf>", lambda i: self.show_mac_address_table(i))
        # privileged
        add(en, "configure", self._configure)
        add(en, "configure terminal", self._configure)
        add(en, "configure session", self._configure)
        add(en, "write", self._save)
        add(en, "write memory", self._save)
        add(en, "copy running-config startup-config", self._save)
        add(en, "show running-config", self.show_running_config)
        add(en, "show running-config all", self.show_running_config)
        add(en, "show running-config interfaces <intf>", lambda i: self.show_running_config_intf(i))
        add(en, "show startup-config", lambda: self.show_running_config(saved=True))
        add(en, "reload", lambda: "% Reload is disabled in the lab; use the lab's reboot fault\n")
        # config
        add(cf, "interface <intf>", self._interface)
        add(cf, "vlan <vlans>", self._vlan)
        add(cf, "no vlan <vlans>", self._no_vlan)
        add(cf, "hostname <word>", self._hostname)
        add(cf, "end", self._end)
        add(cf, "exit", self._exit_mode)
        add(cf, "default interface <intf>", self._default_intf)
        # config-if
        add(ifg, "switchport", lambda: self._if_set(mode_keep=True))
        add(ifg, "no switchport", lambda: self._if_set(mode="routed"))
        add(ifg, "switchport mode access", lambda: self._if_set(mode="access"))
        add(ifg, "switchport mode trunk", lambda: self._if_set(mode="trunk"))
        add(ifg, "no switchport mode", lambda: self._if_set(mode="access"))
        add(ifg, "switchport access vlan <vlan>", self._access_vlan)
        add(ifg, "no switchport access vlan", lambda: self._if_set(access_vlan=1))
        add(ifg, "switchport trunk allowed vlan <vlans>", lambda v: self._trunk("set", v))
        add(ifg, "switchport trunk allowed vlan add <vlans>", lambda v: self._trunk("add", v))
        add(ifg, "switchport trunk allowed vlan remove <vlans>", lambda v: self._trunk("remove", v))
        add(ifg, "switchport trunk allowed vlan all", lambda: self._trunk("all", []))
        add(ifg, "switchport trunk allowed vlan none", lambda: self._trunk("none", []))
        add(ifg, "no switchport trunk allowed vlan", lambda: self._trunk("all", []))
        add(ifg, "switchport trunk native vlan <vlan>", lambda v: self._if_set(native_vlan=v))
        add(ifg, "no switchport trunk native vlan", lambda: self._if_set(native_vlan=1))
        add(ifg, "shutdown", lambda: self._shutdown(True))
        add(ifg, "no shutdown", lambda: self._shutdown(False))
        add(ifg, "description <text>", lambda t: self._if_set(description=t[:240]))
        add(ifg, "no description", lambda: self._if_set(description=""))
        add(ifg, "exit", self._exit_mode)
        # config-vlan
        add(vg, "name <word>", self._vlan_name)
        add(vg, "exit", self._exit_mode)

    # --- mode changes ---------------------------------------------------------------------

    def _enable(self) -> str:
        if self.mode == "exec":
            self.mode = "enable"
        return ""

    def _disable(self) -> str:
        self.mode, self.intf, self.vlan = "exec", None, None
        return ""

    def _exit(self) -> str:
        self.closed = True
        return ""

    def _term_length(self, n: int) -> str:
        self.term_length = n
        return "Pagination disabled.\n" if n == 0 else ""

    def _term_width(self, n: int) -> str:
        self.term_width = n
        return f"Width set to {n} columns.\n"

    def _configure(self) -> str:
        self.mode = "config"
        return ""

    def _end(self) -> str:
        self.mode, self.intf, self.vlan = "enable", None, None
        return ""

    def _exit_mode(self) -> str:
        if self.mode in ("config-if", "config-vlan"):
            self.mode, self.intf, self.vlan = "config", None, None
        else:
            self.mode = "enable"
        return ""

    def _interface(self, name: str) -> str:
        if name not in self.sw.ports:
            return ERR_INVALID
        self.mode, self.intf, self.vlan = "config-if", name, None
        return ""

    def _vlan(self, vlans: list[int]) -> str:
        for v in vlans:
            self.sw.vlans.setdefault(v, f"VLAN{v:04d}")
        self.sw.changed()
        self.mode, self.intf, self.vlan = "config-vlan", None, vlans[0]
        return ""

    def _no_vlan(self, vlans: list[int]) -> str:
        for v in vlans:
            if v != 1:
                self.sw.vlans.pop(v, None)
        self.sw.changed()
        return ""

    def _vlan_name(self, name: str) -> str:
        if self.vlan is not None:
            self.sw.vlans[self.vlan] = name[:32]
            self.sw.changed()
        return ""

    def _hostname(self, name: str) -> str:
        self.sw.hostname = name
        self.sw.changed()
        return ""

    # --- interface configuration -------------------------------------------------------------

    def _port(self) -> Port:
        assert self.intf is not None
        return self.sw.ports[self.intf]

    def _if_set(self, mode_keep: bool = False, **changes: Any) -> str:
        p = self._port()
        if mode_keep and p.cfg.mode == "routed":
            p.cfg.mode = "access"
        for k, v in changes.items():
            setattr(p.cfg, k, v)
        if changes.get("mode") == "trunk" and p.cfg.native_vlan is None:
            p.cfg.native_vlan = 1
        self.sw.changed()
        return ""

    def _access_vlan(self, vlan: int) -> str:
        out = ""
        if vlan not in self.sw.vlans:
            # EOS creates an access VLAN that does not exist yet, and says so.
            self.sw.vlans[vlan] = f"VLAN{vlan:04d}"
            out = f"! Access VLAN does not exist. Creating vlan {vlan}\n"
        self._if_set(access_vlan=vlan)
        return out

    def _trunk(self, op: str, vlans: list[int]) -> str:
        p = self._port()
        cur = set(p.cfg.trunk_vlans) if p.cfg.trunk_vlans is not None else set(range(1, 4095))
        if op == "set":
            new: set[int] | None = set(vlans)
        elif op == "add":
            new = cur | set(vlans)
        elif op == "remove":
            new = cur - set(vlans)
        elif op == "none":
            new = set()
        else:
            new = None
        if new is not None and len(new) == 4094:
            new = None
        return self._if_set(trunk_vlans=sorted(new) if new is not None else None)

    def _shutdown(self, down: bool) -> str:
        self.sw.set_enabled(self._port(), not down)
        return ""

    def _default_intf(self, name: str) -> str:
        p = self.sw.ports.get(name)
        if p is None:
            return ERR_INVALID
        from fleetctl_lab.switch.state import PortConfig

        self.sw.set_enabled(p, True)
        p.cfg = PortConfig()
        self.sw.changed()
        return ""

    def _save(self) -> str:
        self.sw.save()
        return "Copy completed successfully.\n"

    # --- show ---------------------------------------------------------------------------------

    def _ports(self, name: str | None = None) -> list[Port] | None:
        if name is None:
            return list(self.sw.ports.values())
        p = self.sw.ports.get(name)
        return [p] if p else None

    def show_version(self) -> str:
        s = self.sw.spec
        mac = dotted_mac(s.mac)
        return (
            f"Arista {s.model}\n"
            f"Hardware version: 11.02\n"
            f"Serial number: {s.serial}\n"
            f"Hardware MAC address: {mac}\n"
            f"System MAC address: {mac}\n\n"
            f"Software image version: {s.os_version}\n"
            f"Architecture: x86_64\n"
            f"Internal build version: {s.os_version}-{zlib.crc32(s.os_version.encode()) % 10**8}.{s.os_version.replace('.', '')}\n"
            f"Internal build ID: 1e5d4c0a-9f1b-4a51-8e4d-{s.serial.lower().rjust(12, '0')[-12:]}\n"
            f"Image format version: 3.0\n"
            f"Image optimization: Strata-4GB\n\n"
            f"Uptime: {uptime_words(self.sw.uptime())}\n"
            f"Total memory: 8099732 kB\n"
            f"Free memory: 6052384 kB\n"
        )

    def show_interfaces(self, name: str | None = None) -> str:
        ports = self._ports(name)
        if ports is None:
            return ERR_INVALID
        now = time.time()
        mac = dotted_mac(self.sw.spec.mac)
        blocks = []
        for p in ports:
            up = self.sw.oper_up(p, now)
            link = "up" if up else ("administratively down" if not p.cfg.enabled else "down")
            proto = "up (connected)" if up else ("down (disabled)" if not p.cfg.enabled else "down (notconnect)")
            since = uptime_words(now - self.sw.last_change(p, now)).replace(" and ", ", ")
            changes = 1 + (int((now - p.faults["flap"]["t0"]) // p.faults["flap"]["period"]) if "flap" in p.faults else 0)
            rate_in = p.in_octets.rate * 8
            rate_out = p.out_octets.rate * 8
            pct_in = 100 * rate_in / (p.speed_mbps * 1e6)
            pct_out = 100 * rate_out / (p.speed_mbps * 1e6)
            octets_in, octets_out = p.in_octets.value(now), p.out_octets.value(now)
            errors = p.in_errors.value(now)
            lines = [
                f"{p.name} is {link}, line protocol is {proto}",
                f"  Hardware is Ethernet, address is {mac} (bia {mac})",
            ]
            if p.cfg.description:
                lines.append(f"  Description: {p.cfg.description}")
            lines += [
                f"  Ethernet MTU 9214 bytes, BW {p.speed_mbps * 1000} kbit",
                f"  Full-duplex, {speed_label(p.speed_mbps)}b/s, auto negotiation: off, uni-link: n/a",
                f"  {'Up' if up else 'Down'} {since}",
                "  Loopback Mode : None",
                f"  {changes} link status changes since last clear",
                "  Last clearing of \"show interface\" counters never",
                f"  5 minutes input rate {rate_in / 1e9:.2f} Gbps ({pct_in:.1f}% with framing overhead),"
                f" {int(p.in_octets.rate / 800)} packets/sec",
                f"  5 minutes output rate {rate_out / 1e9:.2f} Gbps ({pct_out:.1f}% with framing overhead),"
                f" {int(p.out_octets.rate / 800)} packets/sec",
                f"     {octets_in // 800} packets input, {octets_in} bytes",
                "     Received 0 broadcasts, 0 multicast",
                "     0 runts, 0 giants",
                f"     {errors} input errors, {errors} CRC, 0 alignment, 0 symbol, 0 input discards",
                "     0 PAUSE input",
                f"     {octets_out // 800} packets output, {octets_out} bytes",
                "     Sent 0 broadcasts, 0 multicast",
                "     0 output errors, 0 collisions",
                "     0 late collision, 0 deferred, 0 output discards",
                "     0 PAUSE output",
            ]
            blocks.append("\n".join(lines))
        return "\n".join(blocks) + "\n"

    def _status_word(self, p: Port, now: float) -> str:
        if not p.cfg.enabled:
            return "disabled"
        return "connected" if self.sw.oper_up(p, now) else "notconnect"

    def _vlan_word(self, p: Port) -> str:
        if p.name.startswith("Management") or p.cfg.mode == "routed":
            return "routed"
        return "trunk" if p.cfg.mode == "trunk" else str(p.cfg.access_vlan)

    def show_interfaces_status(self, name: str | None = None) -> str:
        ports = self._ports(name)
        if ports is None:
            return ERR_INVALID
        now = time.time()
        nw = max([len(p.cfg.description) for p in ports] + [4]) + 1
        lines = [f"{'Port':<11}{'Name':<{nw}}{'Status':<13}{'Vlan':<9}{'Duplex':<7}{'Speed':<7}{'Type':<16}{'Flags':<6}Encapsulation"]
        for p in ports:
            duplex, speed = "full", speed_label(p.speed_mbps)
            lines.append(
                f"{short_name(p.name):<11}{p.cfg.description:<{nw}}{self._status_word(p, now):<13}{self._vlan_word(p):<9}"
                f"{duplex:<7}{speed:<7}{phy_type(p):<16}".rstrip()
            )
        return "\n".join(lines) + "\n"

    def show_interfaces_description(self) -> str:
        now = time.time()
        lines = [f"{'Interface':<31}{'Status':<15}{'Protocol':<19}Description"]
        for p in self.sw.ports.values():
            status = "admin down" if not p.cfg.enabled else ("up" if self.sw.oper_up(p, now) else "down")
            proto = "up" if self.sw.oper_up(p, now) else "down"
            lines.append(f"{short_name(p.name):<31}{status:<15}{proto:<19}{p.cfg.description}".rstrip())
        return "\n".join(lines) + "\n"

    def show_switchport(self, name: str | None = None) -> str:
        ports = self._ports(name)
        if ports is None:
            return ERR_INVALID
        blocks = []
        for p in ports:
            if p.name.startswith("Management"):
                continue
            c = p.cfg
            if c.mode == "routed":
                blocks.append(f"Name: {short_name(p.name)}\nSwitchport: Disabled\n")
                continue
            av = c.access_vlan
            mode = "trunk" if c.mode == "trunk" else "static access"
            native = c.native_vlan or 1
            allowed = "ALL" if c.trunk_vlans is None else (format_vlans(c.trunk_vlans) or "NONE")
            blocks.append(
                f"Name: {short_name(p.name)}\n"
                f"Switchport: Enabled\n"
                f"Administrative Mode: {mode}\n"
                f"Operational Mode: {mode}\n"
                f"MAC Address Learning: enabled\n"
                f"Dot1q ethertype/TPID: 0x8100 (active)\n"
                f"Dot1q Vlan Tag Required (Administrative/Operational): No/No\n"
                f"Access Mode VLAN: {av} ({self.sw.vlans.get(av, 'inactive')})\n"
                f"Trunking Native Mode VLAN: {native} ({self.sw.vlans.get(native, 'inactive')})\n"
                f"Administrative Native VLAN tagging: disabled\n"
                f"Trunking VLANs Enabled: {allowed}\n"
                f"Static Trunk Groups:\n"
                f"Dynamic Trunk Groups:\n"
                f"Source interface filtering: enabled\n"
            )
        return "\n".join(blocks)

    def show_vlan(self, only: int | None = None) -> str:
        if only is not None and only not in self.sw.vlans:
            return f"% VLAN {only} not found in current VLAN database\n"
        lines = [f"{'VLAN':<6}{'Name':<33}{'Status':<10}Ports", f"{'-' * 5} {'-' * 32} {'-' * 9} {'-' * 31}"]
        for v in sorted(self.sw.vlans):
            if only is not None and v != only:
                continue
            members = [short_name(p.name) for p, _ in self.sw.vlan_members(v)]
            head = f"{v:<6}{self.sw.vlans[v]:<33}{'active':<10}"
            chunks: list[str] = []
            cur = ""
            for m in members:
                piece = (", " if cur else "") + m
                if cur and len(cur) + len(piece) > 31:
                    chunks.append(cur + ",")
                    cur = m
                else:
                    cur += piece
            if cur:
                chunks.append(cur)
            lines.append((head + (chunks[0] if chunks else "")).rstrip())
            for c in chunks[1:]:
                lines.append(" " * 49 + c)
        return "\n".join(lines) + "\n"

    def show_mac_address_table(self, name: str | None = None) -> str:
        """EOS's two tables (unicast, then multicast: the lab has no multicast groups), as 4.2x prints them."""
        ports = self._ports(name)
        if ports is None:
            return ERR_INVALID
        now = time.time()
        wanted = {p.name for p in ports}
        rows = [(v, m, p) for v, m, p in self.sw.mac_table(now) if p.name in wanted]
        rule = "-" * 66
        lines = ["          Mac Address Table", rule, "", "Vlan    Mac Address       Type        Ports      Moves   Last Move",
                 "----    -----------       ----        -----      -----   ---------"]  # fmt: skip
        for vlan, mac, p in rows:
            learned = max(p.last_change, self.sw.boot_time)
            lines.append(f"{vlan:>4}    {dotted_mac(mac)}    DYNAMIC     {short_name(p.name):<10} 1       {ago(now - learned)}")
        lines += [f"Total Mac Addresses for this criterion: {len(rows)}", "", "          Multicast Mac Address Table", rule, "",
                  "Vlan    Mac Address       Type        Ports", "----    -----------       ----        -----",
                  "Total Mac Addresses for this criterion: 0"]  # fmt: skip
        return "\n".join(lines) + "\n"

    def show_lldp(self, name: str | None = None) -> str:
        ports = self._ports(name)
        if ports is None:
            return ERR_INVALID
        now = time.time()
        rows = [(short_name(p.name), nb.system, nb.port) for p in ports if (nb := self.sw.lldp_neighbor(p, now))]
        n_all = sum(1 for p in self.sw.ports.values() if p.neighbor is not None)
        lines = [
            f"Last table change time   : {ago(now - self.sw.table_changed)}",
            f"Number of table inserts  : {n_all}",
            "Number of table deletes  : 0",
            "Number of table drops    : 0",
            "Number of table age-outs : 0",
            "",
            f"{'Port':<14}{'Neighbor Device ID':<25}{'Neighbor Port ID':<20}TTL",
            f"{'-' * 10} {'-' * 24} {'-' * 22} {'-' * 3}",
        ]
        for port, system, nport in rows:
            lines.append(f"{port:<14}{system:<25}{nport:<20}120")
        return "\n".join(lines) + "\n"

    def show_lldp_detail(self, name: str | None = None) -> str:
        ports = self._ports(name)
        if ports is None:
            return ERR_INVALID
        now = time.time()
        blocks = []
        for p in ports:
            nb = self.sw.lldp_neighbor(p, now)
            if nb is None:
                if name is not None:
                    blocks.append(f"Interface {p.name} detected 0 LLDP neighbors:\n")
                continue
            age = int(now - self.sw.boot_time) % 30
            chassis = dotted_mac(nb.chassis_id)
            if nb.kind == "switch":
                descr = nb.description or "Arista Networks EOS version 4.30.2F running on an Arista Networks DCS-7050SX3-48YC8"
                caps = "Bridge, Router"
            else:
                descr = nb.description or "Debian GNU/Linux 12 (bookworm) Linux 6.1.0-18-amd64 #1 SMP x86_64"
                caps = "Bridge, Router, Station"
            since = ago(now - max(self.sw.last_change(p, now), self.sw.table_changed))
            blocks.append(
                f"Interface {p.name} detected 1 LLDP neighbors:\n\n"
                f'  Neighbor {chassis}/"{nb.port}", age {age} seconds\n'
                f"  Discovered {since}; Last changed {since}\n"
                f"  - Chassis ID type: MAC address (4)\n"
                f"    Chassis ID     : {chassis}\n"
                f"  - Port ID type: Interface name (5)\n"
                f'    Port ID     : "{nb.port}"\n'
                f"  - Time To Live: 120 seconds\n"
                f'  - Port Description: "{nb.port}"\n'
                f'  - System Name: "{nb.system}"\n'
                f'  - System Description: "{descr}"\n'
                f"  - System Capabilities : {caps}\n"
                f"    Enabled Capabilities: {caps.split(',')[0]}\n"
                f"  - Management Address Subtype: Ethernet\n"
                f"    Management Address        : {chassis}\n"
                f"    Interface Number Subtype  : Unknown (1)\n"
                f"    Interface Number          : 0\n"
                f"    OID String                : \n"
                f"  - IEEE802.3 Maximum Frame Size: 9236 bytes\n"
            )
        return "\n".join(blocks)

    def show_inventory(self) -> str:
        s = self.sw.spec
        n = len(self.sw.ports)
        return (
            "System information\n"
            "  Model                    Description\n"
            "  ------------------------ ----------------------------------------------------\n"
            f"  {s.model:<24} {n}-port switch\n\n"
            "  HW Version  Serial Number  Mfg Date   Epoch\n"
            "  ----------- -------------- ---------- -----\n"
            f"  11.02       {s.serial:<14} 2023-11-29 01.00\n\n"
            "System has 2 power supply slots\n"
            "  Slot Model            Serial Number\n"
            "  ---- ---------------- ----------------\n"
            f"  1    PWR-511-AC-RED   {s.serial}P1\n"
            f"  2    PWR-511-AC-RED   {s.serial}P2\n\n"
            "System has 1 fan modules\n"
            "  Module  Number of Fans  Model            Serial Number\n"
            "  ------- --------------- ---------------- ----------------\n"
            "  1       1               FAN-7002H-RED    N/A\n\n"
            f"System has {n} ports\n"
            "  Type             Count\n"
            "  ---------------- ----\n"
            f"  Switched         {n}\n"
        )

    def _intf_config(self, p: Port, saved: bool = False) -> list[str]:
        c = self.sw.saved[p.name] if saved else p.cfg
        lines = [f"interface {p.name}"]
        if c.description:
            lines.append(f"   description {c.description}")
        if not c.enabled:
            lines.append("   shutdown")
        if c.mode == "routed":
            lines.append("   no switchport")
        elif c.mode == "access":
            if c.access_vlan != 1:
                lines.append(f"   switchport access vlan {c.access_vlan}")
        else:
            if c.native_vlan not in (None, 1):
                lines.append(f"   switchport trunk native vlan {c.native_vlan}")
            if c.trunk_vlans is not None:
                lines.append(f"   switchport trunk allowed vlan {format_vlans(c.trunk_vlans) or 'none'}")
            lines.append("   switchport mode trunk")
        return lines

    def show_running_config_intf(self, name: str) -> str:
        p = self.sw.ports.get(name)
        if p is None:
            return ERR_INVALID
        return "\n".join(self._intf_config(p)) + "\n"

    def show_running_config(self, saved: bool = False) -> str:
        s = self.sw.spec
        vlans = self.sw.saved_vlans if saved else self.sw.vlans
        lines = ["! Command: show " + ("startup-config" if saved else "running-config"),
                 f"! device: {self.sw.hostname} ({s.model}, EOS-{s.os_version})", "!",
                 "! boot system flash:/EOS.swi", "!", "transceiver qsfp default-mode 4x10G", "!",
                 f"hostname {self.sw.hostname}", "!",
                 f"username {s.username} privilege 15 role network-admin secret sha512 $6$lab", "!"]  # fmt: skip
        for v in sorted(vlans):
            if v == 1:
                continue
            lines += [f"vlan {v}", f"   name {vlans[v]}", "!"]
        for p in self.sw.ports.values():
            lines += [*self._intf_config(p, saved), "!"]
        lines += ["no ip routing", "!", "end"]
        return "\n".join(lines) + "\n"

