"""Walked SNMP columns turned into fleetctl's models (pure, no pysnmp).

The poller hands over ``Columns``: for each walked column OID, the rows it
returned as ``{index (tuple of ints): python value}``, where values are
already plain ``int``, ``bytes`` or ``str`` (OIDs). Everything here is table
lookups and arithmetic, so it is unit-tested without an agent.
"""

from __future__ import annotations

from fleetctl.interfaces.snmp import (
    FDB_STATUS_MAP,
    IF_OPER_STATUS_MAP,
    SENSOR_SCALE_EXPONENT,
    SENSOR_STATUS_MAP,
    SENSOR_TYPE_MAP,
    FdbEntry,
    InterfaceCounters,
    LldpRemote,
    OperStatus,
    Sensor,
    SensorStatus,
)

Oid = tuple[int, ...]
Columns = dict[Oid, dict[Oid, object]]


def oid(text: str) -> Oid:
    return tuple(int(x) for x in text.strip(".").split("."))


# --------------------------------------------------------------------------
# OIDs (numeric: pysnmp 7 bundles no IF-MIB, and resolving names costs time)
# --------------------------------------------------------------------------
SYS_UPTIME = oid("1.3.6.1.2.1.1.3.0")
SYS_NAME = oid("1.3.6.1.2.1.1.5.0")
IF_NUMBER = oid("1.3.6.1.2.1.2.1.0")

IF_ENTRY = oid("1.3.6.1.2.1.2.2.1")
IF_DESCR = (*IF_ENTRY, 2)
IF_TYPE = (*IF_ENTRY, 3)
IF_SPEED = (*IF_ENTRY, 5)
IF_ADMIN_STATUS = (*IF_ENTRY, 7)
IF_OPER_STATUS = (*IF_ENTRY, 8)
IF_LAST_CHANGE = (*IF_ENTRY, 9)
IF_IN_OCTETS = (*IF_ENTRY, 10)
IF_IN_DISCARDS = (*IF_ENTRY, 13)
IF_IN_ERRORS = (*IF_ENTRY, 14)
IF_OUT_OCTETS = (*IF_ENTRY, 16)
IF_OUT_DISCARDS = (*IF_ENTRY, 19)
IF_OUT_ERRORS = (*IF_ENTRY, 20)
IFX_ENTRY = oid("1.3.6.1.2.1.31.1.1.1")
IF_NAME = (*IFX_ENTRY, 1)
IF_HC_IN_OCTETS = (*IFX_ENTRY, 6)
IF_HC_OUT_OCTETS = (*IFX_ENTRY, 10)
IF_HIGH_SPEED = (*IFX_ENTRY, 15)
IF_ALIAS = (*IFX_ENTRY, 18)

LLDP_LOC_PORT_ID = oid("1.0.8802.1.1.2.1.3.7.1.3")
LLDP_REM_ENTRY = oid("1.0.8802.1.1.2.1.4.1.1")
LLDP_REM_CHASSIS_SUBTYPE = (*LLDP_REM_ENTRY, 4)
LLDP_REM_CHASSIS_ID = (*LLDP_REM_ENTRY, 5)
LLDP_REM_PORT_SUBTYPE = (*LLDP_REM_ENTRY, 6)
LLDP_REM_PORT_ID = (*LLDP_REM_ENTRY, 7)
LLDP_REM_PORT_DESC = (*LLDP_REM_ENTRY, 8)
LLDP_REM_SYS_NAME = (*LLDP_REM_ENTRY, 9)

ENT_PHYSICAL_NAME = oid("1.3.6.1.2.1.47.1.1.1.1.7")
ENT_SENSOR_ENTRY = oid("1.3.6.1.2.1.99.1.1.1")
ENT_SENSOR_TYPE = (*ENT_SENSOR_ENTRY, 1)
ENT_SENSOR_SCALE = (*ENT_SENSOR_ENTRY, 2)
ENT_SENSOR_PRECISION = (*ENT_SENSOR_ENTRY, 3)
ENT_SENSOR_VALUE = (*ENT_SENSOR_ENTRY, 4)
ENT_SENSOR_STATUS = (*ENT_SENSOR_ENTRY, 5)
ENT_SENSOR_UNITS = (*ENT_SENSOR_ENTRY, 6)

