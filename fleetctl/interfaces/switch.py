"""What fleetctl knows about a switch, independent of the vendor or the CLI.

A switch is split into capabilities, one abstract class each (after OpenStack
Ironic's ``drivers/base.py``): facts, interfaces, LLDP neighbours and port
configuration. A driver composes the implementations it supports; a capability
a switch lacks is a ``Noop*`` class that raises
:class:`~fleetctl.errors.SwitchError` saying so.

Results are typed models (pydantic v2): drivers parse CLI output at the edge
and the rest of fleetctl never digs in raw text. Vendor words (``connected``,
``static access``, ``notconnect`` ...) are translated through the tables at
module level; a word not in a table maps to ``UNKNOWN`` (or None), it never
crashes.

Switch capabilities are synchronous: netmiko is. A driver class provides its
own sweep (:meth:`Switch.sweep`); the netmiko driver's works on many switches
at once in a thread pool.
"""

from __future__ import annotations

import abc
import enum
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetctl.errors import SwitchError
from fleetctl.interfaces.bmc import Revealable, reveal
from fleetctl.interfaces.sweep import SweepProgress, SwitchSweepResult

__all__ = [
    "ADMIN_OPER_BY_STATUS",
    "MODE_MAP",
    "FactsInterface",
    "Interface",
    "InterfacesInterface",
    "LldpInterface",
    "LldpNeighbor",
    "MacEntry",
    "MacTableInterface",
    "NoopFacts",
    "NoopLldp",
    "NoopMacTable",
    "PortChange",
    "PortConfig",
    "PortConfigInterface",
    "PortMode",
    "Revealable",
    "Switch",
    "SwitchFacts",
    "SwitchSweepResult",
    "SwitchTarget",
    "canonical_mac",
    "config_diff",
    "map_mode",
    "map_status",
    "parse_vlan_list",
    "vlan_list_str",
]

# --------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SwitchTarget:
    """One switch to talk to, as the inventory describes it.

    Attributes:
        name: the switch's name in the inventory (used in messages and results).
        host: management address or DNS name.
        port: SSH port.
        platform: fleetctl's platform name (``eos``, ``nxos``, ``sonic``, ``linux``).
        username: login name.
        password: a ``fleetctl.secrets.Secret`` (anything with ``.reveal()``) or str.
        timeout: seconds for the login and for one command.
        driver: the name of the switch driver (entry point in
            ``fleetctl.switch``) that talks to this switch.
    """

    name: str
    host: str
    port: int = 22
    platform: str = "linux"
    username: str = ""
    password: Any = field(default=None, repr=False)
    timeout: float = 30.0
    driver: str = "netmiko"

    def secret(self) -> str:
        return reveal(self.password)


# --------------------------------------------------------------------------
# Enums and state maps
# --------------------------------------------------------------------------


class PortMode(enum.StrEnum):
    ACCESS = "access"
    TRUNK = "trunk"
    ROUTED = "routed"
    UNKNOWN = "unknown"


# What switches print for a port's switchport mode (EOS "static access", NX-OS
# "access", SONiC's Vlan column "routed" ...), lower-cased.
MODE_MAP: dict[str, PortMode] = {
    "access": PortMode.ACCESS,
    "static access": PortMode.ACCESS,
    "untagged": PortMode.ACCESS,
    "trunk": PortMode.TRUNK,
    "static trunk": PortMode.TRUNK,
    "tagged": PortMode.TRUNK,
    "routed": PortMode.ROUTED,
    "none": PortMode.ROUTED,  # NOTE(eos): "Operational Mode: none" on a routed port
}

# Status words of `show interface(s) status` (EOS, NX-OS) -> (admin_up, oper_up).
# None where the word does not say.
ADMIN_OPER_BY_STATUS: dict[str, tuple[bool | None, bool | None]] = {
    "connected": (True, True),
    "up": (True, True),
    "notconnect": (True, False),
    "notconnec": (True, False),  # NX-OS truncates the column
    "xcvrabsen": (True, False),
    "sfpabsent": (True, False),
    "noOperMem".lower(): (True, False),
    "inactive": (True, False),
    "errdisabled": (True, False),
    "err-disabled": (True, False),
    "down": (True, False),
    "linkflapE".lower(): (True, False),
    "monitor": (True, True),
    "disabled": (False, False),
    "sfpinvali": (True, False),
}


