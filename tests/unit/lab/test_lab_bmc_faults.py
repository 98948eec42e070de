"""Fault injection on lab BMCs, in-process and through the control endpoint."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from lab_client_helpers import assert_redfish_error


def control(lab: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(lab.control_url + path, method=method, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=5) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_latency(lab: Any, rf: Any) -> None:
    name = "lab-mncore-00006"
    c = rf(name)
    c.get("/redfish/v1/Systems")
    assert control(lab, "PATCH", f"/lab/v1/bmcs/{name}/faults", {"latency_ms": 150})[0] == 200
    t0 = time.monotonic()
    c.get("/redfish/v1/Systems")
    assert time.monotonic() - t0 >= 0.15
    assert control(lab, "DELETE", f"/lab/v1/bmcs/{name}/faults")[0] == 204
    t0 = time.monotonic()
    c.get("/redfish/v1/Systems")
    assert time.monotonic() - t0 < 0.15


def test_error_rate(lab: Any, rf: Any) -> None:
    name = "lab-gpu-00007"
    c = rf(name)
    lab.set_fault(name, error_rate=1.0)
    status, doc, _ = c.req("GET", "/redfish/v1/Systems")
    assert status in (500, 503)
    assert_redfish_error(doc)
    lab.set_fault(name, error_rate=0.5)
    codes = [c.req("GET", "/redfish/v1/Systems")[0] for _ in range(40)]
    assert 5 < sum(x >= 500 for x in codes) < 35
    lab.set_fault(name, error_rate=None)
    assert all(c.req("GET", "/redfish/v1/Systems")[0] == 200 for _ in range(5))


def test_hang_and_drop(lab: Any, rf: Any) -> None:
    name = "lab-mncore-00008"
    c = rf(name, timeout=0.5)
    lab.set_fault(name, hang=True)
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        c.req("GET", "/redfish/v1/Systems")
    lab.set_fault(name, hang=None)
    assert c.req("GET", "/redfish/v1/Systems")[0] == 200
    lab.set_fault(name, drop=True)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
        c.req("GET", "/redfish/v1/Systems")
    lab.set_fault(name, drop=None)
    assert c.req("GET", "/redfish/v1/Systems")[0] == 200
    assert lab.counters(name)["faults_served"] >= 2


def test_hardware_faults_show_in_health(lab: Any, rf: Any) -> None:
    name = "lab-gpu-00009"  # dell: old and new schemas
    c = rf(name)
    sp, cp = c.system_path(), c.chassis_path()
    assert c.get(sp)["Status"]["Health"] == "OK"
    assert c.get(cp)["Status"]["Health"] == "OK"
    lab.set_fault(name, psu_failed=1)
    psus = c.get(cp + "/Power")["PowerSupplies"]
    assert [p["Status"]["Health"] for p in psus] == ["OK", "Critical"]
    assert c.get(cp + "/PowerSubsystem/PowerSupplies/PSU2")["Status"]["Health"] == "Critical"
    assert c.get(cp)["Status"]["Health"] == "Critical"
    lab.set_fault(name, psu_failed=None, fan_failed=True)
    fans = c.get(cp + "/Thermal")["Fans"]
    assert fans[0]["Reading"] == 0 and fans[0]["Status"]["Health"] == "Critical"
    assert c.get(cp + "/ThermalSubsystem/Fans/Fan1")["Status"]["Health"] == "Critical"
    lab.set_fault(name, fan_failed=None, hot_sensor="Inlet")
    t = next(x for x in c.get(cp + "/Thermal")["Temperatures"] if x["Name"] == "Inlet Temp")
    assert t["ReadingCelsius"] > t["UpperThresholdCritical"] and t["Status"]["Health"] == "Critical"
    assert c.get(cp + "/Sensors/Inlet")["Status"]["Health"] == "Critical"
    lab.set_fault(name, hot_sensor=None)
    assert c.get(cp)["Status"]["Health"] == "OK"
    # Memory errors: health Warning, a Warning DIMM and a log entry.
    log_uri = c.get(sp + "/LogServices")["Members"][0]["@odata.id"] + "/Entries"
    n0 = c.get(log_uri)["Members@odata.count"]
    lab.set_fault(name, memory_errors=3)
    assert c.get(sp)["Status"]["Health"] == "Warning"
    assert c.get(sp + "/Memory/DIMM_A1")["Status"]["Health"] == "Warning"
    entries = c.get(log_uri)["Members"]
    assert len(entries) == n0 + 1 and entries[-1]["Severity"] == "Warning"
    lab.set_fault(name, memory_errors=None)
    assert c.get(sp)["Status"]["Health"] == "OK"


def test_pcie_degraded_and_clock_skew_via_control(lab: Any, rf: Any) -> None:
    name = "lab-mncore-00006"
    c = rf(name)
    devs = c.get(c.chassis_path() + "/PCIeDevices")["Members"]
    status, _ = control(lab, "PATCH", f"/lab/v1/bmcs/{name}/faults", {"pcie_degraded": {"slot": 2, "lanes": 8, "gen": "Gen3"}})
    assert status == 200
    links = {c.get(d["@odata.id"])["Description"]: c.get(d["@odata.id"])["PCIeInterface"] for d in devs}
    assert links["Slot 2"] == {"LanesInUse": 8, "MaxLanes": 16, "PCIeType": "Gen3", "MaxPCIeType": "Gen4"}
    assert links["Slot 1"]["LanesInUse"] == 16
    control(lab, "PATCH", f"/lab/v1/bmcs/{name}/faults", {"pcie_degraded": None, "clock_skew_s": 3600})
    from datetime import datetime

    dt = datetime.fromisoformat(c.get(c.manager_path())["DateTime"]).timestamp()
    assert 3500 < dt - time.time() < 3700
    control(lab, "DELETE", f"/lab/v1/bmcs/{name}/faults")
    # Unknown faults and servers are refused.
    assert control(lab, "PATCH", f"/lab/v1/bmcs/{name}/faults", {"gremlins": 1})[0] == 400
    assert control(lab, "GET", "/lab/v1/bmcs/nope/counters")[0] == 404
    # Bulk: every BMC at once, then clear.
    assert control(lab, "POST", "/lab/v1/faults", {"names": "*", "faults": {"latency_ms": 1}})[1]["count"] == len(lab.names())
    assert lab.counters("plain")["faults"] == {"latency_ms": 1}
    control(lab, "POST", "/lab/v1/faults", {"names": "*", "faults": None})
    assert lab.counters("plain")["faults"] == {}
    # Counters over the control endpoint.
    status, doc = control(lab, "GET", f"/lab/v1/bmcs/{name}/counters")
    assert status == 200 and doc["requests"] > 0 and doc["url"] == lab.url_of(name)
    assert "password" not in json.dumps(doc).lower()


def test_in_process_fault_api_rejects_unknown(lab: Any) -> None:
    from fleetctl.errors import InputError

    with pytest.raises(InputError):
        lab.set_fault("plain", gremlins=True)
    with pytest.raises(InputError):
        lab.counters("nope")


def test_session_limit(lab: Any, rf: Any) -> None:
    """session_limit=N: at most N sessions at once; the next login is refused 503 SessionLimitExceeded (as bmcweb does)."""
    name = "lab-mncore-00004"
    login = {"UserName": "admin", "Password": "labpass"}
    c = rf(name)
    served0 = lab.counters(name)["faults_served"]
    lab.set_fault(name, session_limit=1)
    status, _, hdrs = c.req("POST", "/redfish/v1/SessionService/Sessions", login)
    assert status == 201
    first = hdrs["Location"]
    status, doc, _ = c.req("POST", "/redfish/v1/SessionService/Sessions", login)
    assert status == 503
    assert_redfish_error(doc, "SessionLimitExceeded")
    assert lab.counters(name)["sessions_open"] == 1
    # A logout frees the slot.
    assert c.req("DELETE", first)[0] in (200, 204)
    status, _, hdrs = c.req("POST", "/redfish/v1/SessionService/Sessions", login)
    assert status == 201
    assert c.req("DELETE", hdrs["Location"])[0] in (200, 204)
    # True: no session at all; requests with basic auth are still answered.
    lab.set_fault(name, session_limit=True)
    assert c.req("POST", "/redfish/v1/SessionService/Sessions", login)[0] == 503
    assert c.req("GET", "/redfish/v1/Systems")[0] == 200
    assert lab.counters(name)["faults_served"] - served0 == 2
    # Cleared: the lab's own max_sessions (3 in these tests) again.
    lab.set_fault(name, session_limit=None)
    made = [c.req("POST", "/redfish/v1/SessionService/Sessions", login) for _ in range(4)]
    assert [m[0] for m in made] == [201, 201, 201, 503]
    for m in made[:3]:
        c.req("DELETE", m[2]["Location"])
    assert lab.counters(name)["sessions_open"] == 0


def test_drop_fraction(lab: Any, rf: Any) -> None:
    """drop=0.5 closes about half the connections without an answer; the rest are answered."""
    name = "lab-gpu-00005"
    c = rf(name)
    lab.set_fault(name, drop=0.5)
    dropped = 0
    for _ in range(30):
        try:
            assert c.req("GET", "/redfish/v1/Systems")[0] == 200
        except (http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError):
            dropped += 1
    lab.set_fault(name, drop=None)
    assert 3 < dropped < 27