# BRIDGE-MIB (RFC 4188) and Q-BRIDGE-MIB (RFC 4363): the MAC address table.
DOT1D_BASE_PORT_IFINDEX = oid("1.3.6.1.2.1.17.1.4.1.2")  # bridge port -> ifIndex
DOT1D_TP_FDB_PORT = oid("1.3.6.1.2.1.17.4.3.1.2")  # index: the MAC's 6 octets
DOT1D_TP_FDB_STATUS = oid("1.3.6.1.2.1.17.4.3.1.3")
DOT1Q_TP_FDB_PORT = oid("1.3.6.1.2.1.17.7.1.2.2.1.2")  # index: FDB id (the VLAN), then the MAC's 6 octets
DOT1Q_TP_FDB_STATUS = oid("1.3.6.1.2.1.17.7.1.2.2.1.3")

# Column names for messages (a walk that does not end names its table and column).
COLUMN_NAMES: dict[Oid, str] = {
    IF_DESCR: "IF-MIB::ifDescr",
    IF_TYPE: "IF-MIB::ifType",
    IF_SPEED: "IF-MIB::ifSpeed",
    IF_ADMIN_STATUS: "IF-MIB::ifAdminStatus",
    IF_OPER_STATUS: "IF-MIB::ifOperStatus",
    IF_LAST_CHANGE: "IF-MIB::ifLastChange",
    IF_IN_OCTETS: "IF-MIB::ifInOctets",
    IF_IN_DISCARDS: "IF-MIB::ifInDiscards",
    IF_IN_ERRORS: "IF-MIB::ifInErrors",
    IF_OUT_OCTETS: "IF-MIB::ifOutOctets",
    IF_OUT_DISCARDS: "IF-MIB::ifOutDiscards",
    IF_OUT_ERRORS: "IF-MIB::ifOutErrors",
    IF_NAME: "IF-MIB::ifName",
    IF_HC_IN_OCTETS: "IF-MIB::ifHCInOctets",
    IF_HC_OUT_OCTETS: "IF-MIB::ifHCOutOctets",
    IF_HIGH_SPEED: "IF-MIB::ifHighSpeed",
    IF_ALIAS: "IF-MIB::ifAlias",
    LLDP_LOC_PORT_ID: "LLDP-MIB::lldpLocPortId",
    LLDP_REM_CHASSIS_SUBTYPE: "LLDP-MIB::lldpRemChassisIdSubtype",
    LLDP_REM_CHASSIS_ID: "LLDP-MIB::lldpRemChassisId",
    LLDP_REM_PORT_SUBTYPE: "LLDP-MIB::lldpRemPortIdSubtype",
    LLDP_REM_PORT_ID: "LLDP-MIB::lldpRemPortId",
    LLDP_REM_PORT_DESC: "LLDP-MIB::lldpRemPortDesc",
    LLDP_REM_SYS_NAME: "LLDP-MIB::lldpRemSysName",
    ENT_PHYSICAL_NAME: "ENTITY-MIB::entPhysicalName",
    ENT_SENSOR_TYPE: "ENTITY-SENSOR-MIB::entPhySensorType",
    ENT_SENSOR_SCALE: "ENTITY-SENSOR-MIB::entPhySensorScale",
    ENT_SENSOR_PRECISION: "ENTITY-SENSOR-MIB::entPhySensorPrecision",
    ENT_SENSOR_VALUE: "ENTITY-SENSOR-MIB::entPhySensorValue",
    ENT_SENSOR_STATUS: "ENTITY-SENSOR-MIB::entPhySensorOperStatus",
    ENT_SENSOR_UNITS: "ENTITY-SENSOR-MIB::entPhySensorUnitsDisplay",
    DOT1D_BASE_PORT_IFINDEX: "BRIDGE-MIB::dot1dBasePortIfIndex",
    DOT1D_TP_FDB_PORT: "BRIDGE-MIB::dot1dTpFdbPort",
    DOT1D_TP_FDB_STATUS: "BRIDGE-MIB::dot1dTpFdbStatus",
    DOT1Q_TP_FDB_PORT: "Q-BRIDGE-MIB::dot1qTpFdbPort",
    DOT1Q_TP_FDB_STATUS: "Q-BRIDGE-MIB::dot1qTpFdbStatus",
}


