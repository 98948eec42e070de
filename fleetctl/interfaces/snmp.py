"""What fleetctl reads from a switch over SNMP, independent of the library.

Typed models (pydantic v2) for one poll of one agent: the target, interface
counters (IF-MIB ifTable + ifXTable), LLDP neighbours (LLDP-MIB), sensors
(ENTITY-SENSOR-MIB) and sysUpTime; and the rates computed between two polls.
A poller driver (:class:`Poller`, registered in the ``fleetctl.snmp``
entry-point group; the bundled one is ``pysnmp``) fills them; the CLI and the
health sweep read them and never see a varbind.

Failures are data: a :class:`PollResult` with ``error`` set (and
``error_kind``) stands for an agent that timed out or refused us, so a poll of
500 switches always returns 500 results.
"""

from __future__ import annotations

import abc
import datetime as dt
import enum
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetctl.interfaces.bmc import Revealable, reveal
from fleetctl.interfaces.sweep import SweepProgress

SnmpVersion = Literal["2c", "3"]
AuthProtocol = Literal["MD5", "SHA", "SHA224", "SHA256", "SHA384", "SHA512"]
PrivProtocol = Literal["DES", "3DES", "AES", "AES192", "AES256"]
ErrorKind = Literal["timeout", "auth", "unreachable", "protocol", "config"]

#: What a poll reads by default: IF-MIB, LLDP-MIB, ENTITY-SENSOR-MIB.
#: ``counters`` (the IF-MIB columns a traffic/error poll needs) is a subset of ``if``;
#: ``fdb`` (the MAC address table: BRIDGE-MIB, Q-BRIDGE-MIB, with ifName) is read only when asked.
POLL_PARTS: tuple[str, ...] = ("if", "lldp", "sensors")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------
# Target
# --------------------------------------------------------------------------


class SnmpTarget(_Model):
    """One SNMP agent to poll, as the inventory describes it.

    Secrets (``community``, ``auth_key``, ``priv_key``) are a
    ``fleetctl.secrets.Secret`` (anything with ``.reveal()``) or a plain str;
    they never show in ``repr`` and are left out of ``model_dump``.

    Attributes:
        name: the switch's name in the inventory (used in results).
        host, port: where the agent listens (UDP).
        version: ``2c`` (community) or ``3`` (USM user, authPriv when both
            keys are given, authNoPriv with only the auth key).
        context_name: SNMPv3 context (empty on real switches; snmpsim selects
            its data file by it).
        timeout: seconds to wait for one response; retries: extra attempts.
        bulk_varbinds: varbinds asked for in one GETBULK across all columns
            walked at once (agents cap a response; 64 is snmpsim's and a
            common switch limit).
        ports: the ports (by ifName, else ifDescr) whose per-port IF-MIB
            columns (counters, speeds, last change) an ``if``/``counters``
            poll reads; every port is still listed with its name and oper
            status. None (the default): every port's columns. The sweep
            gives the ports the cabling plan cables.
        max_fdb_rows: MAC table rows one ``fdb`` poll keeps (a core switch
            learns tens of thousands; the walk stops there, with a warning).
        driver: the name of the poller (entry point in ``fleetctl.snmp``)
            that polls this agent.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    host: str
    port: int = Field(161, ge=1, le=65535)
    version: SnmpVersion = "2c"
    community: Any = Field("public", repr=False, exclude=True)
    user: str | None = None
    auth_key: Any = Field(None, repr=False, exclude=True)
    priv_key: Any = Field(None, repr=False, exclude=True)
    auth_protocol: AuthProtocol = "SHA"
    priv_protocol: PrivProtocol = "AES"
    context_name: str = ""
    timeout: float = Field(2.0, gt=0)
    retries: int = Field(1, ge=0)
    bulk_varbinds: int = Field(64, ge=1, le=2000)
    ports: tuple[str, ...] | None = None
    max_fdb_rows: int = Field(16_384, ge=1, le=1_000_000)
    driver: str = "pysnmp"

    @field_validator("community", "auth_key", "priv_key")
    @classmethod
    def _secret_like(cls, v: Any) -> Any:
        if v is None or isinstance(v, (str, Revealable)):
            return v
        raise ValueError("must be a str or a Secret (with .reveal())")

    def community_text(self) -> str:
        return reveal(self.community)

    def auth_text(self) -> str:
        return reveal(self.auth_key)

    def priv_text(self) -> str:
        return reveal(self.priv_key)

    def problem(self) -> str | None:
        """What is wrong with this target's settings, or None."""
        if self.version == "3":
            if not self.user:
                return "SNMPv3 needs a user"
            if self.priv_key is not None and self.auth_key is None:
                return "SNMPv3 privacy needs an auth key too"
            for label, key in (("auth", self.auth_key), ("priv", self.priv_key)):
                if key is not None and len(reveal(key)) < 8:
                    return f"SNMPv3 {label} key must have at least 8 characters"
        elif not self.community_text():
            return "SNMPv2c needs a community"
        return None


