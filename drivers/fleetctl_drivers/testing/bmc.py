"""The BMC contract: what every BMC driver answers, checked per capability against a table of peers.

A peer is one BMC the suite reaches (a simulator, an emulator, a recorded real
BMC served read-only). What it can do is one row, :class:`Peer`: each
capability of :data:`CAPABILITIES` is either ``YES`` (the check below must
find a sane typed result) or :class:`Refused` (the driver must raise its own
:class:`~fleetctl.errors.DriverError` whose message names the BMC and matches
the pattern: never a crash, never a silent empty answer). Writes (a power
round trip, a boot override set and read back) run where the peer takes
them; on a read-only peer the same calls must be refused clearly, changing
nothing.

To run it for a driver, subclass :class:`BMCContract` in a test module (the
subclass's name starts with ``Test``), give it ``PEERS`` and say how a peer
is reached and how the driver opens it::

    from fleetctl_drivers.testing.bmc import BMCContract, Peer, all_caps

    class TestMyBMC(BMCContract):
        PEERS = {"my-sim": Peer("sim", caps=all_caps(), serial="S1", model="M1")}

        def target(self, request, name, cap):
            return BMCTarget(name=name, url=..., username=..., password=...), {"serial": "S1", "model": "M1"}

        def open(self, target):
            return MyDriver(target)  # an async context manager giving the BMC's capabilities
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import pytest

from fleetctl.errors import DriverError
from fleetctl.interfaces.bmc import (
    BootDevice,
    BootOverride,
    FirmwareComponent,
    HealthReport,
    ManagerFacts,
    MediaStatus,
    PowerState,
    SystemFacts,
)

__all__ = ["CAPABILITIES", "CHECKS", "READS", "READ_ONLY", "WRITES", "YES", "BMCContract", "Peer", "Refused", "all_caps",
           "assert_refused", "check_capability", "check_open", "check_table", "recorded_caps"]  # fmt: skip

T = TypeVar("T")

# --------------------------------------------------------------------------
# A peer's row
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
    """One BMC peer and what it supports (subclass it to add how your suite reaches a peer).

    Attributes:
        kind: how the suite reaches the peer (the subclass's ``target`` reads it).
        caps: every capability of :data:`CAPABILITIES`: ``YES`` or ``Refused``.
        opens: False-y when the peer is refused at open (then ``caps`` is empty);
            a ``Refused`` says how.
        serial, model: what facts must say; None where the peer reports none.
        live_clock: the BMC's clock is this machine's (skew within seconds).
        boot_once_reads_persistent: the peer ignores BootSourceOverrideEnabled.
        power_wait, poll: seconds to wait for a power change, and between reads.
    """

    kind: str
    caps: dict[str, Any] = field(default_factory=dict)
    opens: Any = True
    serial: str | None = None
    model: str | None = None
    live_clock: bool = False
    boot_once_reads_persistent: bool = False
    power_wait: float = 5.0
    poll: float = 0.05


def all_caps(**overrides: Any) -> dict[str, Any]:
    """Every capability supported, but for ``overrides`` (capability -> ``Refused``)."""
    caps: dict[str, Any] = {c: YES for c in CAPABILITIES}
    caps.update(overrides)
    return caps


def recorded_caps(**overrides: Any) -> dict[str, Any]:
    """A recording served read-only: every read, each write refused with HTTP 405."""
    return all_caps(power_write=READ_ONLY, boot_write=READ_ONLY, **overrides)


def assert_refused(exc: BaseException, name: str, refused: Refused) -> None:
    """``exc`` is the driver's DriverError, names the BMC first and says what ``refused`` expects."""
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
#: The board kinds a BMC may report (facts' boards); an out-of-tree suite may widen it on its subclass.
BOARD_KINDS = ("mncore2", "mncore", "gpu")


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
        assert b.kind in expect.get("board_kinds", BOARD_KINDS) and b.serial, b
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
    first: Callable[[], Awaitable[bool]]
    second: Callable[[], Awaitable[bool]]
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


Check = Callable[[Any, Peer, dict[str, Any]], Coroutine[Any, Any, None]]
#: One check per capability, by the capability's name.
CHECKS: dict[str, Check] = {name: globals()[f"check_{name}"] for name in CAPABILITIES}


def check_table(peers: Mapping[str, Peer]) -> None:
    """Every capability has a check, and every peer says for each capability (or is refused at open)."""
    assert set(CHECKS) == set(CAPABILITIES)
    for name, peer in peers.items():
        if peer.opens is True:
            assert set(peer.caps) == set(CAPABILITIES), f"{name}: say for every capability"
            assert all(v is YES or isinstance(v, Refused) for v in peer.caps.values()), name
        else:
            assert isinstance(peer.opens, Refused) and not peer.caps, name


async def check_open(opened: AbstractAsyncContextManager[Any], name: str, peer: Peer, is_open: Callable[[Any], None]) -> None:
    """The peer opens (``is_open`` checks the opened driver), or is refused at open as its row says."""
    if isinstance(peer.opens, Refused):
        with pytest.raises(DriverError) as ei:
            async with opened:
                pass
        assert_refused(ei.value, name, peer.opens)
        return
    async with opened as bmc:
        is_open(bmc)


async def check_capability(opened: AbstractAsyncContextManager[Any], name: str, peer: Peer, cap: str, support: Any,
                           expect: dict[str, Any]) -> None:  # fmt: skip
    """A supported capability answers a sane typed result; a lacking one is a clear DriverError that changed nothing."""
    async with opened as bmc:
        if support is YES:
            await CHECKS[cap](bmc, peer, expect)
            return
        before = await bmc.power.state()
        with pytest.raises(Exception) as ei:  # any exception: the assertion below names a wrong type
            await CHECKS[cap](bmc, peer, expect)
        assert_refused(ei.value, name, support)
        assert await bmc.power.state() == before  # a refused write changed nothing


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


# --------------------------------------------------------------------------
# The base test class
# --------------------------------------------------------------------------


class BMCContract:
    """The BMC contract's tests; a subclass named ``Test...`` gives the peers and how to reach them.

    ``PEERS``: name -> :class:`Peer`. ``target`` and ``open`` must be given;
    ``marks`` may put pytest marks on a (peer, capability) case (a slow write).
    """

    PEERS: ClassVar[Mapping[str, Peer]] = {}

    def target(self, request: pytest.FixtureRequest, name: str, cap: str) -> tuple[Any, dict[str, Any]]:
        """The driver's target for peer ``name`` (for capability ``cap``), and what its facts must say
        (``serial``, ``model``, optionally ``manufacturer`` and ``board_kinds``)."""
        raise NotImplementedError(f"{type(self).__name__} must say how peer {name!r} is reached")

    def open(self, target: Any) -> AbstractAsyncContextManager[Any]:
        """The driver for ``target``, not yet entered (``async with`` opens it and gives its capabilities)."""
        raise NotImplementedError(f"{type(self).__name__} must say how its driver opens a target")

    def assert_open(self, bmc: Any) -> None:
        """What an opened driver must show: by default a Redfish driver's system, found at open."""
        assert bmc.system_uri.startswith("/redfish/v1/Systems/")

    def marks(self, name: str, peer: Peer, cap: str) -> list[Any]:
        """pytest marks for one case (none by default)."""
        return []

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """One ``test_open`` per peer; one ``test_capability`` per peer and capability of its row."""
        if metafunc.function.__name__ == "test_open":
            metafunc.parametrize("name", list(self.PEERS))
        elif metafunc.function.__name__ == "test_capability":
            metafunc.parametrize(("name", "cap", "support"), [
                pytest.param(name, cap, support, id=f"{name}-{cap}", marks=self.marks(name, peer, cap))
                for name, peer in self.PEERS.items() for cap, support in peer.caps.items()
            ])  # fmt: skip

    def test_every_capability_has_a_check_and_every_peer_a_full_row(self) -> None:
        check_table(self.PEERS)

    def test_open(self, request: pytest.FixtureRequest, name: str) -> None:
        """Every peer opens, or is refused clearly."""
        t, _ = self.target(request, name, "facts")
        _run(check_open(self.open(t), name, self.PEERS[name], self.assert_open))

    def test_capability(self, request: pytest.FixtureRequest, name: str, cap: str, support: Any) -> None:
        """A supported capability answers a sane typed result; a lacking one is a clear DriverError."""
        t, expect = self.target(request, name, cap)
        _run(check_capability(self.open(t), name, self.PEERS[name], cap, support, expect))
