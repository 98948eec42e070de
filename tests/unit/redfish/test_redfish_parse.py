"""Redfish JSON -> models: the tables and parsers, without I/O."""

from __future__ import annotations

import datetime as dt

import pytest
from fleetctl_drivers.redfish import decode_error, format_fingerprint, parse

from fleetctl.errors import DriverError
from fleetctl.interfaces.bmc import (
    BootDevice,
    HealthItem,
    HealthReport,
    NoopBios,
    NoopMedia,
    NoopPower,
    PCIeDevice,
    PowerState,
)


@pytest.mark.parametrize(
    "value,expected",
    [
        ("On", PowerState.ON),
        ("Off", PowerState.OFF),
        ("PoweringOn", PowerState.POWERING_ON),
        ("PoweringOff", PowerState.POWERING_OFF),
        ("Paused", PowerState.ON),
        ("StandbyOffline", PowerState.UNKNOWN),
        (None, PowerState.UNKNOWN),
        (3, PowerState.UNKNOWN),
    ],
)
def test_power_state_table(value, expected):
    assert parse.power_state(value) is expected


def test_boot_device_table_round_trip_and_unknown():
    for dev, rf in parse.BOOT_TARGET_TO_REDFISH.items():
        assert parse.boot_device(rf) is dev
    assert parse.boot_device("SDCard") is BootDevice.UNKNOWN


@pytest.mark.parametrize(
    "value,decimal,expected",
    [
        ("0x10DE", False, "0x10de"),
        ("10de", False, "0x10de"),
        (4318, False, "0x10de"),
        ("4318", True, "0x10de"),  # HPE iLO 5 writes decimal strings
        ("4318", False, "0x4318"),  # without the quirk the same string is hex
        ("0xffff", False, None),
        ("n/a", False, None),
        ("", False, None),
    ],
)
def test_pci_ids(value, decimal, expected):
    assert parse.parse_pci_id(value, decimal=decimal) == expected


def test_class_codes():
    assert parse.parse_class_code("0x020000") == "0x0200"  # Gigabyte/AMI: class, subclass, prog-if
    assert parse.parse_class_code(3, 2, decimal=True) == "0x0302"  # HPE OEM: class + subclass ints
    assert parse.parse_class_code("3", decimal=True) == "0x03"  # HPE PCIeFunction: class only


def test_decode_error_dmtf_and_hpe_styles():
    dmtf = {
        "error": {
            "code": "Base.1.8.GeneralError",
            "message": "general",
            "@Message.ExtendedInfo": [
                {
                    "MessageId": "Base.1.8.PropertyUnknown",
                    "Message": "The property Foo is unknown.",
                    "Resolution": "Remove it.",
                }
            ],
        }
    }
    msg, ids = decode_error(dmtf)
    assert msg == "The property Foo is unknown. [Base.1.8.PropertyUnknown]; resolution: Remove it."
    assert ids == ["Base.1.8.PropertyUnknown"]
    hpe = {
        "error": {
            "code": "iLO.0.10.ExtendedInfo",
            "message": "See @Message.ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [{"MessageArgs": ["Invalid URI"], "MessageId": "Base.1.4.ResourceMissingAtURI"}],
        }
    }
    msg, ids = decode_error(hpe)
    assert msg == "Base.1.4.ResourceMissingAtURI (Invalid URI)"
    assert decode_error({"error": {"code": "X", "message": "plain"}}) == ("plain", [])
    assert decode_error("not json") == (None, [])
    assert decode_error({"Id": "1"}) == (None, [])


def test_format_fingerprint():
    assert format_fingerprint("abcd01") == "AB:CD:01"


def rules():
    return parse.load_board_rules(None)


def test_boards_nvidia_gpu_by_id_not_its_audio_function():
    gpu = PCIeDevice(
        id="1", name="NVIDIA A40", vendor_id="0x10de", device_id="0x2235", class_code="0x0302", serial="S1"
    )
    audio = PCIeDevice(id="2", name="Audio device", vendor_id="0x10de", device_id="0x1aef", class_code="0x0403")
    nic = PCIeDevice(id="3", name="MT27800 Family [ConnectX-5]", vendor_id="0x15b3", class_code="0x0200")
    boards = parse.classify_boards([gpu, audio, nic], rules())
    assert [(b.kind, b.serial) for b in boards] == [("gpu", "S1")]


def test_boards_mncore_by_name_and_generation():
    mn2 = PCIeDevice(id="a", name="MN-Core 2 board", vendor_id="0x1234")
    mn1 = PCIeDevice(id="b", name="MN-Core accelerator", vendor_id="0x1234")
    kinds = [b.kind for b in parse.classify_boards([mn2, mn1], rules())]
    assert kinds == ["mncore2", "mncore"]