def column_name(column: Oid) -> str:
    """``IF-MIB::ifName`` for a column fleetctl walks, else the dotted OID."""
    return COLUMN_NAMES.get(column) or ".".join(map(str, column))


# What each part of a poll walks. The 32-bit octet columns are walked only
# when an agent has no 64-bit ones (see the poller).
#
# ``counters`` is the part of ``if`` a traffic/error poll needs (8 columns
# instead of 13: names, oper status, octets, errors, discards); interfaces
# are named by ifName, or ifDescr (walked only when the agent has no ifName).
COLUMNS: dict[str, tuple[Oid, ...]] = {
    "if": (
        IF_DESCR,
        IF_ADMIN_STATUS,
        IF_OPER_STATUS,
        IF_LAST_CHANGE,
        IF_IN_DISCARDS,
        IF_IN_ERRORS,
        IF_OUT_DISCARDS,
        IF_OUT_ERRORS,
        IF_NAME,
        IF_HC_IN_OCTETS,
        IF_HC_OUT_OCTETS,
        IF_HIGH_SPEED,
        IF_ALIAS,
    ),
    "counters": (
        IF_NAME,
        IF_OPER_STATUS,
        IF_HC_IN_OCTETS,
        IF_HC_OUT_OCTETS,
        IF_IN_ERRORS,
        IF_OUT_ERRORS,
        IF_IN_DISCARDS,
        IF_OUT_DISCARDS,
    ),
    "lldp": (
        LLDP_LOC_PORT_ID,
        LLDP_REM_CHASSIS_SUBTYPE,
        LLDP_REM_CHASSIS_ID,
        LLDP_REM_PORT_SUBTYPE,
        LLDP_REM_PORT_ID,
        LLDP_REM_PORT_DESC,
        LLDP_REM_SYS_NAME,
    ),
    "sensors": (
        ENT_SENSOR_TYPE,
        ENT_SENSOR_SCALE,
        ENT_SENSOR_PRECISION,
        ENT_SENSOR_VALUE,
        ENT_SENSOR_STATUS,
        ENT_SENSOR_UNITS,
        ENT_PHYSICAL_NAME,
    ),
    # Both FDB tables at once (one walk): a VLAN-aware switch fills the
    # Q-BRIDGE one, an old or VLAN-less one only BRIDGE-MIB's.
    "fdb": (
        DOT1Q_TP_FDB_PORT,
        DOT1Q_TP_FDB_STATUS,
        DOT1D_TP_FDB_PORT,
        DOT1D_TP_FDB_STATUS,
        DOT1D_BASE_PORT_IFINDEX,
        IF_NAME,
        IF_DESCR,
        IF_TYPE,
    ),
}
#: The FDB columns whose rows grow with the MACs learned (the row cap applies to these).
FDB_ROWS = (DOT1Q_TP_FDB_PORT, DOT1Q_TP_FDB_STATUS, DOT1D_TP_FDB_PORT, DOT1D_TP_FDB_STATUS)
IF_32BIT_OCTETS = (IF_IN_OCTETS, IF_OUT_OCTETS, IF_SPEED)
IF_32BIT_COUNTERS = (IF_IN_OCTETS, IF_OUT_OCTETS)  # the fallback of a counters poll (no speed)
WHAT = ("if", "lldp", "sensors")  # the default poll; "counters" is a subset of "if"


# --------------------------------------------------------------------------
# Value helpers
# --------------------------------------------------------------------------