# --------------------------------------------------------------------------
# State maps (vendor enums -> fleetctl's; unknown values map to UNKNOWN)
# --------------------------------------------------------------------------


class OperStatus(enum.StrEnum):
    UP = "up"
    DOWN = "down"
    TESTING = "testing"
    DORMANT = "dormant"
    NOT_PRESENT = "not_present"
    LOWER_LAYER_DOWN = "lower_layer_down"
    UNKNOWN = "unknown"


# IF-MIB ifOperStatus (RFC 2863)
IF_OPER_STATUS_MAP: dict[int, OperStatus] = {
    1: OperStatus.UP,
    2: OperStatus.DOWN,
    3: OperStatus.TESTING,
    4: OperStatus.UNKNOWN,
    5: OperStatus.DORMANT,
    6: OperStatus.NOT_PRESENT,
    7: OperStatus.LOWER_LAYER_DOWN,
}


class SensorStatus(enum.StrEnum):
    OK = "ok"
    UNAVAILABLE = "unavailable"
    NONOPERATIONAL = "nonoperational"
    UNKNOWN = "unknown"


# ENTITY-SENSOR-MIB EntitySensorStatus (RFC 3433)
SENSOR_STATUS_MAP: dict[int, SensorStatus] = {1: SensorStatus.OK, 2: SensorStatus.UNAVAILABLE, 3: SensorStatus.NONOPERATIONAL}

# EntitySensorDataType
SENSOR_TYPE_MAP: dict[int, str] = {
    1: "other",
    2: "unknown",
    3: "volts_ac",
    4: "volts_dc",
    5: "amperes",
    6: "watts",
    7: "hertz",
    8: "celsius",
    9: "percent_rh",
    10: "rpm",
    11: "cmm",
    12: "truthvalue",
    13: "special_enum",
    14: "dbm",
}

# EntitySensorDataScale -> power of ten
SENSOR_SCALE_EXPONENT: dict[int, int] = {
    1: -24,
    2: -21,
    3: -18,
    4: -15,
    5: -12,
    6: -9,
    7: -6,
    8: -3,
    9: 0,
    10: 3,
    11: 6,
    12: 9,
    13: 12,
    14: 15,
    15: 18,
    16: 21,
    17: 24,
}


# --------------------------------------------------------------------------
# Poll results
# --------------------------------------------------------------------------


class InterfaceCounters(_Model):
    """One row of ifTable + ifXTable.

    ``in_octets``/``out_octets`` come from the 64-bit ifHCInOctets/
    ifHCOutOctets when the agent has them (``octets_bits`` 64), else from the
    32-bit ifInOctets/ifOutOctets (``octets_bits`` 32); errors and discards
    are always Counter32.
    """

    index: int
    name: str | None = None  # ifName
    descr: str | None = None  # ifDescr
    alias: str | None = None  # ifAlias
    admin_up: bool | None = None
    oper_up: bool | None = None
    oper_status: OperStatus = OperStatus.UNKNOWN
    last_change_ticks: int | None = None
    in_octets: int | None = None
    out_octets: int | None = None
    octets_bits: Literal[32, 64] = 64
    in_errors: int | None = None
    out_errors: int | None = None
    in_discards: int | None = None
    out_discards: int | None = None
    speed_mbps: int | None = None  # ifHighSpeed, or ifSpeed / 10**6

    @property
    def label(self) -> str:
        return self.name or self.descr or str(self.index)


