"""The Redfish driver against recorded real BMCs (shared/redfish-mockups).

Each recorded service is served read-only by ``mockup_server.py``; the
expectations below were read from the recorded JSON by hand (serials, slots,
versions), so a parser that stops finding them fails here. TLS pinning is
tested with a self-signed certificate made in the test.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ipaddress
import sys
from pathlib import Path

import pytest
from fleetctl_drivers.redfish import RedfishDriver, RedfishError, format_fingerprint, run_many

from fleetctl.errors import DriverError, TLSMismatch
from fleetctl.interfaces.bmc import BMCTarget, BootDevice, PowerState

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mockup_server import MockupServer, mockups_dir

MOCKUPS = mockups_dir()
pytestmark = pytest.mark.skipif(
    MOCKUPS is None, reason="shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)"
)


def run(coro):
    return asyncio.run(coro)


def target(url: str, **kw) -> BMCTarget:
    return BMCTarget(name="rec", url=url, username="admin", password="secret", timeout=10, **kw)


@pytest.fixture(scope="module")
def servers():
    started: dict[str, MockupServer] = {}

    def get(name: str, **kw) -> MockupServer:
        key = name + repr(sorted(kw.items()))
        if key not in started:
            started[key] = MockupServer(MOCKUPS / name, **kw)  # type: ignore[operator]
            started[key].start()
        return started[key]

    yield get
    for s in started.values():
        s.stop()


async def read_all(url: str, **kw):
    async with RedfishDriver(target(url, **kw)) as bmc:
        facts = await bmc.inventory.facts()
        health = await bmc.health.report()
        firmware = await bmc.firmware.inventory()
        manager = await bmc.manager.facts()
        power = await bmc.power.state()
        return bmc, facts, health, firmware, manager, power


# ------------------------------------------------------------- HPE XL675d A40

XL675D_GPUS = {  # slot -> (serial, firmware, pci address), from Chassis/1/Devices and Systems/1/PCIDevices
    "1": ("1334520060094", "94.02.4B.00.01", "0000:07:00.0"),
    "2": ("1334520060099", "94.02.4B.00.01", "0000:08:00.0"),
    "3": ("1334520060273", "94.02.4B.00.01", "0000:0b:00.0"),
    "5": ("1325120036836", "94.02.5C.00.03", "0000:48:00.0"),
    "7": ("1325120036457", "94.02.5C.00.03", "0000:4c:00.0"),
    "9": ("1334520060138", "94.02.4B.00.01", "0000:88:00.0"),
    "11": ("1334520060358", "94.02.4B.00.01", "0000:8c:00.0"),
    "13": ("1334520060098", "94.02.4B.00.01", "0000:c8:00.0"),
}


def test_hpe_xl675d_facts_gpus_and_serials(servers):
    srv = servers("hpe-xl675d-a40-ilo5")
    bmc, facts, health, firmware, manager, power = run(read_all(srv.url))
    assert bmc.vendor == "hpe"
    assert (facts.serial, facts.model, facts.manufacturer) == ("JS05NP1072", "ProLiant XL675d Gen10 Plus", "HPE")
    assert facts.cpu_count == 2 and facts.cpu_model == "AMD EPYC 7742 64-Core Processor"
    assert facts.memory_gib == 256
    assert facts.bios_version == "A47 v2.52 (10/29/2021)"
    assert {n.mac for n in facts.nics} >= {"94:40:c9:6a:42:da", "b4:7a:f1:12:fb:70"}
    gpus = {b.slot: (b.serial, b.firmware.get("board"), b.pci_address) for b in facts.boards if b.kind == "gpu"}
    assert gpus == XL675D_GPUS
    assert all(b.model == "NVIDIA A40" for b in facts.boards)
    a40 = [d for d in facts.pcie_devices if d.name == "NVIDIA A40"]
    assert len(a40) == 8 and {(d.vendor_id, d.device_id, d.class_code) for d in a40} == {("0x10de", "0x2235", "0x0302")}
    # the NICs and the embedded video are PCIe devices but not boards
    assert len(facts.pcie_devices) == 13
    assert power == PowerState.ON
    # health: old Thermal/Power schema, PSU bay 1 absent
    assert health.source == "Thermal+Power"
    assert (len(health.psus), len(health.fans), len(health.temperatures)) == (6, 15, 87)
    assert health.psus[0].state == "Absent"
    assert health.system_health == "OK" and health.problems == []
    inlet = next(t for t in health.temperatures if t.name == "01-Inlet Ambient")
    assert (inlet.reading, inlet.upper_critical) == (16, 42)
    # firmware inventory: 23 components, the A40s among them
    assert len(firmware) == 23
    by_name = {}
    for c in firmware:
        by_name.setdefault(c.name, []).append(c.version)
    assert by_name["iLO 5"] == ["2.55 Oct 01 2021"]
    assert sorted(by_name["NVIDIA A40"]) == sorted(v[1] for v in XL675D_GPUS.values())
    assert (manager.model, manager.firmware_version) == ("iLO 5", "iLO 5 v2.55")
    assert manager.datetime == dt.datetime(2022, 4, 14, 17, 6, 22, tzinfo=dt.UTC)
    assert manager.clock_skew_seconds is not None and manager.clock_skew_seconds < -1e7  # a 2022 capture


def test_hpe_standard_pcie_members_answer_error_bodies(servers):
    """XL675d: Chassis/1/PCIeDevices/256 is an iLO error body, not a device."""

    async def body(srv):
        async with RedfishDriver(target(srv.url)) as bmc:
            with pytest.raises(RedfishError) as ei:
                await bmc.client.get("/redfish/v1/Chassis/1/PCIeDevices/256")
            assert "Base.1.4.ResourceMissingAtURI (Invalid URI)" in str(ei.value)
            errors: list[str] = []
            got = await bmc.client.expand(
                [{"@odata.id": "/redfish/v1/Chassis/1/PCIeDevices/256"}, {"@odata.id": "/redfish/v1/Systems/1"}],
                errors=errors,
            )
            assert [g["Id"] for g in got] == ["1"] and len(errors) == 1 and "ResourceMissingAtURI" in errors[0]

    run(body(servers("hpe-xl675d-a40-ilo5")))
    # the same body answered with 200 (how some iLOs do it) is skipped as well

    async def body200(srv):
        async with RedfishDriver(target(srv.url)) as bmc:
            errors: list[str] = []
            got = await bmc.client.expand([{"@odata.id": "/redfish/v1/Chassis/1/PCIeDevices/256"}], errors=errors)
            assert got == [] and "answered an error body" in errors[0]

    run(body200(servers("hpe-xl675d-a40-ilo5", error_body_status=200)))


def test_hpe_media_slot_and_boot_and_logs(servers):
    async def body(srv):
        async with RedfishDriver(target(srv.url)) as bmc:
            slots = await bmc.media.slots()
            assert [(s.slot, s.media_types, s.inserted) for s in slots] == [
                ("1", ["Floppy", "USBStick"], False),
                ("2", ["CD", "DVD"], False),
            ]
            uri, _ = await bmc.media._pick("CD", None)
            assert uri == "/redfish/v1/Managers/1/VirtualMedia/2"
            boot = await bmc.boot.get()
            assert boot.device == BootDevice.NONE and boot.persistent is False
            attrs = await bmc.bios.attributes()
            assert len(attrs) == 297
            entries, cursor = await bmc.health.log_entries()
            iml = [e for e in entries if e.log.endswith("/IML")]
            assert len(iml) == 210
            first = next(e for e in iml if e.id == "1")
            assert first.message == "System Power Supply: General Failure (Power Supply 5)"
            assert first.severity == "Warning"
            assert cursor is not None
            again, cursor2 = await bmc.health.log_entries(since=cursor)
            assert again == [] and cursor2 == cursor
            older = sorted(e.created for e in entries if e.created)[-3]
            newer, _ = await bmc.health.log_entries(since=older.isoformat())
            assert 1 <= len(newer) <= 2 and all(e.created > older for e in newer)

    run(body(servers("hpe-xl675d-a40-ilo5")))


def test_hpe_dl325_facts(servers):
    srv = servers("hpe-dl325-ilo5")
    bmc, facts, health, firmware, manager, _power = run(read_all(srv.url))
    assert bmc.vendor == "hpe"
    assert (facts.serial, facts.model) == ("MXQ019020B", "ProLiant DL325 Gen10 Plus")
    assert facts.boards == []
    marvell = [d for d in facts.pcie_devices if d.serial == "REE1939F35261"]
    assert marvell and marvell[0].vendor_id == "0x1077" and marvell[0].firmware == "08.50.78"
    assert manager.firmware_version == "iLO 5 v2.46"
    assert len(firmware) == 12 and firmware[0].name == "iLO 5"
    assert [p.name for p in health.psus] == ["PSU 1", "PSU 2"]  # iLO names both "HpeServerPowerSupply": bays
    assert {p.health for p in health.psus} == {"OK"}
    assert len(health.fans) == 8


def test_hpe_dl325_standard_pcie_ids_are_decimal(servers):
    """The standard PCIeFunction of iLO 5 writes VendorId "4215" (0x1077): the quirk reads it right."""

    async def body(srv):
        async with RedfishDriver(target(srv.url)) as bmc:
            q = await bmc.quirks()
            assert q.pci_ids_decimal
            devs = await bmc.inventory._standard_devices(
                await bmc.client.get(bmc.system_uri), [], decimal=q.pci_ids_decimal
            )
            by_serial = {d.serial: d for d in devs}
            assert by_serial["REE1950F79864"].vendor_id == "0x1077"
            assert by_serial["REE1950F79864"].device_id == "0x8070"

    run(body(servers("hpe-dl325-ilo5")))


# ------------------------------------------------------------------- OpenBMC


def test_openbmc_facts_and_missing_sections(servers):
    srv = servers("openbmc-stock")
    bmc, facts, health, firmware, manager, power = run(read_all(srv.url))
    assert bmc.vendor == "openbmc"  # told by the manager's model, the root says nothing
    assert power == PowerState.OFF
    assert facts.serial is None and facts.cpu_count == 0 and facts.pcie_devices == [] and facts.boards == []
    assert (manager.model, manager.firmware_version) == ("OpenBmc", "2.15.0-dev-686-g100c36de90")
    assert [(c.name, c.version, c.updateable) for c in firmware] == [
        ("Software Inventory", "2.15.0-dev-686-g100c36de90", True)
    ]
    assert health.system_health == "OK" and health.chassis_health == "OK"
    assert health.psus == [] and health.fans == [] and health.temperatures == []

    async def unsupported():
        async with RedfishDriver(target(srv.url)) as b:
            with pytest.raises(DriverError, match="virtual media is not supported by this BMC"):
                await b.media.slots()
            with pytest.raises(DriverError, match="no Attributes"):
                await b.bios.attributes()
            entries, _ = await b.health.log_entries()
            assert entries and all(e.log.startswith("/redfish/v1/") for e in entries)

    run(unsupported())


# ---------------------------------------------------------------- Gigabyte/AMI


def test_gigabyte_ami_facts(servers):
    srv = servers("gigabyte-ami")
    bmc, facts, health, firmware, manager, _power = run(read_all(srv.url))
    assert bmc.vendor == "ami"
    assert (facts.serial, facts.model, facts.manufacturer) == ("GJG9NF512A000302", "H262-Z63-00", "GIGABYTE")
    assert facts.cpu_count == 2 and facts.memory_gib == 244
    assert {n.name: n.mac for n in facts.nics} == {
        "Lan1": "b4:2e:99:ba:de:15",
        "Lan2": "b4:2e:99:ba:de:16",
        "Lan3": "b4:2e:99:ba:de:16",
    }
    (cx5,) = facts.pcie_devices
    assert (cx5.name, cx5.vendor_id, cx5.class_code, cx5.slot) == (
        "MT27800 Family [ConnectX-5]",
        "0x15b3",
        "0x0200",
        "17",
    )
    assert (cx5.link_gen, cx5.link_width, cx5.max_link_width) == (3, 16, 16)
    assert facts.boards == []
    assert {c.name: c.version for c in firmware} == {"BMC": "12.84.13", "MB_CPLD1": "ff", "BIOS": "C27"}
    assert manager.firmware_version == "12.84.13"
    assert len(health.psus) == 2 and len(health.temperatures) == 20
    cpu0 = next(t for t in health.temperatures if t.name == "CPU0_TEMP")
    assert (cpu0.reading, cpu0.upper_critical) == (40, 100)

    async def media():
        async with RedfishDriver(target(srv.url)) as b:
            slots = await b.media.slots()
            assert [(s.slot, s.inserted, s.image) for s in slots] == [("CD1", False, None)]  # Image "None" is empty
            uri, _ = await b.media._pick("CD", None)
            assert uri.endswith("/Managers/Self/VirtualMedia/CD1")

    run(media())


# ------------------------------------------------------------ DMTF references


def test_dmtf_rackmount_new_schema_health(servers):
    srv = servers("dmtf-public-rackmount1")
    _bmc, facts, health, firmware, manager, _power = run(read_all(srv.url))
    assert facts.vendor == "generic"
    assert (facts.serial, facts.model, facts.memory_gib) == ("437XR1138R2", "3500", 96)
    assert health.source.startswith("Subsystems")  # ThermalSubsystem/PowerSubsystem/Sensors beside Thermal/Power
    assert len(health.fans) == 4 and len(health.psus) == 2
    assert "psu Power Supply Bay 1: Warning" in health.problems
    assert health.system_health_rollup == "Warning"
    assert {c.id for c in firmware} == {"BMC", "SS", "BIOS"}
    assert manager.firmware_version == "1.45.455b66-rev4"
    assert manager.datetime.utcoffset() == dt.timedelta(hours=6)

    async def more():
        async with RedfishDriver(target(srv.url)) as b:
            boot = await b.boot.get()
            assert boot.device == BootDevice.PXE and boot.uefi_target == "/0x31/0x33/0x01/0x01"
            slots = {s.slot: s for s in await b.media.slots()}
            assert slots["CD1"].inserted and slots["CD1"].image == "redfish.dmtf.org/freeImages/freeOS.1.1.iso"
            # the recorded service is read-only: a write answers 405 and the operator sees why
            with pytest.raises(RedfishError, match=r"HTTP 405.*read-only"):
                await b.power.off(force=True)

    run(more())


def test_dmtf_pdu_is_refused_clearly(servers):
    srv = servers("dmtf-public-pdu")

    async def body():
        with pytest.raises(DriverError, match="no Systems"):
            async with RedfishDriver(target(srv.url)):
                pass

    run(body())
    assert srv.logouts == srv.logins  # logged out even though open() failed


# ------------------------------------------------------------ session hygiene


def test_one_session_logout_and_in_flight_limit(servers):
    srv = MockupServer(MOCKUPS / "hpe-xl675d-a40-ilo5", delay=0.003)  # type: ignore[operator]
    with srv:
        run(read_all(srv.url))
        assert (srv.logins, srv.logouts, srv.tokens) == (1, 1, {})
        assert srv.max_in_flight == 2
    srv = MockupServer(MOCKUPS / "gigabyte-ami", sessions=False)  # type: ignore[operator]
    with srv:

        async def body():
            async with RedfishDriver(target(srv.url, max_in_flight=1)) as b:
                assert b.client.auth_mode == "basic"
                await b.inventory.facts()

        run(body())
        assert srv.logins == 0 and srv.max_in_flight == 1


def test_sweep_over_every_mockup(servers):
    names = [
        "hpe-xl675d-a40-ilo5",
        "hpe-dl325-ilo5",
        "openbmc-stock",
        "gigabyte-ami",
        "dmtf-public-rackmount1",
        "dmtf-public-pdu",
    ]
    targets = [BMCTarget(name=n, url=servers(n).url, username="admin", password="secret") for n in names]

    async def op(bmc):
        return (await bmc.power.state(), (await bmc.inventory.facts()).serial)

    results = run(run_many(targets, op, concurrency=3))
    got = {r.target: (r.ok, r.value if r.ok else r.error_type) for r in results}
    assert got == {
        "hpe-xl675d-a40-ilo5": (True, (PowerState.ON, "JS05NP1072")),
        "hpe-dl325-ilo5": (True, (PowerState.ON, "MXQ019020B")),
        "openbmc-stock": (True, (PowerState.OFF, None)),
        "gigabyte-ami": (True, (PowerState.ON, "GJG9NF512A000302")),
        "dmtf-public-rackmount1": (True, (PowerState.ON, "437XR1138R2")),
        "dmtf-public-pdu": (False, "DriverError"),
    }


# ---------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bmc.test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    fp = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    return str(d / "cert.pem"), str(d / "key.pem"), fp


@pytest.fixture(scope="module")
def tls_server(tls_files):
    cert, key, fp = tls_files
    with MockupServer(MOCKUPS / "gigabyte-ami", certfile=cert, keyfile=key) as srv:  # type: ignore[operator]
        yield srv, fp


def test_tls_verified_by_default_self_signed_refused(tls_server):
    srv, fp = tls_server
    assert srv.url.startswith("https://")

    async def body():
        with pytest.raises(DriverError, match="not trusted") as ei:
            async with RedfishDriver(target(srv.url)):
                pass
        assert format_fingerprint(fp) in str(ei.value)  # tells the operator what to pin

    run(body())


def test_tls_trust_on_first_use_returns_the_fingerprint(tls_server):
    srv, fp = tls_server

    async def body():
        async with RedfishDriver(target(srv.url, trust_on_first_use=True)) as bmc:
            assert bmc.fingerprint == fp and bmc.fingerprint_first_seen
            assert (await bmc.inventory.facts()).serial == "GJG9NF512A000302"

    run(body())
    (r,) = run(run_many([target(srv.url, trust_on_first_use=True)], lambda b: b.power.state()))
    assert r.ok and r.fingerprint == fp


def test_tls_pinned_fingerprint_accepted(tls_server):
    srv, fp = tls_server

    async def body():
        async with RedfishDriver(target(srv.url, fingerprint=format_fingerprint(fp))) as bmc:
            assert not bmc.fingerprint_first_seen
            assert await bmc.power.state() == PowerState.ON

    run(body())


def test_tls_wrong_pin_is_a_hard_error_naming_both(tls_server):
    srv, fp = tls_server
    wrong = hashlib.sha256(b"another certificate").hexdigest()

    async def body():
        with pytest.raises(TLSMismatch) as ei:
            # even with trust on first use: a pin that does not match is never replaced
            async with RedfishDriver(target(srv.url, fingerprint=wrong, trust_on_first_use=True)):
                pass
        msg = str(ei.value)
        assert format_fingerprint(wrong) in msg and format_fingerprint(fp) in msg

    run(body())
