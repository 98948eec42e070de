"""The netmiko switch driver: one class for every platform file.

    with NetmikoSwitch(target) as sw:
        sw.get_facts()
        change = sw.apply_port_change("Ethernet4", PortConfig(access_vlan=100), dry_run=True)

Every change is careful (:meth:`_Ports.apply`): read the port, compute the
diff (a dry run stops there), apply, read back and verify, and put the port
back as it was when verification fails. A session that drops mid-change is
reported with the port's state read back over a new session. Only the named
port is ever touched: every rendered command is checked for port names, and a
command naming any other port is refused before anything is sent.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Callable, Collection, Iterable
from typing import Any, Self

from fleetctl.errors import AuthError, FleetError, InputError, SwitchError, Timeout
from fleetctl.interfaces.sweep import SweepProgress, SwitchSweepResult
from fleetctl.interfaces.switch import (
    FactsInterface,
    Interface,
    InterfacesInterface,
    LldpInterface,
    LldpNeighbor,
    MacEntry,
    MacTableInterface,
    NoopLldp,
    NoopMacTable,
    PortChange,
    PortConfig,
    PortConfigInterface,
    PortMode,
    Switch,
    SwitchFacts,
    SwitchTarget,
    config_diff,
    vlan_list_str,
)

from . import parse
from .platform import Platform, ShowCommand, load_platform


class SessionDropped(SwitchError):
    """The SSH session to a switch died while a command was in flight."""


class OutputTooLarge(SwitchError):
    """A command printed more than the platform's ``max_output_bytes``: reading stopped there."""


class _ReadBound(Exception):
    """Raised inside netmiko's read loop to stop it; :meth:`NetmikoSwitch.run` turns it into OutputTooLarge."""


# The most one read takes from the SSH channel before handing back to netmiko's loop
# (which then checks the bound again): what paramiko already holds is at most its window.
_READ_CHUNK = 256 * 1024


class _BoundedReader:
    """A per-command byte budget on a netmiko connection's channel reads.

    netmiko's ``send_command`` keeps every character until it sees the prompt
    or ``read_timeout`` passes, and ``SSHChannel.read_channel`` reads for as
    long as data is waiting: a switch that prints without end (a runaway
    debug, a looping CLI) grows both without bound for the whole timeout.
    Every netmiko read goes through ``conn.channel.read_channel``, so this
    replaces it on the one connection: one read takes at most ``_READ_CHUNK``,
    and past ``limit`` characters since :meth:`start` it raises, which ends
    netmiko's loop. What is still unread stays in paramiko's buffer, bounded
    by the SSH window.
    """

    def __init__(self, channel: Any, limit: int) -> None:
        self.channel, self.limit, self.read = channel, limit, 0

    def start(self) -> None:
        self.read = 0

    def read_channel(self) -> str:
        parts: list[str] = []
        got = 0
        while got < _READ_CHUNK:
            data = self.channel.read_buffer()
            if not data:
                break
            parts.append(data)
            got += len(data)
        self.read += got
        if self.read > self.limit:
            raise _ReadBound(self.read)
        return "".join(parts)


# Characters that would end a CLI line or a shell word early in a description.
_BAD_DESCRIPTION = re.compile(r"[\r\n\"'`$\\;|&<>]")