class LldpRemote(_Model):
    """One LLDP neighbour seen on a local port (lldpRemTable)."""

    local_port_num: int  # lldpRemLocalPortNum (often the ifIndex)
    local_port: str | None = None  # lldpLocPortId, else ifName of that index
    remote_index: int = 0
    remote_sysname: str | None = None
    remote_port_id: str | None = None
    remote_port_descr: str | None = None
    remote_chassis_id: str | None = None


class FdbEntry(_Model):
    """One MAC learned on one bridge port (BRIDGE-MIB dot1dTpFdbTable, Q-BRIDGE-MIB dot1qTpFdbTable).

    ``port`` is the interface's ifName (the bridge port mapped to its ifIndex
    through dot1dBasePortIfIndex), ``vlan`` the Q-BRIDGE-MIB FDB id (the VLAN
    on every switch fleetctl meets; None from the VLAN-less BRIDGE-MIB table).
    ``status`` is dot1dTpFdbStatus / dot1qTpFdbStatus as a word (``learned``,
    ``mgmt``, ``self`` ...); a switch's own MACs (``self``) are not entries.
    """

    mac: str  # lower-case, colon-separated
    port: str | None = None  # ifName, else ifDescr, else None when the bridge port maps to no interface
    if_index: int | None = None
    if_type: int | None = None  # IANAifType of the port: see ETHERNET_IF_TYPES
    bridge_port: int
    vlan: int | None = None
    status: str = "learned"


#: IANAifType values of a front-panel Ethernet port (ethernetCsmacd, fastEther,
#: gigabitEthernet ...): a MAC learned on another kind (a LAG, 161; a VLAN
#: interface, 135/136; the CPU, 53 propVirtual) is not where a station is cabled.
ETHERNET_IF_TYPES: frozenset[int] = frozenset({6, 62, 69, 117})

#: dot1dTpFdbStatus / dot1qTpFdbStatus (RFC 4188, RFC 4363): the value -> fleetctl's word.
FDB_STATUS_MAP: dict[int, str] = {1: "other", 2: "invalid", 3: "learned", 4: "self", 5: "mgmt"}


class Sensor(_Model):
    """One ENTITY-SENSOR-MIB sensor; ``value`` is scaled to its unit."""

    index: int
    name: str | None = None  # entPhysicalName
    type: str = "unknown"
    raw_value: int | None = None
    scale_exponent: int = 0
    precision: int = 0
    value: float | None = None  # raw * 10**scale_exponent / 10**precision
    oper_status: SensorStatus = SensorStatus.UNKNOWN
    units: str | None = None


class PollResult(_Model):
    """What one agent said in one poll (or why it said nothing)."""

    target: str
    host: str
    port: int
    polled_at: dt.datetime
    duration_s: float = 0.0
    sys_uptime_ticks: int | None = None
    sys_name: str | None = None
    rebooted_since_last: bool | None = None  # None: no previous poll to compare with
    interfaces: list[InterfaceCounters] = Field(default_factory=list)
    lldp: list[LldpRemote] = Field(default_factory=list)
    sensors: list[Sensor] = Field(default_factory=list)
    fdb: list[FdbEntry] = Field(default_factory=list)
    what: list[str] = Field(default_factory=list)
    error: str | None = None
    error_kind: ErrorKind | None = None
    warnings: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def interface(self, index: int) -> InterfaceCounters | None:
        for i in self.interfaces:
            if i.index == index:
                return i
        return None


# --------------------------------------------------------------------------
# Rates between two polls
# --------------------------------------------------------------------------