_MAC_DIGITS = re.compile(r"^[0-9a-f]{12}$")


def canonical_mac(text: str | None) -> str | None:
    """A MAC in any switch's spelling -> lower-case colon-separated (the ``Nic.mac`` rule); None if not a MAC.

    ``0012.3694.03ec`` (Cisco, Arista), ``11:22:33:44:55:66`` (SONiC),
    ``00-1e-58-a3-2f-cd``, ``001e58-a32fcd`` (HPE) all read.
    """
    if not text:
        return None
    digits = re.sub(r"[.:\-]", "", text.strip().lower())
    if not _MAC_DIGITS.match(digits):
        return None
    return ":".join(digits[i : i + 2] for i in range(0, 12, 2))


def map_mode(value: str | None) -> PortMode:
    """A vendor's word for a port mode -> :class:`PortMode` (UNKNOWN when unknown)."""
    if not value:
        return PortMode.UNKNOWN
    return MODE_MAP.get(value.strip().lower(), PortMode.UNKNOWN)


def map_status(value: str | None) -> tuple[bool | None, bool | None]:
    """A status column's word -> (admin_up, oper_up); (None, None) when unknown."""
    if not value:
        return (None, None)
    return ADMIN_OPER_BY_STATUS.get(value.strip().lower(), (None, None))


_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$")


def parse_vlan_list(text: str | Iterable[int] | None) -> list[int]:
    """``"1,10-12"`` (or ``ALL``, ``none``) -> sorted VLAN ids; a list passes through sorted."""
    if text is None:
        return []
    if not isinstance(text, str):
        return sorted({int(v) for v in text})
    t = text.strip().lower()
    if t in ("", "none", "--", "n/a"):
        return []
    if t == "all":
        return list(range(1, 4095))
    out: set[int] = set()
    for part in re.split(r"[,\s]+", t):
        if not part:
            continue
        m = _RANGE.match(part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            out.update(range(lo, hi + 1))
        elif part.isdigit():
            out.add(int(part))
        else:
            raise ValueError(f"not a VLAN list: {text!r}")
    return sorted(out)


def vlan_list_str(vlans: Iterable[int]) -> str:
    """Sorted VLAN ids -> the compact form switches take: ``1,10-12``."""
    vs = sorted(set(vlans))
    parts: list[str] = []
    i = 0
    while i < len(vs):
        j = i
        while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
            j += 1
        parts.append(str(vs[i]) if i == j else f"{vs[i]}-{vs[j]}")
        i = j + 1
    return ",".join(parts)


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=False, extra="forbid")


class SwitchFacts(_Model):
    platform: str = Field(
        description="fleetctl's platform name: eos, nxos, sonic, linux"
    )
    os_version: str | None = None
    serial: str | None = None
    model: str | None = None
    hostname: str | None = None
    uptime_s: int | None = Field(
        None, description="seconds since boot, None when not printed"
    )
    warnings: list[str] = Field(default_factory=list)


class Interface(_Model):
    name: str = Field(description="the long name (Ethernet1/1, not Eth1/1)")
    admin_up: bool | None = None
    oper_up: bool | None = None
    speed_mbps: int | None = None
    mode: PortMode = PortMode.UNKNOWN
    access_vlan: int | None = None
    trunk_vlans: list[int] = Field(default_factory=list)
    description: str | None = None

    @property
    def trunk_vlan_ranges(self) -> str:
        """The trunk VLANs as switches print them (``1-4094``), for tables."""
        return vlan_list_str(self.trunk_vlans)


class LldpNeighbor(_Model):
    local_port: str
    remote_system: str | None = None
    remote_port: str | None = None
    remote_chassis_id: str | None = None


class MacEntry(_Model):
    """One row of a switch's MAC address table, as its CLI prints it.

    ``port`` is the long name (``Ethernet1/1``, ``Port-Channel1``), ``mac``
    lower-case colon-separated; ``kind`` the table's type column lower-cased
    (``dynamic``, ``static`` ...). A row printed with several ports (a
    multicast group) or without a MAC is no entry.
    """

    mac: str
    port: str
    vlan: int | None = None
    kind: str = "dynamic"


