"""Walked columns -> models, and target validation (pure, no agent)."""

from __future__ import annotations

import pytest
from fleetctl_drivers.snmp import parse as P
from pydantic import ValidationError

from fleetctl.interfaces.snmp import OperStatus, SensorStatus, SnmpTarget
from fleetctl.secrets import Secret


def test_interfaces_prefer_64_bit_octets() -> None:
    cols = {
        P.IF_DESCR: {(1,): b"eth0", (2,): b"eth1"},
        P.IF_ADMIN_STATUS: {(1,): 1, (2,): 2},
        P.IF_OPER_STATUS: {(1,): 1, (2,): 7},
        P.IF_HC_IN_OCTETS: {(1,): 2**40, (2,): 7},
        P.IF_HC_OUT_OCTETS: {(1,): 3, (2,): 4},
        P.IF_IN_OCTETS: {(1,): 123},
        P.IF_HIGH_SPEED: {(1,): 25_000},
        P.IF_NAME: {(1,): b"Ethernet1"},
    }
    a, b = P.interfaces(cols)
    assert (a.index, a.name, a.descr, a.admin_up, a.oper_up, a.in_octets, a.octets_bits, a.speed_mbps) == (
        1, "Ethernet1", "eth0", True, True, 2**40, 64, 25_000)
    assert b.oper_status is OperStatus.LOWER_LAYER_DOWN and b.admin_up is False and b.label == "eth1"


def test_interfaces_fall_back_to_32_bit() -> None:
    cols = {P.IF_DESCR: {(1,): b"lo"}, P.IF_IN_OCTETS: {(1,): 5}, P.IF_OUT_OCTETS: {(1,): 6}, P.IF_SPEED: {(1,): 10_000_000}}
    (i,) = P.interfaces(cols)
    assert (i.in_octets, i.out_octets, i.octets_bits, i.speed_mbps) == (5, 6, 32, 10)


def test_unknown_oper_status_maps_to_unknown() -> None:
    (i,) = P.interfaces({P.IF_OPER_STATUS: {(9,): 42}})
    assert i.oper_status is OperStatus.UNKNOWN and i.oper_up is False


def test_lldp_remote_rows_and_mac_ids() -> None:
    cols = {
        P.LLDP_LOC_PORT_ID: {(1,): b"swp1"},
        P.LLDP_REM_CHASSIS_SUBTYPE: {(0, 1, 1): 4, (0, 2, 3): 4},
        P.LLDP_REM_CHASSIS_ID: {(0, 1, 1): bytes.fromhex("0c42a1000001"), (0, 2, 3): bytes.fromhex("0c42a1000002")},
        P.LLDP_REM_PORT_SUBTYPE: {(0, 1, 1): 5, (0, 2, 3): 3},
        P.LLDP_REM_PORT_ID: {(0, 1, 1): b"eth0", (0, 2, 3): bytes.fromhex("020000000002")},
        P.LLDP_REM_SYS_NAME: {(0, 1, 1): b"node001", (0, 2, 3): b"node002"},
    }
    a, b = P.lldp(cols, {2: "swp2"})
    assert (a.local_port_num, a.local_port, a.remote_sysname, a.remote_port_id, a.remote_chassis_id) == (
        1, "swp1", "node001", "eth0", "0c:42:a1:00:00:01")
    assert (b.local_port, b.remote_index, b.remote_port_id) == ("swp2", 3, "02:00:00:00:00:02")


def test_sensors_scale_and_precision() -> None:
    cols = {
        P.ENT_SENSOR_TYPE: {(1,): 8, (2,): 4, (3,): 99},
        P.ENT_SENSOR_SCALE: {(1,): 9, (2,): 8, (3,): 9},
        P.ENT_SENSOR_PRECISION: {(1,): 1, (2,): 0, (3,): 0},
        P.ENT_SENSOR_VALUE: {(1,): 452, (2,): 12050, (3,): 1},
        P.ENT_SENSOR_STATUS: {(1,): 1, (2,): 3, (3,): 77},
        P.ENT_PHYSICAL_NAME: {(1,): b"Ambient", (2,): b"12V", (500,): b"chassis"},
    }
    t, v, odd = P.sensors(cols)
    assert (t.name, t.type, t.value, t.oper_status) == ("Ambient", "celsius", 45.2, SensorStatus.OK)
    assert (v.type, v.value, v.oper_status) == ("volts_dc", 12.05, SensorStatus.NONOPERATIONAL)
    assert (odd.type, odd.oper_status, odd.name) == ("unknown", SensorStatus.UNKNOWN, None)


def test_text_of_binary_is_hex() -> None:
    assert P.text(b"\x00\x11\xaa") == "00:11:aa"
    assert P.text(b"swp1") == "swp1"


def test_target_secrets_hidden_and_checked() -> None:
    t = SnmpTarget(name="sw", host="10.0.0.1", community=Secret("s3cret"))
    assert "s3cret" not in repr(t) and "s3cret" not in str(t.model_dump())
    assert t.community_text() == "s3cret" and t.problem() is None
    v3 = SnmpTarget(name="sw", host="h", version="3", user="u", auth_key="short", priv_key="longenough")
    assert v3.problem() == "SNMPv3 auth key must have at least 8 characters"
    assert SnmpTarget(name="sw", host="h", version="3").problem() == "SNMPv3 needs a user"
    with pytest.raises(ValidationError):
        SnmpTarget(name="sw", host="h", community=42)
    with pytest.raises(ValidationError):
        SnmpTarget(name="sw", host="h", version="1")  # type: ignore[arg-type]