class InterfaceRates(_Model):
    """Per-second rates of one interface; None where no rate can be given."""

    index: int
    name: str | None = None
    in_bps: float | None = None
    out_bps: float | None = None
    in_errors_ps: float | None = None
    out_errors_ps: float | None = None
    in_discards_ps: float | None = None
    out_discards_ps: float | None = None
    note: str | None = None  # why some rates are None (new interface, counter reset ...)


class Rates(_Model):
    """Rates of one agent between two polls.

    ``interfaces`` is empty and ``reason`` says why when no rate can be given:
    either poll failed, the agent rebooted in between (sysUpTime went down),
    or no time passed.
    """

    target: str
    interval_s: float | None = None
    rebooted: bool | None = None
    reason: str | None = None
    interfaces: list[InterfaceRates] = Field(default_factory=list)

    def interface(self, index: int) -> InterfaceRates | None:
        for i in self.interfaces:
            if i.index == index:
                return i
        return None


# --------------------------------------------------------------------------
# The poller
# --------------------------------------------------------------------------

PreviousPolls = Mapping[str, PollResult] | Iterable[PollResult]


class Poller(abc.ABC):
    """An SNMP poller driver: many agents at once, results as data.

    An instance holds what repeated polls reuse (sockets, SNMPv3 engine
    discovery); use it as an async context manager or call :meth:`close`.
    The class's :meth:`sweep` is the one-shot form the core uses (through
    ``fleetctl.plugins.sweep("snmp", targets, what=...)``).

    No method raises for an agent's failure: a timeout, refused credentials
    or an answer that cannot be decoded is a :class:`PollResult` with
    ``error`` and ``error_kind`` set.
    """

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def close(self) -> None:
        """Release sockets and engines."""

    @abc.abstractmethod
    async def poll(
        self,
        target: SnmpTarget,
        *,
        what: Iterable[str] = POLL_PARTS,
        previous: PollResult | None = None,
    ) -> PollResult:
        """Poll one agent.

        Args:
            target: the agent.
            what: parts to read: ``if`` (IF-MIB), ``counters`` (the IF-MIB
                columns a traffic/error poll needs), ``lldp`` (LLDP-MIB),
                ``sensors`` (ENTITY-SENSOR-MIB), ``fdb`` (the MAC address
                table: Q-BRIDGE-MIB dot1qTpFdbTable, else BRIDGE-MIB
                dot1dTpFdbTable, ports named through dot1dBasePortIfIndex and
                ifName; at most ``max_fdb_rows`` rows, the rest cut with a
                warning). sysUpTime and sysName are
                always read. An unknown part is a ``config`` error in the result.
            previous: this agent's previous poll, to set ``rebooted_since_last``.
        """

    @abc.abstractmethod
    async def poll_many(
        self,
        targets: Iterable[SnmpTarget],
        *,
        what: Iterable[str] = POLL_PARTS,
        concurrency: int = 100,
        previous: PreviousPolls | None = None,
        progress: SweepProgress[PollResult] | None = None,
    ) -> list[PollResult]:
        """Poll every target, at most ``concurrency`` at once; one result each, in target order.

        ``previous`` gives earlier results by target name (a mapping, or
        results whose ``target`` names them); ``progress(done, total, result)``
        is called after each agent.
        """

    @classmethod
    @abc.abstractmethod
    async def sweep(
        cls,
        targets: Iterable[SnmpTarget],
        *,
        what: Iterable[str] = POLL_PARTS,
        concurrency: int = 100,
        previous: PreviousPolls | None = None,
        progress: SweepProgress[PollResult] | None = None,
    ) -> list[PollResult]:
        """:meth:`poll_many` with a poller of its own, closed at the end."""

    @staticmethod
    @abc.abstractmethod
    def rates(previous: PollResult, current: PollResult) -> Rates:
        """Per-second rates of one agent between two of its polls (pure, wrap-safe).

        A reboot between the polls, a failed poll or no time passed gives no
        rates and says why (:class:`Rates`).
        """