def test_boards_from_a_site_file(tmp_path, monkeypatch):
    f = tmp_path / "acc.yaml"
    f.write_text("rules:\n  - kind: mncore2\n    vendor_ids: ['0x1e2f']\n    device_ids: ['0x0100']\n")
    dev = PCIeDevice(id="x", name="Processing accelerator", vendor_id="0x1e2f", device_id="0x0100")
    other = PCIeDevice(id="y", name="Processing accelerator", vendor_id="0x1e2f", device_id="0x0200")
    assert [b.kind for b in parse.classify_boards([dev, other], parse.load_board_rules(str(f)))] == ["mncore2"]
    parse.load_board_rules.cache_clear()
    monkeypatch.setenv("FLEETCTL_ACCELERATORS_FILE", str(f))
    try:
        assert [b.kind for b in parse.classify_boards([dev], parse.load_board_rules(None))] == ["mncore2"]
        # the bundled GPU rule is gone with a site file of its own
        assert (
            parse.classify_boards(
                [PCIeDevice(id="g", name="NVIDIA A40", vendor_id="0x10de", class_code="0x0302")],
                parse.load_board_rules(None),
            )
            == []
        )
    finally:
        parse.load_board_rules.cache_clear()


def test_pcie_link_from_standard_device():
    dev = {
        "Id": "1",
        "Name": "GPU",
        "Description": "Slot 17",
        "FirmwareVersion": "Not Available",
        "PCIeInterface": {"LanesInUse": 8, "MaxLanes": 16, "PCIeType": "Gen4", "MaxPCIeType": "Gen5"},
    }
    fn = [{"FunctionId": 1, "VendorId": "0x10DE", "DeviceId": "0x2330", "ClassCode": "0x030200"}]
    d = parse.parse_pcie_device(dev, fn)
    assert (d.link_gen, d.link_width, d.max_link_gen, d.max_link_width) == (4, 8, 5, 16)
    assert d.link_degraded
    assert d.slot == "17" and d.firmware is None and d.vendor_id == "0x10de" and d.class_code == "0x0302"


def test_old_thermal_power_and_new_sensor():
    fans, temps = parse.parse_old_thermal(
        {
            "Fans": [
                {
                    "Name": "Fan 1",
                    "Reading": 35,
                    "ReadingUnits": "Percent",
                    "Status": {"Health": "OK", "State": "Enabled"},
                },
                {"Name": "Fan 2", "Status": {"State": "Absent"}},
            ],
            "Temperatures": [
                {
                    "Name": "CPU",
                    "ReadingCelsius": 91,
                    "UpperThresholdCritical": 90,
                    "Status": {"Health": "Critical", "State": "Enabled"},
                }
            ],
        }
    )
    assert [f.ok for f in fans] == [True, True]  # an absent fan bay is not a fault
    assert temps[0].reading == 91 and temps[0].upper_critical == 90 and not temps[0].ok
    psus = parse.parse_old_power(
        {
            "PowerSupplies": [
                {
                    "Name": "HpeServerPowerSupply",
                    "MemberId": "0",
                    "Oem": {"Hpe": {"BayNumber": 1}},
                    "Status": {"Health": "OK"},
                },
                {"Name": "nil", "MemberId": "1"},
            ]
        }
    )
    assert [p.name for p in psus] == ["PSU 1", "PSU 1"]  # HPE: bay number; AMI "nil": MemberId
    assert psus[1].health is None
    t = parse.parse_sensor_temperature(
        {
            "Id": "CPU1Temp",
            "Name": "CPU #1",
            "ReadingType": "Temperature",
            "Reading": 44,
            "Thresholds": {"UpperCritical": {"Reading": 42}},
            "Status": {"Health": "Warning"},
        }
    )
    assert t.upper_critical == 42 and t.health == "Warning"
    assert parse.parse_sensor_temperature({"ReadingType": "Voltage", "Reading": 12}) is None


def test_health_report_problems():
    r = HealthReport(
        system_health="OK",
        chassis_health="Warning",
        psus=[HealthItem(name="PSU 1", health="Critical", state="Enabled")],
        fans=[HealthItem(name="Fan 2", health="Warning", state="Absent")],
    )
    assert r.problems == ["chassis health Warning", "psu PSU 1: Critical"]


def test_manager_clock_skew():
    now = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    m = parse.parse_manager({"Id": "bmc", "FirmwareVersion": "2.1", "DateTime": "2024-01-01T12:00:30+00:00"}, now=now)
    assert m.clock_skew_seconds == 30.0 and m.firmware_version == "2.1"
    m = parse.parse_manager({"DateTime": "2024-01-01T21:00:00+09:00"}, now=now)
    assert m.clock_skew_seconds == 0.0
    assert parse.parse_manager({"DateTime": "garbage"}).clock_skew_seconds is None


def test_mac_and_strings():
    assert parse.parse_mac("B4-2E-99-BA-DE-15") == "b4:2e:99:ba:de:15"
    assert parse.parse_mac("00:00:00:00:00:00") is None
    assert parse._s("N/A") is None and parse._s("None") is None and parse._s(" x ") == "x"


@pytest.mark.parametrize(
    "cls,method,args", [(NoopPower, "on", ()), (NoopMedia, "insert", ("http://x",)), (NoopBios, "stage", ({},))]
)
def test_noop_capabilities_say_not_supported(cls, method, args):
    import asyncio

    with pytest.raises(DriverError, match="not supported by this BMC"):
        asyncio.run(getattr(cls("node7"), method)(*args))