class PortConfig(_Model):
    """A port's configuration; as a wish, a None field means "leave it as it is"."""

    admin_up: bool | None = None
    mode: PortMode | None = None
    access_vlan: int | None = Field(None, ge=1, le=4094)
    trunk_vlans: list[int] | None = None
    description: str | None = None

    @field_validator("trunk_vlans", mode="before")
    @classmethod
    def _vlans(cls, v: Any) -> Any:
        if v is None:
            return None
        vs = parse_vlan_list(v)
        if any(not 1 <= x <= 4094 for x in vs):
            raise ValueError("VLAN ids are 1-4094")
        return vs

    def wanted_fields(self) -> dict[str, Any]:
        """The fields a wish sets (the others are left alone)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class PortChange(_Model):
    """What a careful change did to one port (or, on a dry run, would do).

    ``diff`` maps each field that differs to ``[before, after]``; an empty diff
    means nothing to do. ``session_dropped`` says the SSH session died during
    the change: ``after`` is then what a new session read back (None when that
    failed too) and ``message`` says what is known.
    """

    switch: str
    port: str
    before: PortConfig
    after: PortConfig | None = None
    wanted: PortConfig
    diff: dict[str, list[Any]] = Field(default_factory=dict)
    commands: list[str] = Field(
        default_factory=list, description="what was (or would be) sent"
    )
    dry_run: bool = False
    applied: bool = False
    verified: bool = False
    rolled_back: bool = False
    session_dropped: bool = False
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.dry_run or not self.diff or (self.applied and self.verified)


def config_diff(before: PortConfig, wanted: PortConfig) -> dict[str, list[Any]]:
    """{field: [before, want]} for every field ``wanted`` sets to something else.

    Mode-dependent fields only count in their mode: a trunk's access VLAN is
    not compared, nor an access port's trunk list.
    """
    want = wanted.wanted_fields()
    mode = want.get("mode", before.mode)
    out: dict[str, list[Any]] = {}
    for key, value in want.items():
        if key == "access_vlan" and mode == PortMode.TRUNK:
            continue
        if key == "trunk_vlans" and mode == PortMode.ACCESS:
            continue
        have = getattr(before, key)
        if have != value:
            out[key] = [_plain(have), _plain(value)]
    return out


def _plain(v: Any) -> Any:
    return v.value if isinstance(v, enum.Enum) else v


# --------------------------------------------------------------------------
# Capabilities
# --------------------------------------------------------------------------


class FactsInterface(abc.ABC):
    @abc.abstractmethod
    def get(self) -> SwitchFacts:
        """Platform, OS version, serial, model, hostname, uptime."""


class InterfacesInterface(abc.ABC):
    @abc.abstractmethod
    def list(self) -> list[Interface]:
        """Every front-panel port with status, speed, VLANs and description."""


class LldpInterface(abc.ABC):
    @abc.abstractmethod
    def neighbors(self) -> list[LldpNeighbor]:
        """LLDP neighbours as the switch sees them, one per local port and neighbour."""


class MacTableInterface(abc.ABC):
    @abc.abstractmethod
    def entries(self, *, limit: int = 16_384) -> list[MacEntry]:
        """The MAC address table, at most ``limit`` rows (the first ones printed).

        Raises:
            SwitchError: the table could not be read or parsed.
        """


class PortConfigInterface(abc.ABC):
    @abc.abstractmethod
    def get(self, port: str) -> PortConfig:
        """One port's current configuration (every field filled where the switch says)."""

    @abc.abstractmethod
    def plan(self, port: str, wanted: PortConfig) -> PortChange:
        """Read the port and compute the change, without touching the switch."""

    @abc.abstractmethod
    def apply(
        self,
        port: str,
        wanted: PortConfig,
        *,
        dry_run: bool = False,
        protected: Collection[str] = (),
        force: bool = False,
    ) -> PortChange:
        """Change one port carefully: read, diff, apply, read back, verify, roll back.

        Args:
            port: the only port this call may touch.
            wanted: the fields to set (None fields are left alone).
            dry_run: stop after the plan.
            protected: ports (uplinks, in-service servers) refused unless ``force``.
            force: touch a protected port anyway.

        Returns:
            A :class:`PortChange`; a failed verification is reported there
            (``verified=False``, ``rolled_back``), not raised.

        Raises:
            SwitchError: the port is refused (unknown, protected, a VLAN missing)
                or the switch could not be read before the change.
        """

    @abc.abstractmethod
    def save(self) -> str:
        """Persist the running configuration; returns what the switch said."""


