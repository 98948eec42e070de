"""One BMC contract, every BMC peer (after NAPALM's shared getter tests).

The same tests run against each peer through the driver class the registry
hands out (``load_driver("bmc", "redfish")``) and its per-BMC capabilities
(``bmc.power``, ``bmc.inventory`` ...):

- the lab's simulated BMCs, one per vendor flavour (``fleetctl_lab.bmc``,
  in-process, TLS with pinned certificates: iLO 5 and iLO 6/7, iDRAC 9, AMI,
  OpenBMC, an NVIDIA GPU tray with two systems, DMTF), and one served by the lab daemon
  (a process of its own, reached through its lab.json);
- sushy-tools (OpenStack's Redfish emulator, fake driver);
- every recorded real BMC in ``shared/redfish-mockups`` (served read-only).

What each peer can do is one table, :data:`PEERS`: a capability is either
supported (the contract checks the typed result is sane) or refused (the
driver must raise its own :class:`DriverError` with a message that names the
BMC and matches the pattern: never a crash, never a silent empty answer).
Writes (a power on/off round trip, a boot override set and read back) run
where the peer takes them; on the read-only recordings the same calls must be
refused clearly. A recording added to the shared folder fails
``test_every_recorded_bmc_has_a_row`` until it gets its row here.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from mockup_server import mockups_dir
from peers import LAB_FLAVOURS, SUSHY_SYSTEMS

from fleetctl.errors import DriverError
from fleetctl.interfaces.bmc import (
    BMCTarget,
    BootDevice,
    BootOverride,
    FirmwareComponent,
    HealthReport,
    ManagerFacts,
    MediaStatus,
    PowerState,
    SystemFacts,
)
from fleetctl.plugins import load_driver

# --------------------------------------------------------------------------
# The table: what each peer supports
# --------------------------------------------------------------------------

READS = ("facts", "power", "health", "firmware", "boot", "manager", "bios", "media")
WRITES = ("power_write", "boot_write")
CAPABILITIES = READS + WRITES


@dataclass(frozen=True)
class Refused:
    """The peer lacks the capability: the driver must say so with a DriverError matching ``match``."""

    match: str
    why: str


YES = True
READ_ONLY = Refused(r"HTTP 405.*read-only", "a recording is served read-only: writes answer 405")


@dataclass(frozen=True)
class Peer:
    """One BMC peer and what it supports.

    Attributes:
        kind: ``lab`` (flavour = the lab's vendor flavour), ``lab-daemon``, ``sushy`` or ``mockup``
            (folder = the recording's folder in shared/redfish-mockups).
        caps: every capability of :data:`CAPABILITIES`: ``YES`` or ``Refused``.
        opens: False-y when the peer is refused at open (then ``caps`` is empty);
            a ``Refused`` says how.
        serial, model: what facts must say; None where the peer reports none.
        live_clock: the BMC's clock is this machine's (skew within seconds).
        boot_once_reads_persistent: the peer ignores BootSourceOverrideEnabled.
        power_wait, poll: seconds to wait for a power change, and between reads.
    """

    kind: str
    flavour: str = ""
    folder: str = ""
    caps: dict[str, Any] = field(default_factory=dict)
    opens: Any = True
    serial: str | None = None
    model: str | None = None
    live_clock: bool = False
    boot_once_reads_persistent: bool = False
    power_wait: float = 5.0
    poll: float = 0.05


def _all(**overrides: Any) -> dict[str, Any]:
    caps = {c: YES for c in CAPABILITIES}
    caps.update(overrides)
    return caps


def _recorded(**overrides: Any) -> dict[str, Any]:
    return _all(power_write=READ_ONLY, boot_write=READ_ONLY, **overrides)


PEERS: dict[str, Peer] = {
    # The lab: every capability, one BMC per vendor flavour (serial/model from the spec).
    **{f"lab-{f}": Peer("lab", flavour=f, caps=_all(), live_clock=True) for f in LAB_FLAVOURS},
    "lab-daemon-dell": Peer("lab-daemon", flavour="dell", caps=_all(), live_clock=True),
    # sushy-tools 2.x, fake driver: see PEERS.md for what it does not do.
    "sushy": Peer(
        "sushy",
        caps=_all(
            firmware=Refused(r"firmware inventory is not supported by this BMC", "sushy answers 404 for FirmwareInventory"),
            bios=Refused(r"BIOS settings are not supported by this BMC", "the fake driver has no Bios resource"),
        ),
        serial=None,  # the fake driver reports no SerialNumber
        model=None,
        live_clock=True,
        boot_once_reads_persistent=True,  # NOTE(sushy-tools 2.2, fake driver): always Continuous
        power_wait=25.0,  # sushy applies a power change 1-11 s later (random)
        poll=0.3,
    ),
    # Recorded real BMCs: every read, no write.
    "mockup-hpe-xl675d-a40-ilo5": Peer(
        "mockup", folder="hpe-xl675d-a40-ilo5", caps=_recorded(), serial="JS05NP1072", model="ProLiant XL675d Gen10 Plus"
    ),
    "mockup-hpe-dl325-ilo5": Peer(
        "mockup", folder="hpe-dl325-ilo5", caps=_recorded(), serial="MXQ019020B", model="ProLiant DL325 Gen10 Plus"
    ),
    "mockup-openbmc-stock": Peer(
        "mockup",
        folder="openbmc-stock",
        caps=_recorded(
            bios=Refused(r"Bios resource has no Attributes", "bmcweb's Bios resource carries no Attributes"),
            media=Refused(r"virtual media is not supported by this BMC", "this bmcweb build has no VirtualMedia"),
        ),
        serial=None,  # the captured system reports no SerialNumber, no Model
        model=None,
    ),
    "mockup-gigabyte-ami": Peer("mockup", folder="gigabyte-ami", caps=_recorded(), serial="GJG9NF512A000302", model="H262-Z63-00"),
    "mockup-dmtf-public-rackmount1": Peer("mockup", folder="dmtf-public-rackmount1", caps=_recorded(), serial="437XR1138R2", model="3500"),
    "mockup-dmtf-public-pdu": Peer(
        "mockup",
        folder="dmtf-public-pdu",
        opens=Refused(r"no Systems", "a PDU: the service has no ComputerSystem at all"),
    ),
}

SUSHY_ROLE = {"facts": "contract-ro", "power_write": "contract-power", "boot_write": "contract-boot"}


def _cases() -> list[Any]:
    out = []
    for name, peer in PEERS.items():
        for cap, support in peer.caps.items():
            marks = [pytest.mark.slow] if peer.kind == "sushy" and cap == "power_write" else []
            out.append(pytest.param(name, cap, support, id=f"{name}-{cap}", marks=marks))
    return out


# --------------------------------------------------------------------------
# Reaching a peer
# --------------------------------------------------------------------------

Driver = load_driver("bmc", "redfish")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def target_of(request: pytest.FixtureRequest, name: str, cap: str = "facts") -> tuple[BMCTarget, dict[str, Any]]:
    """The BMCTarget of peer ``name`` (its fixture started on first need) and what its spec says."""
    peer = PEERS[name]
    if peer.kind == "lab":
        lab, specs = request.getfixturevalue("lab_bmcs")
        spec = specs[peer.flavour]
        t = BMCTarget(
            name=name,
            url=lab.url_of(spec.name),
            username=spec.username,
            password=spec.password,
            fingerprint=lab.fingerprint_of(spec.name),
            timeout=5,
        )
        return t, {"serial": spec.serial, "model": spec.model, "manufacturer": spec.manufacturer}
    if peer.kind == "lab-daemon":
        status, spec = request.getfixturevalue("lab_daemon_bmc")
        info = status["servers"][spec.name]
        t = BMCTarget(
            name=name, url=info["url"], username=spec.username, password=spec.password, fingerprint=info["fingerprint"], timeout=5
        )
        return t, {"serial": spec.serial, "model": spec.model, "manufacturer": spec.manufacturer}
    if peer.kind == "sushy":
        url = request.getfixturevalue("sushy_peer")
        system = SUSHY_SYSTEMS[SUSHY_ROLE.get(cap, "contract-ro")][0]
        t = BMCTarget(name=name, url=url, username="admin", password="secret", system_id=system, timeout=10)
        return t, {"serial": peer.serial, "model": peer.model}
    srv = request.getfixturevalue("mockup_farm")(peer.folder)
    t = BMCTarget(name=name, url=srv.url, username="admin", password="secret", timeout=10)
    return t, {"serial": peer.serial, "model": peer.model}


def driver(t: BMCTarget) -> Any:
    return Driver(t, backoff=0.01, task_poll_interval=0.05)


def assert_refused(exc: BaseException, name: str, refused: Refused) -> None:
    assert isinstance(exc, DriverError), f"{type(exc).__name__} is not the driver's DriverError: {exc}"
    msg = str(exc)
    assert msg.startswith(f"{name}:"), f"the message does not name the BMC: {msg}"
    assert re.search(refused.match, msg), f"{msg!r} does not say {refused.match!r} ({refused.why})"


# --------------------------------------------------------------------------
# What a sane answer is, per capability
# --------------------------------------------------------------------------

HEALTH_WORDS = (None, "OK", "Warning", "Critical")
MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
PCI_ID = re.compile(r"^0x[0-9a-f]{4}$")


def _text(value: Any, what: str) -> None:
    """None, or a non-empty string without surrounding blanks (vendors' "N/A" is None)."""
    assert value is None or (isinstance(value, str) and value and value == value.strip()), f"{what}: {value!r}"
    assert value not in ("N/A", "None", "Unknown", "Not Specified"), f"{what}: a vendor's 'nothing' kept: {value!r}"


async def check_facts(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    facts = await bmc.inventory.facts()
    assert isinstance(facts, SystemFacts)
    for f in ("serial", "model", "manufacturer", "uuid", "bios_version", "cpu_model"):
        _text(getattr(facts, f), f)
    assert facts.serial == expect["serial"] and facts.model == expect["model"]
    if "manufacturer" in expect:
        assert facts.manufacturer == expect["manufacturer"]
    assert isinstance(facts.power_state, PowerState) and facts.power_state != PowerState.UNKNOWN
    assert facts.power_state == await bmc.power.state()  # the facts' power state is the power read's
    assert facts.vendor, "no vendor profile detected"
    assert facts.cpu_count is None or facts.cpu_count >= 0
    assert facts.memory_gib is None or facts.memory_gib >= 0
    assert all(n.name and (n.mac is None or MAC.match(n.mac)) for n in facts.nics), facts.nics
    for d in facts.pcie_devices:
        assert d.id and all(v is None or PCI_ID.match(v) for v in (d.vendor_id, d.device_id)), d
    for b in facts.boards:
        assert b.kind in ("mncore2", "mncore", "gpu") and b.serial, b
    assert all(isinstance(w, str) for w in facts.warnings)


async def check_power(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    state = await bmc.power.state()
    assert isinstance(state, PowerState)
    assert state in (PowerState.ON, PowerState.OFF), f"a settled peer reads {state}"


async def check_health(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    report = await bmc.health.report()
    assert isinstance(report, HealthReport)
    for value in (report.system_health, report.system_health_rollup, report.chassis_health):
        assert value in HEALTH_WORDS, value
    assert report.chassis_health is not None, "no chassis read"
    for item in (*report.psus, *report.fans, *report.temperatures):
        assert item.name and item.health in HEALTH_WORDS, item
    for t in report.temperatures:
        assert t.reading is None or -40 <= t.reading <= 150, t
    assert report.source, "no health section read (neither Thermal/Power nor the Subsystems)"
    assert all(isinstance(p, str) for p in report.problems)


async def check_firmware(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    components = await bmc.firmware.inventory()
    assert components and all(isinstance(c, FirmwareComponent) for c in components)
    ids = [c.id for c in components]
    assert len(ids) == len(set(ids)), f"firmware ids repeat: {ids}"
    for c in components:
        assert c.name, c
        _text(c.version, f"firmware {c.id} version")
    assert any(c.version for c in components)


async def check_boot(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    boot = await bmc.boot.get()
    assert isinstance(boot, BootOverride)
    assert isinstance(boot.device, BootDevice) and boot.device != BootDevice.UNKNOWN, boot
    assert boot.persistent is None or isinstance(boot.persistent, bool)


async def check_manager(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    m = await bmc.manager.facts()
    assert isinstance(m, ManagerFacts)
    _text(m.firmware_version, "manager firmware")
    assert m.firmware_version, "no BMC firmware version"
    if m.datetime is not None:
        assert m.datetime.tzinfo is not None and m.clock_skew_seconds is not None
    if peer.live_clock:
        assert m.clock_skew_seconds is not None and abs(m.clock_skew_seconds) < 5


async def check_bios(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    attrs = await bmc.bios.attributes()
    assert isinstance(attrs, dict) and attrs and all(isinstance(k, str) and k for k in attrs)


async def check_media(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    slots = await bmc.media.slots()
    assert slots and all(isinstance(s, MediaStatus) for s in slots)
    names = [s.slot for s in slots]
    assert all(names) and len(names) == len(set(names)), names
    for s in slots:
        assert isinstance(s.inserted, bool)
        assert s.inserted or s.image is None, s


async def check_power_write(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    """On then off (or off then on), each read back; a second request is a no-op; state restored."""
    p = bmc.power
    start = await p.state()
    first, second = (p.on, lambda: p.off(force=True)) if start == PowerState.OFF else (lambda: p.off(force=True), p.on)
    other = PowerState.ON if start == PowerState.OFF else PowerState.OFF
    assert await first() is True
    assert await p.wait_for(other, timeout=peer.power_wait, interval=peer.poll) == other
    assert await first() is False  # already there: nothing sent (never a cycle)
    assert await second() is True
    assert await p.wait_for(start, timeout=peer.power_wait, interval=peer.poll) == start
    assert await p.state() == start


async def check_boot_write(bmc: Any, peer: Peer, expect: dict[str, Any]) -> None:
    """Next boot from PXE, every boot from disk, then put back as it was; each read back."""
    before = await bmc.boot.get()
    await bmc.boot.set(BootDevice.PXE)
    got = await bmc.boot.get()
    assert got.device == BootDevice.PXE
    assert got.persistent is peer.boot_once_reads_persistent
    await bmc.boot.set(BootDevice.HDD, persistent=True)
    got = await bmc.boot.get()
    assert (got.device, got.persistent) == (BootDevice.HDD, True)
    await bmc.boot.set(before.device, persistent=bool(before.persistent))
    got = await bmc.boot.get()
    assert (got.device, got.persistent) == (before.device, before.persistent)


CHECKS = {name: globals()[f"check_{name}"] for name in CAPABILITIES}


# --------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------


def test_every_capability_has_a_check_and_every_peer_a_full_row() -> None:
    assert set(CHECKS) == set(CAPABILITIES)
    for name, peer in PEERS.items():
        if peer.opens is True:
            assert set(peer.caps) == set(CAPABILITIES), f"{name}: say for every capability"
            assert all(v is YES or isinstance(v, Refused) for v in peer.caps.values()), name
        else:
            assert isinstance(peer.opens, Refused) and not peer.caps, name


def test_every_recorded_bmc_has_a_row() -> None:
    base = mockups_dir()
    if base is None:
        pytest.skip("shared/redfish-mockups not found beside the repository (set FLEETCTL_SHARED)")
    recorded = {p.name for p in base.iterdir() if (p / "index.json").is_file()}
    in_table = {p.folder for p in PEERS.values() if p.kind == "mockup"}
    assert recorded == in_table, "add a row to PEERS for each recording (and drop rows of removed ones)"


def test_every_lab_flavour_has_a_row() -> None:
    """A flavour added to the lab (fleetctl_lab.bmc.flavours) runs the contract too (iLO 6/7, iDRAC 9, the NVIDIA tray...)."""
    try:
        from fleetctl_lab.bmc.flavours import FLAVOURS
    except ImportError as e:
        pytest.skip(f"fleetctl_lab.bmc not available: {e}")
    assert set(LAB_FLAVOURS) == set(FLAVOURS), "add the flavour to LAB_FLAVOURS (tests/contract/peers.py)"
    assert {p.flavour for p in PEERS.values() if p.kind == "lab"} == set(FLAVOURS)


@pytest.mark.parametrize("name", list(PEERS))
def test_open(request: pytest.FixtureRequest, name: str) -> None:
    """Every peer opens (and its vendor profile is known after facts), or is refused clearly."""
    peer = PEERS[name]
    t, _ = target_of(request, name)

    async def body() -> None:
        if isinstance(peer.opens, Refused):
            with pytest.raises(DriverError) as ei:
                async with driver(t):
                    pass
            assert_refused(ei.value, name, peer.opens)
            return
        async with driver(t) as bmc:
            assert bmc.system_uri.startswith("/redfish/v1/Systems/")

    run(body())


@pytest.mark.parametrize(("name", "cap", "support"), _cases())
def test_capability(request: pytest.FixtureRequest, name: str, cap: str, support: Any) -> None:
    """A supported capability answers a sane typed result; a lacking one is a clear DriverError."""
    peer = PEERS[name]
    t, expect = target_of(request, name, cap)

    async def body() -> None:
        async with driver(t) as bmc:
            if support is YES:
                await CHECKS[cap](bmc, peer, expect)
                return
            before = await bmc.power.state()
            with pytest.raises(Exception) as ei:  # any exception: the assertion below names a wrong type
                await CHECKS[cap](bmc, peer, expect)
            assert_refused(ei.value, name, support)
            assert await bmc.power.state() == before  # a refused write changed nothing

    run(body())