class NetmikoSwitch(Switch):
    """A switch reached over SSH with netmiko, described by a platform file.

    Args:
        target: the switch.
        platform: a :class:`Platform` (or a platform name / file path); default
            the target's ``platform``.
        connect: a factory ``connect(**netmiko_kwargs)`` returning a netmiko
            connection (tests); default ``netmiko.ConnectHandler``.
    """

    def __init__(
        self,
        target: SwitchTarget,
        *,
        platform: Platform | str | None = None,
        connect: Callable[..., Any] | None = None,
    ) -> None:
        self.target = target
        self.name = target.name
        if platform is None:
            platform = target.platform
        self.platform = (
            platform if isinstance(platform, Platform) else load_platform(platform)
        )
        self._connect = connect
        self._conn: Any = None
        self._reader: _BoundedReader | None = None
        self._prefix = self.platform.privilege_prefix
        self.facts = _Facts(self)
        self.interfaces = _Interfaces(self)
        self.ports = _Ports(self)
        self._lldp: LldpInterface | None = None
        self.mac_table: MacTableInterface = (
            _MacTable(self) if self.platform.supports("mac_table")
            else NoopMacTable(self.name, f"platform {self.platform.name} has no MAC table command")
        )  # fmt: skip

    # ------------------------------------------------------------ session

    @property
    def lldp(self) -> LldpInterface:  # type: ignore[override]
        if self._lldp is None:
            show = self.platform.show.get("lldp")
            if show is None:
                self._lldp = NoopLldp(
                    self.name, f"platform {self.platform.name} has no LLDP command"
                )
            elif show.requires and not self.run(show.requires, check=False).strip():
                self._lldp = NoopLldp(
                    self.name, f"`{show.requires}` found nothing: install and run lldpd"
                )
            else:
                self._lldp = _Lldp(self)
        return self._lldp

    def open(self) -> Self:
        if self._conn is not None:
            return self
        kwargs = {
            "device_type": self.platform.device_type,
            "host": self.target.host,
            "port": self.target.port,
            "username": self.target.username,
            "password": self.target.secret(),
            "secret": self.target.secret(),  # the enable password, where the platform asks for one
            "conn_timeout": self.target.timeout,
            "auth_timeout": self.target.timeout,
            "banner_timeout": self.target.timeout,
            "timeout": self.target.timeout,
            "fast_cli": False,
            # Our own host keys and agent never matter to a switch login.
            "allow_agent": False,
            "use_keys": False,
        }
        where = f"{self.name} ({self.target.host}:{self.target.port})"
        try:
            if self._connect is not None:
                conn = self._connect(**kwargs)
            else:
                from netmiko import ConnectHandler

                conn = ConnectHandler(**kwargs)
        except Exception as e:
            raise _wrap_login(e, where) from e
        self._conn = conn
        self._reader = self._bound_reads(conn)
        if self.platform.enable:
            try:
                conn.enable()
            except Exception as e:
                self.close()
                raise AuthError(
                    f"{where}: could not enter privileged mode ({type(e).__name__})"
                ) from e
        if self._prefix:
            # Logged in as root, sudo is neither needed nor perhaps installed.
            uid = self.run("id -u", check=False).strip()
            if uid == "0":
                self._prefix = ""
        return self

    def _bound_reads(self, conn: Any) -> _BoundedReader | None:
        """Put the platform's byte budget on the connection's channel (a netmiko SSH session)."""
        channel = getattr(conn, "channel", None)
        if channel is None or not hasattr(channel, "read_buffer"):
            return None  # a test double without netmiko's channel: nothing to bound
        reader = _BoundedReader(channel, self.platform.max_output_bytes)
        channel.read_channel = reader.read_channel
        return reader

    def _read_limited(self, command: str, send: Callable[[], str]) -> str:
        """Run one netmiko call under the byte budget; past it the session is closed (it is still printing)."""
        if self._reader is not None:
            self._reader.start()
        try:
            return send()
        except _ReadBound as e:
            self.close()
            limit = self.platform.max_output_bytes
            raise OutputTooLarge(
                f"{self.name}: {command!r}: more than {limit} bytes of output "
                f"(the platform's max_output_bytes); stopped reading at {e.args[0]} and closed the session"
            ) from None

    def close(self) -> None:
        conn, self._conn = self._conn, None
        self._reader = None
        if conn is not None:
            with contextlib.suppress(Exception):  # the session may already be gone; nothing to save
                conn.disconnect()

    @classmethod
    def sweep(
        cls,
        targets: Iterable[SwitchTarget],
        operation: Callable[[Switch], Any],
        *,
        concurrency: int = 16,
        progress: SweepProgress[SwitchSweepResult] | None = None,
    ) -> list[SwitchSweepResult]:
        """See :meth:`Switch.sweep`: a bounded thread pool, one SSH session per thread (:func:`.sweep.run_many`)."""
        from .sweep import run_many  # it imports this module

        return run_many(targets, operation, concurrency=concurrency, progress=progress, driver_factory=cls)

    def reconnect(self) -> None:
        """Drop the current session (if any) and open a new one."""
        self.close()
        self.open()

    def __enter__(self) -> Self:
        return self.open()

    # ----------------------------------------------------------- commands

    def _session(self) -> Any:
        if self._conn is None:
            self.open()
        return self._conn

    def _alive(self) -> bool:
        conn = self._conn
        if conn is None:
            return False
        try:
            transport = conn.remote_conn.get_transport()
            return bool(transport is not None and transport.is_active())
        except Exception:  # noqa: BLE001 - any failure to look means not alive
            return False

    def _wrap_io(self, e: Exception, command: str) -> FleetError:
        if isinstance(e, FleetError):
            return e
        where = f"{self.name}: {command!r}"
        if not self._alive():
            return SessionDropped(
                f"{where}: the session dropped ({type(e).__name__}: {e})"
            )
        if "Timeout" in type(e).__name__ or isinstance(e, TimeoutError):
            return Timeout(f"{where}: no answer within {self.target.timeout:g} s")
        return SwitchError(f"{where}: {type(e).__name__}: {e}")

    def run(self, command: str, *, check: bool = True) -> str:
        """Send one command and return its output.

        With ``check`` an output holding one of the platform's error strings
        (or, on shell platforms, a non-zero exit status) raises SwitchError.
        """
        conn = self._session()
        line = command
        if check and self.platform.exit_status:
            line = f"{command}; echo @@rc=$?"
        try:
            out = self._read_limited(
                command,
                lambda: conn.send_command(
                    line,
                    read_timeout=self.target.timeout,
                    strip_prompt=True,
                    strip_command=True,
                ),
            )
        except OutputTooLarge:
            raise
        except Exception as e:
            raise self._wrap_io(e, command) from e
        if check:
            out = self._check(command, out)
        return out

    def _check(self, command: str, out: str) -> str:
        if self.platform.exit_status:
            m = re.search(r"@@rc=(\d+)\s*$", out)
            if m is None:
                raise SwitchError(
                    f"{self.name}: {command!r}: no exit status in the output (a dropped or garbled session)"
                )
            out = out[: m.start()].rstrip("\n")
            if m.group(1) != "0":
                raise SwitchError(
                    f"{self.name}: {command!r} failed (exit {m.group(1)}): {_first_lines(out)}"
                )
        for err in self.platform.errors:
            if err in out:
                raise SwitchError(
                    f"{self.name}: {command!r} failed: {_first_lines(out)}"
                )
        return out

    def send_config(self, lines: list[str]) -> str:
        """Send configuration lines: in configuration mode on network OSes, one by one on shells."""
        if not lines:
            return ""
        if self.platform.exit_status:
            return "\n".join(self.run(line) for line in lines)
        conn = self._session()
        try:
            out = self._read_limited(
                "; ".join(lines),
                lambda: conn.send_config_set(lines, read_timeout=self.target.timeout, cmd_verify=True),
            )
        except OutputTooLarge:
            raise
        except Exception as e:
            raise self._wrap_io(e, "; ".join(lines)) from e
        for err in self.platform.errors:
            if err in out:
                raise SwitchError(
                    f"{self.name}: configuration refused: {_first_lines(out[out.index(err) :])}"
                )
        return out

    def show(self, key: str, **fmt: str) -> list[parse.Record]:
        """Send the platform's show command ``key`` and parse it into records (fields renamed)."""
        cmd = self.platform.show.get(key)
        if cmd is None:
            raise SwitchError(
                f"{self.name}: platform {self.platform.name} has no {key!r} command"
            )
        text = self.run(self._render(cmd, fmt))
        try:
            return parse.parse_show(cmd, text)
        except SwitchError as e:  # the parsers know the text, not the switch it came from
            raise SwitchError(f"{self.name}: {e}") from e

    def _render(self, cmd: ShowCommand, fmt: dict[str, str]) -> str:
        return fill(cmd.command, sudo=self._prefix, **fmt)

    def canonical(self, port: str) -> str:
        return parse.canonical_name(port, self.platform.interface_names)

    # ----------------------------------------------------- reading helpers

    def _linux_records(self, records: list[parse.Record]) -> list[parse.Record]:
        """Linux: a port's bridge is its VLAN (br100 -> access VLAN 100); no bridge: routed."""
        pattern = self.platform.bridge_pattern
        out = []
        for r in records:
            r = dict(r)
            master = r.get("master")
            m = re.fullmatch(pattern, master) if (pattern and master) else None
            if m:
                r["mode"], r["access_vlan"] = "access", m.group(1)
            elif master:
                r["mode"] = "unknown"  # a bond or a bridge not named br<vlan>
            else:
                r["mode"] = "routed"
            out.append(r)
        return out

    def _interface_records(self) -> list[parse.Record]:
        tables = [self.show("interfaces")]
        for extra in ("switchport", "descriptions"):
            if self.platform.supports(extra):
                tables.append(self.show(extra))
        merged = parse.merge_by_name(
            *tables, abbreviations=self.platform.interface_names
        )
        if self.platform.bridge_pattern:
            merged = self._linux_records(merged)
        return merged

    def read_port(self, port: str) -> Interface:
        """One port, read with the per-port commands where the platform has them."""
        if self.platform.supports("port_status"):
            try:
                tables = [self.show("port_status", port=port)]
                if self.platform.supports("port_switchport"):
                    tables.append(self.show("port_switchport", port=port))
            except (SessionDropped, Timeout):
                raise
            except SwitchError as e:
                why = str(e).removeprefix(f"{self.name}: ")  # show() names the switch already
                raise SwitchError(
                    f"{self.name}: no port {port!r} (or it cannot be read): {why}"
                ) from e
            merged = parse.merge_by_name(
                *tables, abbreviations=self.platform.interface_names
            )
            if self.platform.bridge_pattern:
                merged = self._linux_records(merged)
        else:
            merged = self._interface_records()
        for rec in merged:
            if rec.get("name") == port:
                return parse.to_interface(rec)
        raise SwitchError(f"{self.name}: no port {port!r}")

    def vlans(self) -> set[int] | None:
        """The VLANs that exist on the switch; None when the platform cannot say."""
        if not self.platform.supports("vlans"):
            return None
        records = self.show("vlans")
        out: set[int] = set()
        if self.platform.bridge_pattern:
            for r in records:
                m = re.fullmatch(self.platform.bridge_pattern, str(r.get("name") or ""))
                if m:
                    out.add(int(m.group(1)))
            return out
        for r in records:
            v = str(r.get("vlan") or "").strip()
            if v.isdigit():
                out.add(int(v))
        return out


