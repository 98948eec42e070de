"""Sensors that are absent or offline (a powered-off server's) are not judged as readings (issue 20, item 2).

The recorded case is a Supermicro BMC's Thermal (tests/data/redfish/thermal-absent,
see its SOURCES.md): one temperature Absent with reading 0 and every threshold 0.
The hand-made cases follow the shapes of a powered-off HPE iLO 4 and of the new
Sensors schema's offline states, and say so.
"""

from __future__ import annotations

import json
from pathlib import Path

from fleetctl_drivers.redfish import parse

from fleetctl.interfaces.bmc import HealthItem, HealthReport, Temperature
from fleetctl.sweep import server_checks
from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.engine import _evaluate

DATA = Path(__file__).parents[2] / "data" / "redfish" / "thermal-absent"


def expect() -> ServerExpect:
    return ServerExpect(name="srv", serial="S1", model="m", site="s", rack="r", position=1)


def temperature_findings(temps: list[Temperature]) -> list[tuple[str, str, str]]:
    reading = ServerReading(health=HealthReport(system_health="OK", chassis_health="OK", temperatures=temps,
                                                psus=[HealthItem(name="PSU1", health="OK", state="Enabled")],
                                                fans=[HealthItem(name="Fan1", health="OK")]))  # fmt: skip
    fs = _evaluate("server", "srv", reading, expect(), "bmc")
    return sorted((f.subject, f.status.value, f.message) for f in fs if f.check == "temperature")


def test_recorded_thermal_with_an_absent_zero_threshold_sensor_has_no_finding() -> None:
    thermal = json.loads((DATA / "gofish-supermicro-thermal.json").read_text())
    _fans, temps = parse.parse_old_thermal(thermal)
    inlet = next(t for t in temps if t.name == "Inlet Temp")
    assert (inlet.state, inlet.reading, inlet.upper_critical, inlet.upper_fatal) == ("Absent", 0.0, 0.0, 0.0)
    assert temperature_findings(temps) == []
    # the absent 0 is no temperature in the metrics either
    m = server_checks.metrics(ServerReading(health=HealthReport(temperatures=temps)))
    assert "Inlet Temp" not in m["temperatures"] and m["max_temp_c"] == 71.0


def test_a_real_reading_beside_the_absent_one_is_still_judged() -> None:
    thermal = json.loads((DATA / "gofish-supermicro-thermal.json").read_text())
    _fans, temps = parse.parse_old_thermal(thermal)
    nic = next(t for t in temps if t.name == "AOC_NIC1 Temp")
    nic.reading = 101.0  # its UpperThresholdCritical is 100
    assert temperature_findings(temps) == [("AOC_NIC1 Temp", "critical", "AOC_NIC1 Temp 101 C, at or above its limit 100 C")]


def test_powered_off_server_sensors_offline_are_not_readings() -> None:
    """Hand-made, after a powered-off server's Sensors (new schema): offline states, reading 0, thresholds 0."""
    sensors = [
        {"Id": f"T{i}", "Name": name, "ReadingType": "Temperature", "ReadingUnits": "Cel", "Reading": 0,
         "Status": {"State": state}, "Thresholds": {"UpperCritical": {"Reading": 0}, "UpperFatal": {"Reading": 0}}}
        for i, (name, state) in enumerate((("CPU0 Temp", "StandbyOffline"), ("GPU0 Temp", "UnavailableOffline"),
                                           ("PCIe 3 Temp", "Disabled"), ("Riser Temp", "Absent")))
    ]  # fmt: skip
    temps = [t for t in (parse.parse_sensor_temperature(s) for s in sensors) if t]
    assert len(temps) == 4
    assert temperature_findings(temps) == []


def test_an_offline_sensor_the_bmc_calls_critical_is_still_said_without_its_zero() -> None:
    t = Temperature(name="GPU0 Temp", state="UnavailableOffline", health="Critical", reading=0, upper_critical=0)
    assert temperature_findings([t]) == [("GPU0 Temp", "critical", "GPU0 Temp Critical (UnavailableOffline)")]


def test_a_zero_threshold_beside_a_real_one_is_no_limit() -> None:
    """Hand-made after HPE iLO 4: UpperThresholdFatal 0 beside a real critical one, or 0 alone on a read sensor."""
    cpu = Temperature(name="02-CPU 1", state="Enabled", health="OK", reading=40, upper_critical=None, upper_fatal=0)
    psu = Temperature(name="11-PS 1 Inlet", state="Enabled", health="OK", reading=36, upper_critical=0, upper_fatal=0)
    dimm = Temperature(name="04-P1 DIMM 1-6", state="Enabled", health="OK", reading=86, upper_critical=89, upper_fatal=0)
    assert cpu.limit is None and psu.limit is None and dimm.limit == 89
    assert temperature_findings([cpu, psu, dimm]) == [("04-P1 DIMM 1-6", "warning", "04-P1 DIMM 1-6 86 C, within 5 C of its limit 89 C")]


def test_an_absent_fan_shows_no_reading() -> None:
    fan = HealthItem(name="Fan 3", state="StandbyOffline", health="Warning", reading=0, units="RPM")
    reading = ServerReading(health=HealthReport(fans=[fan], temperatures=[Temperature(name="t", reading=20, upper_critical=80)]))
    fs = [f for f in _evaluate("server", "srv", reading, expect(), "bmc") if f.check == "fan"]
    assert [f.message for f in fs] == ["fan Fan 3: Warning"]