class _Noop:
    capability = "this capability"

    def __init__(self, switch_name: str = "switch", reason: str | None = None) -> None:
        self._switch_name = switch_name
        self._reason = reason

    def _refuse(self) -> SwitchError:
        why = f" ({self._reason})" if self._reason else ""
        return SwitchError(
            f"{self._switch_name}: {self.capability} is not supported by this switch{why}"
        )


class NoopLldp(_Noop, LldpInterface):
    capability = "LLDP"

    def neighbors(self) -> list[LldpNeighbor]:
        raise self._refuse()


class NoopMacTable(_Noop, MacTableInterface):
    capability = "the MAC address table"

    def entries(self, *, limit: int = 16_384) -> list[MacEntry]:
        raise self._refuse()


class NoopFacts(_Noop, FactsInterface):
    capability = "facts"

    def get(self) -> SwitchFacts:
        raise self._refuse()


class Switch(abc.ABC):
    """A switch driver: the capabilities composed, used as a context manager.

    ``with driver_cls(target) as sw: sw.apply_port_change("Ethernet4", PortConfig(access_vlan=100))``

    The capabilities are attributes (``sw.facts.get()``, ``sw.interfaces.list()``,
    ``sw.lldp.neighbors()``, ``sw.mac_table.entries()``, ``sw.ports.apply(...)``); the ``get_*`` methods
    are the same calls under the names the CLI uses.
    """

    name: str
    facts: FactsInterface
    interfaces: InterfacesInterface
    lldp: LldpInterface
    ports: PortConfigInterface
    mac_table: MacTableInterface

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def close(self) -> None:
        """Log out."""

    @classmethod
    @abc.abstractmethod
    def sweep(
        cls,
        targets: Iterable[SwitchTarget],
        operation: Callable[[Switch], Any],
        *,
        concurrency: int = 16,
        progress: SweepProgress[SwitchSweepResult] | None = None,
    ) -> list[SwitchSweepResult]:
        """Run ``operation(switch)`` on every target; one verdict each, in target order.

        Each switch is opened (logged in), handed to ``operation`` and closed.
        Nothing is raised for one switch's failure (refused login, timeout, a
        dropped session, a parser meeting new output): it is that switch's
        :class:`SwitchSweepResult`, and the others go on. A target may be
        given more than once (several sessions to one switch).

        Args:
            targets: the switches (all of them for this driver).
            operation: a function of an opened driver.
            concurrency: switches (sessions) worked on at once.
            progress: called as ``progress(done, total, result)`` after each
                switch, one call at a time.

        Returns:
            One result per target, in the order given.
        """

    def get_facts(self) -> SwitchFacts:
        return self.facts.get()

    def get_interfaces(self) -> list[Interface]:
        return self.interfaces.list()

    def get_lldp_neighbors(self) -> list[LldpNeighbor]:
        return self.lldp.neighbors()

    def get_mac_table(self, *, limit: int = 16_384) -> list[MacEntry]:
        return self.mac_table.entries(limit=limit)

    def get_port_config(self, port: str) -> PortConfig:
        return self.ports.get(port)

    def plan_port_change(self, port: str, wanted: PortConfig) -> PortChange:
        return self.ports.plan(port, wanted)

    def apply_port_change(
        self,
        port: str,
        wanted: PortConfig,
        *,
        dry_run: bool = False,
        protected: Collection[str] = (),
        force: bool = False,
    ) -> PortChange:
        """See :meth:`PortConfigInterface.apply`."""
        return self.ports.apply(
            port, wanted, dry_run=dry_run, protected=protected, force=force
        )

    def save_config(self) -> str:
        return self.ports.save()