def text(value: object) -> str | None:
    """An OCTET STRING as text; non-printable bytes (a MAC) as aa:bb:cc hex."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        try:
            s = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return hex_colon(bytes(value))
        if s and all(c.isprintable() for c in s):
            return s
        if not s:
            return ""
        return hex_colon(bytes(value))
    return str(value)


def hex_colon(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def integer(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _single(index: Oid) -> int | None:
    return index[0] if len(index) == 1 else None


# LLDP-MIB LldpChassisIdSubtype / LldpPortIdSubtype values that carry a MAC
_LLDP_CHASSIS_MAC = 4
_LLDP_PORT_MAC = 3


def _lldp_id(value: object, subtype: object, mac_subtype: int) -> str | None:
    if isinstance(value, bytes | bytearray) and subtype == mac_subtype and len(value) == 6:
        return hex_colon(bytes(value))
    return text(value)


# --------------------------------------------------------------------------
# Tables -> models
# --------------------------------------------------------------------------


def interfaces(cols: Columns) -> list[InterfaceCounters]:
    """ifTable + ifXTable rows, by ifIndex."""
    indexes: set[int] = set()
    for c in COLUMNS["if"] + IF_32BIT_OCTETS:
        for idx in cols.get(c, {}):
            i = _single(idx)
            if i is not None:
                indexes.add(i)
    hc = bool(cols.get(IF_HC_IN_OCTETS)) or bool(cols.get(IF_HC_OUT_OCTETS))
    out = []
    for i in sorted(indexes):
        k = (i,)

        def get(c: Oid, k: Oid = k) -> object:
            return cols.get(c, {}).get(k)

        admin, oper = integer(get(IF_ADMIN_STATUS)), integer(get(IF_OPER_STATUS))
        speed = integer(get(IF_HIGH_SPEED))
        if speed is None and integer(get(IF_SPEED)) is not None:
            speed = integer(get(IF_SPEED)) // 1_000_000  # type: ignore[operator]
        out.append(
            InterfaceCounters(
                index=i,
                name=text(get(IF_NAME)),
                descr=text(get(IF_DESCR)),
                alias=text(get(IF_ALIAS)),
                admin_up=None if admin is None else admin == 1,
                oper_up=None if oper is None else oper == 1,
                oper_status=IF_OPER_STATUS_MAP.get(oper, OperStatus.UNKNOWN) if oper is not None else OperStatus.UNKNOWN,
                last_change_ticks=integer(get(IF_LAST_CHANGE)),
                in_octets=integer(get(IF_HC_IN_OCTETS if hc else IF_IN_OCTETS)),
                out_octets=integer(get(IF_HC_OUT_OCTETS if hc else IF_OUT_OCTETS)),
                octets_bits=64 if hc else 32,
                in_errors=integer(get(IF_IN_ERRORS)),
                out_errors=integer(get(IF_OUT_ERRORS)),
                in_discards=integer(get(IF_IN_DISCARDS)),
                out_discards=integer(get(IF_OUT_DISCARDS)),
                speed_mbps=speed,
            )
        )
    return out


def lldp(cols: Columns, if_names: dict[int, str] | None = None) -> list[LldpRemote]:
    """lldpRemTable rows (index: timeMark.localPortNum.remIndex)."""
    loc = {idx[0]: text(v) for idx, v in cols.get(LLDP_LOC_PORT_ID, {}).items() if len(idx) == 1}
    keys: set[Oid] = set()
    for c in COLUMNS["lldp"][1:]:
        keys.update(k for k in cols.get(c, {}) if len(k) == 3)
    out = []
    for k in sorted(keys, key=lambda k: (k[1], k[2], k[0])):
        _, port_num, rem_index = k

        def get(c: Oid, k: Oid = k) -> object:
            return cols.get(c, {}).get(k)

        out.append(
            LldpRemote(
                local_port_num=port_num,
                local_port=loc.get(port_num) or (if_names or {}).get(port_num),
                remote_index=rem_index,
                remote_sysname=text(get(LLDP_REM_SYS_NAME)),
                remote_port_id=_lldp_id(get(LLDP_REM_PORT_ID), get(LLDP_REM_PORT_SUBTYPE), _LLDP_PORT_MAC),
                remote_port_descr=text(get(LLDP_REM_PORT_DESC)),
                remote_chassis_id=_lldp_id(get(LLDP_REM_CHASSIS_ID), get(LLDP_REM_CHASSIS_SUBTYPE), _LLDP_CHASSIS_MAC),
            )
        )
    return out


def sensors(cols: Columns) -> list[Sensor]:
    """entPhySensorTable rows, named by entPhysicalName of the same index."""
    names = cols.get(ENT_PHYSICAL_NAME, {})
    indexes: set[int] = set()
    for c in COLUMNS["sensors"][:-1]:
        indexes.update(k[0] for k in cols.get(c, {}) if len(k) == 1)
    out = []
    for i in sorted(indexes):
        k = (i,)

        def get(c: Oid, k: Oid = k) -> object:
            return cols.get(c, {}).get(k)

        raw = integer(get(ENT_SENSOR_VALUE))
        scale = SENSOR_SCALE_EXPONENT.get(integer(get(ENT_SENSOR_SCALE)) or 9, 0)
        precision = integer(get(ENT_SENSOR_PRECISION)) or 0
        status = integer(get(ENT_SENSOR_STATUS))
        value = None
        if raw is not None:
            value = round(raw * 10.0**scale / 10.0**precision, max(0, precision - scale) + 3)
        out.append(
            Sensor(
                index=i,
                name=text(names.get(k)),
                type=SENSOR_TYPE_MAP.get(integer(get(ENT_SENSOR_TYPE)) or 2, "unknown"),
                raw_value=raw,
                scale_exponent=scale,
                precision=precision,
                value=value,
                oper_status=SENSOR_STATUS_MAP.get(status, SensorStatus.UNKNOWN) if status is not None else SensorStatus.UNKNOWN,
                units=text(get(ENT_SENSOR_UNITS)),
            )
        )
    return out


def fdb(cols: Columns) -> list[FdbEntry]:
    """The MAC address table: Q-BRIDGE-MIB rows where the agent has them, else BRIDGE-MIB's.

    A bridge port is mapped to its ifIndex by dot1dBasePortIfIndex and named
    by ifName (else ifDescr); a switch's own MACs (status ``self``) and
    invalid entries are left out, as are rows whose index is not a MAC.
    """
    to_ifindex = {k[0]: v for k, v in cols.get(DOT1D_BASE_PORT_IFINDEX, {}).items() if len(k) == 1 and isinstance(v, int)}
    names = {k[0]: text(v) for k, v in cols.get(IF_NAME, {}).items() if len(k) == 1}
    descrs = {k[0]: text(v) for k, v in cols.get(IF_DESCR, {}).items() if len(k) == 1}
    types = {k[0]: v for k, v in cols.get(IF_TYPE, {}).items() if len(k) == 1 and isinstance(v, int)}
    q_rows = cols.get(DOT1Q_TP_FDB_PORT, {})
    rows: list[tuple[int | None, Oid, object, object]]
    if q_rows:
        rows = [(k[0], k[1:], v, cols.get(DOT1Q_TP_FDB_STATUS, {}).get(k)) for k, v in q_rows.items() if len(k) == 7]
    else:
        plain = cols.get(DOT1D_TP_FDB_PORT, {})
        rows = [(None, k, v, cols.get(DOT1D_TP_FDB_STATUS, {}).get(k)) for k, v in plain.items() if len(k) == 6]
    out: list[FdbEntry] = []
    for vlan, octets, port, status in rows:
        if not isinstance(port, int) or any(not 0 <= o <= 255 for o in octets):
            continue
        word = FDB_STATUS_MAP.get(status, "other") if isinstance(status, int) else "learned"
        if word in ("self", "invalid"):
            continue
        if_index = to_ifindex.get(port)
        name = (names.get(if_index) or descrs.get(if_index)) if if_index is not None else None
        out.append(FdbEntry(mac=hex_colon(bytes(octets)), port=name, if_index=if_index, bridge_port=port, vlan=vlan, status=word,
                            if_type=types.get(if_index) if if_index is not None else None))  # fmt: skip
    out.sort(key=lambda e: (e.port or "", e.vlan or 0, e.mac))
    return out