def fill(template: str, **values: Any) -> str:
    """Put values into ``{name}`` placeholders; other braces (shell ``${x}``) stay as they are."""
    return re.sub(
        r"(?<!\$)\{(\w+)\}",
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
        template,
    )


def _first_lines(text: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " / ".join(lines[:n]) or "(no output)"


def _wrap_login(e: Exception, where: str) -> FleetError:
    name = type(e).__name__
    if "Authentication" in name:
        return AuthError(f"{where}: login refused ({e})".splitlines()[0])
    if "Timeout" in name or isinstance(e, TimeoutError):
        return Timeout(f"{where}: no SSH answer ({name})")
    return SwitchError(f"{where}: could not log in: {name}: {e}".splitlines()[0])


# --------------------------------------------------------------------------
# Capabilities
# --------------------------------------------------------------------------


class _Facts(FactsInterface):
    def __init__(self, sw: NetmikoSwitch) -> None:
        self.sw = sw

    def get(self) -> SwitchFacts:
        records = list(self.sw.show("version"))
        warnings = []
        if self.sw.platform.supports("hostname"):
            try:
                records += self.sw.show("hostname")
            except (
                SwitchError
            ) as e:  # older EOS lacks `show hostname`; the rest still stands
                warnings.append(str(e))
        facts = parse.to_facts(self.sw.platform.name, records)
        if (facts.serial is None or facts.model is None) and self.sw.platform.supports(
            "inventory"
        ):
            try:
                chassis = parse.chassis(self.sw.show("inventory"))
            except SwitchError as e:
                warnings.append(str(e))
            else:
                facts.serial = facts.serial or chassis.get("serial")
                facts.model = facts.model or chassis.get("model")
        facts.warnings = warnings
        return facts


class _Interfaces(InterfacesInterface):
    def __init__(self, sw: NetmikoSwitch) -> None:
        self.sw = sw

    def list(self) -> list[Interface]:
        recs = self.sw._interface_records()
        return [
            parse.to_interface(r)
            for r in recs
            if self.sw.platform.is_port(str(r["name"]))
        ]


class _MacTable(MacTableInterface):
    def __init__(self, sw: NetmikoSwitch) -> None:
        self.sw = sw

    def entries(self, *, limit: int = 16_384) -> list[MacEntry]:
        # Front-panel ports only: a port-channel, the CPU (sup-eth1, Router) or
        # Drop is not where a station is cabled.
        rows = parse.to_mac_entries(self.sw.show("mac_table"), self.sw.platform.interface_names)
        return [e for e in rows if self.sw.platform.is_port(e.port)][:limit]


class _Lldp(LldpInterface):
    def __init__(self, sw: NetmikoSwitch) -> None:
        self.sw = sw

    def neighbors(self) -> list[LldpNeighbor]:
        return [
            parse.to_neighbor(r, self.sw.platform.interface_names)
            for r in self.sw.show("lldp")
            if r.get("local_port")
        ]


def normalize_wish(wanted: PortConfig) -> PortConfig:
    """Fill the mode a wish implies: an access VLAN means access, a trunk list trunk."""
    w = wanted.model_copy()
    if w.mode is None:
        if w.access_vlan is not None and w.trunk_vlans is None:
            w.mode = PortMode.ACCESS
        elif w.trunk_vlans is not None and w.access_vlan is None:
            w.mode = PortMode.TRUNK
        elif w.trunk_vlans is not None and w.access_vlan is not None:
            raise InputError(
                "a port is either access (access_vlan) or trunk (trunk_vlans), not both"
            )
    if w.mode in (PortMode.UNKNOWN, PortMode.ROUTED):
        raise InputError(f"fleetctl does not set ports to mode {w.mode.value}")
    return w


def as_wish(config: PortConfig) -> PortConfig:
    """A port's full configuration as a wish that puts it back exactly (a rollback)."""
    w = config.model_copy()
    if w.mode == PortMode.ACCESS:
        w.trunk_vlans = None
    elif w.mode == PortMode.TRUNK:
        w.access_vlan = None
    else:
        w.mode, w.access_vlan, w.trunk_vlans = (
            None,
            None,
            None,
        )  # routed/unknown: cannot be set back
    return w


class _Ports(PortConfigInterface):
    def __init__(self, sw: NetmikoSwitch) -> None:
        self.sw = sw

    # -- reading and planning

    def get(self, port: str) -> PortConfig:
        port = self._checked_port(port)
        return parse.to_port_config(self.sw.read_port(port))

    def _checked_port(
        self, port: str, protected: Collection[str] = (), force: bool = False
    ) -> str:
        name = self.sw.canonical(port)
        if not self.sw.platform.is_port(name):
            raise InputError(
                f"{self.sw.name}: {port!r} is not a front-panel port on {self.sw.platform.name}"
            )
        guarded = {self.sw.canonical(p) for p in protected}
        if name in guarded and not force:
            raise SwitchError(
                f"{self.sw.name}: {name} is protected (an uplink or an in-service server's port); use force to change it",
                exit_code=2,
            )
        return name

    def plan(self, port: str, wanted: PortConfig) -> PortChange:
        return self.apply(port, wanted, dry_run=True, force=True)

    def commands(self, port: str, current: PortConfig, wanted: PortConfig) -> list[str]:
        """The configuration lines that take ``port`` from ``current`` to ``wanted``."""
        sw, cfg = self.sw, self.sw.platform.config
        diff = config_diff(current, wanted)
        if not diff:
            return []
        mode = wanted.mode or current.mode
        fmt: dict[str, str] = {"port": port, "sudo": sw._prefix}
        lines: list[str] = []

        def add(key: str, **extra: Any) -> None:
            if key not in cfg:
                raise SwitchError(
                    f"{sw.name}: platform {sw.platform.name} cannot set {key.replace('_', ' ')}"
                )
            lines.extend(
                fill(t, **fmt, **{k: str(v) for k, v in extra.items()})
                for t in cfg[key]
            )

        if mode == PortMode.ACCESS and ("access_vlan" in diff or "mode" in diff):
            vlan = wanted.access_vlan or current.access_vlan
            if vlan is None:
                raise InputError(f"{sw.name}: {port}: an access port needs a VLAN")
            if (
                "remove_access_vlan" in cfg
                and current.access_vlan
                and current.access_vlan != vlan
            ):
                add("remove_access_vlan", old_vlan=current.access_vlan)
            if "trunk_vlan_del" in cfg and current.mode == PortMode.TRUNK:
                for v in current.trunk_vlans or []:
                    add("trunk_vlan_del", vlan=v)
            add("access_vlan", vlan=vlan)
        if mode == PortMode.TRUNK and ("trunk_vlans" in diff or "mode" in diff):
            want = (
                wanted.trunk_vlans
                if wanted.trunk_vlans is not None
                else (current.trunk_vlans or [])
            )
            if "trunk_vlans" in cfg:
                add("trunk_vlans", vlans=vlan_list_str(want) or "none")
            elif "trunk_vlan_add" in cfg:
                have = (
                    set(current.trunk_vlans or [])
                    if current.mode == PortMode.TRUNK
                    else set()
                )
                if (
                    "remove_access_vlan" in cfg
                    and current.mode == PortMode.ACCESS
                    and current.access_vlan
                ):
                    add("remove_access_vlan", old_vlan=current.access_vlan)
                for v in sorted(have - set(want)):
                    add("trunk_vlan_del", vlan=v)
                for v in sorted(set(want) - have):
                    add("trunk_vlan_add", vlan=v)
            else:
                raise SwitchError(
                    f"{sw.name}: trunk ports are not supported on platform {sw.platform.name}"
                )
        if "admin_up" in diff:
            add("admin_up" if wanted.admin_up else "admin_down")
        if "description" in diff:
            text = wanted.description or ""
            if _BAD_DESCRIPTION.search(text):
                raise InputError(
                    f"{sw.name}: {port}: a description cannot hold newlines, quotes or shell characters"
                )
            if text:
                add("description", description=text)
            else:
                add("no_description")
        if lines and cfg.get("context"):
            lines = [fill(t, **fmt) for t in cfg["context"]] + lines
        self._guard(port, lines)
        return lines

    def _guard(self, port: str, lines: list[str]) -> None:
        """Refuse any command line that names a port other than ``port``."""
        for line in lines:
            try:
                words = shlex.split(line)
            except ValueError:
                words = line.split()
            for word in words:
                if (
                    self.sw.platform.is_port(self.sw.canonical(word))
                    and self.sw.canonical(word) != port
                ):
                    raise SwitchError(
                        f"{self.sw.name}: refusing {line!r}: it names {word}, not {port}"
                    )

    # -- the careful change

    def apply(
        self,
        port: str,
        wanted: PortConfig,
        *,
        dry_run: bool = False,
        protected: Collection[str] = (),
        force: bool = False,
    ) -> PortChange:
        sw = self.sw
        port = self._checked_port(port, protected, force)
        wish = normalize_wish(wanted)
        before = self.get(port)
        change = PortChange(
            switch=sw.name, port=port, before=before, wanted=wish, dry_run=dry_run
        )
        change.diff = config_diff(before, wish)
        if not change.diff:
            change.after, change.verified = before, True
            change.message = f"{port} already as wanted: nothing to do"
            return change
        change.commands = self.commands(port, before, wish)
        self._check_vlans(port, wish)
        if dry_run:
            change.message = f"dry run: {port} would change {_describe(change.diff)}"
            return change

        failure: str | None = None
        try:
            sw.send_config(change.commands)
            change.applied = True
        except SessionDropped as e:
            return self._after_drop(change, str(e))
        except SwitchError as e:  # a command refused: some lines may have taken effect
            failure = str(e)
        try:
            after = self.get(port)
        except SessionDropped as e:
            return self._after_drop(change, str(e))
        change.after = after
        left = config_diff(after, wish)
        if not left and failure is None:
            change.verified = True
            change.message = f"{port}: {_describe(change.diff)}; read back and verified"
            return change
        why = failure or f"read back differs: {_describe(left)}"
        return self._roll_back(change, after, why)

    def _roll_back(
        self, change: PortChange, current: PortConfig, why: str
    ) -> PortChange:
        """Send the inverse of the change and check the port reads back as before.

        The inverse is computed from what we asked for, not from the read-back
        (which is what just proved unreliable): every field the change touched
        is set back, which is harmless where it had not taken.
        """
        sw, port = self.sw, change.port
        target = as_wish(change.before)
        attempted = change.before.model_copy(update=change.wanted.wanted_fields())
        try:
            lines = self.commands(port, attempted, target)
            sw.send_config(lines)
            restored = self.get(port)
        except SessionDropped as e:
            change.session_dropped = True
            change.message = f"{port}: change failed ({why}); the session dropped during the rollback: {e}"
            return change
        except FleetError as e:
            change.message = f"{port}: change failed ({why}); ROLLBACK FAILED: {e}"
            return change
        change.after = restored
        left = config_diff(restored, target)
        change.rolled_back = not left
        if change.rolled_back:
            change.message = f"{port}: change failed ({why}); port put back as it was"
        else:
            change.message = (
                f"{port}: change failed ({why}); rollback incomplete: {_describe(left)}"
            )
        return change

    def _after_drop(self, change: PortChange, error: str) -> PortChange:
        """The session died mid-change: read the port back over a new session and report."""
        sw, port = self.sw, change.port
        change.session_dropped = True
        try:
            sw.reconnect()
            change.after = self.get(port)
        except FleetError as e:
            change.message = f"{port}: the session dropped mid-change ({error}); the port could not be read back: {e}"
            return change
        left = config_diff(change.after, change.wanted)
        change.applied = not left or change.after != change.before
        change.verified = not left
        state = (
            "has the wanted configuration"
            if not left
            else (
                "is unchanged"
                if change.after == change.before
                else f"is part-changed ({_describe(left)} still differ)"
            )
        )
        change.message = (
            f"{port}: the session dropped mid-change ({error}); read back over a new session: the port {state}; "
            "nothing was rolled back"
        )
        return change

    def _check_vlans(self, port: str, wish: PortConfig) -> None:
        needed = set()
        if wish.mode == PortMode.ACCESS and wish.access_vlan:
            needed.add(wish.access_vlan)
        if wish.mode == PortMode.TRUNK and wish.trunk_vlans:
            needed.update(wish.trunk_vlans)
        if not needed:
            return
        have = self.sw.vlans()
        if have is None:
            return
        missing = sorted(needed - have)
        if missing:
            raise SwitchError(
                f"{self.sw.name}: {port}: VLAN {vlan_list_str(missing)} does not exist on the switch; create it first",
                exit_code=2,
            )

    def save(self) -> str:
        lines = self.sw.platform.config.get("save") or []
        if not lines:
            return self.sw.platform.save_message or "nothing to save on this platform"
        return "\n".join(self.sw.run(line) for line in lines) or "saved"


def _describe(diff: dict[str, list[Any]]) -> str:
    return ", ".join(f"{k} {_short(a)} -> {_short(b)}" for k, (a, b) in diff.items())


def _short(v: Any) -> str:
    if isinstance(v, list):
        return vlan_list_str(v) or "none"
    return repr(v) if isinstance(v, str) else str(v)
