"""SNMP served by snmpsim from data the lab renders, read with pysnmp 7; faults seen by SNMP and the CLIs."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any

from swlab_helpers import (
    IF_HC_IN,
    IF_IN_ERRORS,
    IF_LAST_CHANGE,
    IF_OPER,
    LLDP_REM_PORTID,
    LLDP_REM_SYSNAME,
    SENSOR_VALUE,
    SYS_NAME,
    SYS_UPTIME,
    connect,
    snmp_get,
    snmp_walk,
    wait_for,
)  # fmt: skip

EOS, SONIC = "lab-eos-1", "lab-sonic-1"


def test_system_interfaces_lldp_and_sensors(swlab: Any) -> None:
    st = swlab.status()["switches"][EOS]
    assert st["community"] == f"public@{EOS}" and st["snmp"].startswith(f"{swlab.lab.config.base_address}:")
    a = snmp_get(swlab, EOS, SYS_NAME, SYS_UPTIME, f"{IF_HC_IN}.1", f"{IF_OPER}.1", f"{IF_OPER}.5", f"{IF_OPER}.6")
    assert a[SYS_NAME] == EOS
    assert a[f"{IF_OPER}.1"] == 1 and a[f"{IF_OPER}.6"] == 1  # cabled
    assert a[f"{IF_OPER}.5"] == 2  # not cabled
    time.sleep(1.1)
    b = snmp_get(swlab, EOS, SYS_UPTIME, f"{IF_HC_IN}.1", f"{IF_HC_IN}.5")
    assert b[SYS_UPTIME] > a[SYS_UPTIME]
    assert b[f"{IF_HC_IN}.1"] > a[f"{IF_HC_IN}.1"]  # traffic on a cabled port
    assert b[f"{IF_HC_IN}.5"] == 0
    lldp = snmp_walk(swlab, EOS, LLDP_REM_SYSNAME)
    assert lldp == {f"{LLDP_REM_SYSNAME}.0.1.1": "srv-01", f"{LLDP_REM_SYSNAME}.0.2.1": "srv-02",
                    f"{LLDP_REM_SYSNAME}.0.3.1": "srv-03", f"{LLDP_REM_SYSNAME}.0.4.1": "srv-04",
                    f"{LLDP_REM_SYSNAME}.0.6.1": SONIC}  # fmt: skip
    assert snmp_walk(swlab, SONIC, LLDP_REM_PORTID)[f"{LLDP_REM_PORTID}.0.6.1"] == "Ethernet49/1"
    temps = snmp_walk(swlab, EOS, SENSOR_VALUE)
    assert len(temps) == 5 and all(15 < v < 80 for v in temps.values())


def test_flapping_port(swlab: Any) -> None:
    swlab.switch_fault(SONIC, "Ethernet12", "flap", 0.5)
    try:
        seen_oper, seen_change = set(), set()

        def both_moved() -> bool:
            v = snmp_get(swlab, SONIC, f"{IF_OPER}.4", f"{IF_LAST_CHANGE}.4")
            seen_oper.add(v[f"{IF_OPER}.4"])
            seen_change.add(v[f"{IF_LAST_CHANGE}.4"])
            return seen_oper == {1, 2} and len(seen_change) >= 2

        wait_for(both_moved, timeout=10, every=0.15)
    finally:
        swlab.switch_fault(SONIC, "Ethernet12", "flap", None)
    assert snmp_get(swlab, SONIC, f"{IF_OPER}.4")[f"{IF_OPER}.4"] == 1


def test_crc_errors_on_sonic_show_in_portstat(swlab: Any) -> None:
    swlab.switch_fault(SONIC, "Ethernet8", "crc", 500)
    try:
        c = connect(swlab, SONIC)
        try:
            def rx_err() -> int:
                out = c.send_command("show interfaces counters")
                row = next(ln.split() for ln in out.splitlines() if ln.split()[:1] == ["Ethernet8"])
                return int(row[6].replace(",", ""))  # RX_BPS is two words ("1.24 MB/s")

            first = wait_for(rx_err, timeout=5)
            assert wait_for(lambda: rx_err() > first, timeout=5)
        finally:
            c.disconnect()
    finally:
        swlab.switch_fault(SONIC, "Ethernet8", "crc", None)


def test_crc_errors_grow_and_stop(swlab: Any) -> None:
    oid = f"{IF_IN_ERRORS}.3"
    assert snmp_get(swlab, EOS, oid)[oid] == 0
    swlab.switch_fault(EOS, "Ethernet3", "crc", 200)
    first = wait_for(lambda: snmp_get(swlab, EOS, oid)[oid], timeout=5)
    time.sleep(0.5)
    assert snmp_get(swlab, EOS, oid)[oid] > first
    c = connect(swlab, EOS)
    try:
        m = re.search(r"(\d+) input errors, (\d+) CRC", c.send_command("show interfaces Ethernet3"))
        assert m and int(m.group(2)) > first  # the CLI counts them too
    finally:
        c.disconnect()
    swlab.switch_fault(EOS, "Ethernet3", "crc", None)
    frozen = snmp_get(swlab, EOS, oid)[oid]
    time.sleep(0.5)
    assert snmp_get(swlab, EOS, oid)[oid] == frozen >= first  # the counter stops; it never goes back


def test_miscabled_link_in_lldp_mib_and_both_clis(swlab: Any) -> None:
    swlab.switch_fault(EOS, "Ethernet1", "miscabled", "Ethernet3")  # the two cables swapped
    swlab.switch_fault(SONIC, "Ethernet0", "miscabled", {"system": "rogue-host", "port": "eth7"})
    try:
        lldp = snmp_walk(swlab, EOS, LLDP_REM_SYSNAME)
        assert lldp[f"{LLDP_REM_SYSNAME}.0.1.1"] == "srv-03" and lldp[f"{LLDP_REM_SYSNAME}.0.3.1"] == "srv-01"
        c = connect(swlab, EOS)
        try:
            rows = {r["local_interface"]: r for r in c.send_command("show lldp neighbors", use_textfsm=True)}
            assert rows["Et1"]["neighbor_name"] == "srv-03" and rows["Et3"]["neighbor_name"] == "srv-01"
            detail = {r["local_interface"]: r for r in c.send_command("show lldp neighbors detail", use_textfsm=True)}
            assert detail["Ethernet1"]["neighbor_name"] == "srv-03" and detail["Ethernet1"]["neighbor_interface"] == "eth0"
            assert detail["Ethernet1"]["chassis_id"] == "0200.0000.0301"
        finally:
            c.disconnect()
        assert snmp_get(swlab, SONIC, f"{LLDP_REM_SYSNAME}.0.1.1")[f"{LLDP_REM_SYSNAME}.0.1.1"] == "rogue-host"
        c = connect(swlab, SONIC)
        try:
            row = next(ln.split() for ln in c.send_command("show lldp table").splitlines() if ln.startswith("Ethernet0 "))
            assert row[:3] == ["Ethernet0", "rogue-host", "eth7"]
        finally:
            c.disconnect()
    finally:
        swlab.clear_faults(EOS, "Ethernet1")
        swlab.clear_faults(SONIC)
    assert snmp_get(swlab, EOS, f"{LLDP_REM_SYSNAME}.0.3.1")[f"{LLDP_REM_SYSNAME}.0.3.1"] == "srv-03"


def test_pulled_cable_and_the_control_endpoint(swlab: Any) -> None:
    url = swlab.control_url + f"/lab/v1/switches/{EOS}/faults"
    req = urllib.request.Request(url, data=json.dumps({"port": "Ethernet4", "faults": {"down": True}}).encode(),
                                 method="PATCH", headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=5) as r:
        assert json.load(r)["ports"]["Ethernet4"] == {"down": True}
    with urllib.request.urlopen(swlab.control_url + f"/lab/v1/switches/{EOS}", timeout=5) as r:
        doc = json.load(r)
    assert doc["ports"]["Ethernet4"]["oper_up"] is False and doc["ports"]["Ethernet4"]["lldp"] is None
    assert doc["ports"]["Ethernet4"]["cabled_to"] == "srv-04:eth0" and "password" not in json.dumps(doc)
    assert snmp_get(swlab, EOS, f"{IF_OPER}.4")[f"{IF_OPER}.4"] == 2
    assert f"{LLDP_REM_SYSNAME}.0.4.1" not in snmp_walk(swlab, EOS, LLDP_REM_SYSNAME)
    bad = urllib.request.Request(url, data=json.dumps({"port": "Ethernet4", "fault": "gremlins"}).encode(), method="PATCH")
    try:
        urllib.request.urlopen(bad, timeout=5)
        raise AssertionError("an unknown fault was accepted")
    except urllib.error.HTTPError as e:
        assert e.code == 400 and "unknown port fault" in e.read().decode()
    urllib.request.urlopen(urllib.request.Request(url + "?port=Ethernet4", method="DELETE"), timeout=5).close()
    assert snmp_get(swlab, EOS, f"{IF_OPER}.4")[f"{IF_OPER}.4"] == 1


def test_session_dropped_mid_change(swlab: Any) -> None:
    from netmiko.exceptions import NetmikoTimeoutException, ReadTimeout

    c = connect(swlab, EOS, read_timeout_override=1.5)
    c.enable()
    swlab.switch_fault(EOS, None, "ssh_drop_after", 3)  # configure, interface, description: dropped after it
    try:
        c.send_config_set(["interface Ethernet5", "description half-done", "shutdown"])
        raise AssertionError("the session was not dropped")
    except (OSError, EOFError, NetmikoTimeoutException, ReadTimeout):
        pass
    finally:
        c.disconnect()
    state = swlab.describe(EOS)["ports"]["Ethernet5"]
    assert state["description"] == "half-done" and state["enabled"] is True  # applied up to the drop
    assert swlab.counters(EOS)["drops"] == 1
    c = connect(swlab, EOS)
    try:
        c.enable()
        c.send_config_set(["interface Ethernet5", "no description"])
    finally:
        c.disconnect()


def test_overheat_and_reboot_show_in_snmp(swlab: Any) -> None:
    asic = f"{SENSOR_VALUE}.104"
    normal = snmp_get(swlab, SONIC, asic)[asic]
    swlab.switch_fault(SONIC, None, "overheat", True)
    try:
        assert snmp_get(swlab, SONIC, asic)[asic] == 97
    finally:
        swlab.switch_fault(SONIC, None, "overheat", None)
    assert snmp_get(swlab, SONIC, asic)[asic] == normal
    before = snmp_get(swlab, SONIC, SYS_UPTIME, f"{IF_HC_IN}.1")
    swlab.switch_fault(SONIC, None, "reboot")
    after = snmp_get(swlab, SONIC, SYS_UPTIME, f"{IF_HC_IN}.1")
    assert after[SYS_UPTIME] < before[SYS_UPTIME] or before[SYS_UPTIME] < 300  # sysUpTime restarted
    assert after[f"{IF_HC_IN}.1"] < before[f"{IF_HC_IN}.1"]  # and so did the counters


def test_uptime_s_moves_the_boot_back_and_a_reboot_then_goes_down(swlab: Any) -> None:
    import pytest

    from fleetctl.errors import InputError

    swlab.switch_fault(SONIC, None, "uptime_s", 86_400)
    up = snmp_get(swlab, SONIC, SYS_UPTIME)[SYS_UPTIME]
    assert 86_400 * 100 <= up < 86_500 * 100  # TimeTicks: a day, not the lab's seconds
    swlab.switch_fault(SONIC, None, "reboot")
    assert snmp_get(swlab, SONIC, SYS_UPTIME)[SYS_UPTIME] < up
    for bad in ("soon", -1, True, "inf", "nan"):
        with pytest.raises(InputError, match="uptime_s wants seconds"):  # the control call's one-line error
            swlab.switch_fault(SONIC, None, "uptime_s", bad)


def test_a_fault_is_what_snmp_serves_when_the_control_call_returns(swlab: Any) -> None:
    """snmpsim indexes a changed data file at its next request; the lab makes that request itself before it
    answers the control call, so the sweep that comes next is not the one kept waiting (on a busy machine a
    dbm.dumb index took longer than a sweep's SNMP timeout, and the switch read as unreachable)."""
    (index,) = (swlab.lab.state_dir / "snmp" / "cache").glob(f"p*/*@{SONIC}.dbm.dat")  # the index of the process serving it
    url = swlab.control_url + f"/lab/v1/switches/{SONIC}/faults"
    before = time.time()
    req = urllib.request.Request(url, data=json.dumps({"port": None, "faults": {"overheat": True}}).encode(),
                                 method="PATCH", headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            assert json.load(r)["switch"] == {"overheat": 97}
        assert index.stat().st_mtime >= before  # indexed again before the call returned, no client asking
        assert max(snmp_walk(swlab, SONIC, SENSOR_VALUE).values()) == 97
    finally:
        before = time.time()
        urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=30).close()
    assert index.stat().st_mtime >= before
