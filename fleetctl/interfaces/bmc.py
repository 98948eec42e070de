"""What fleetctl knows about a BMC, independent of the protocol or vendor.

A BMC is split into capabilities, one abstract class each (after OpenStack
Ironic's ``drivers/base.py``): power, boot, virtual media, BIOS, firmware,
inventory (facts), health and the manager itself. A driver composes the
implementations it supports; a capability a BMC lacks is a ``Noop*`` class
that raises :class:`~fleetctl.errors.DriverError` with a clear message, never
a ``NotImplementedError`` from deep inside a call.

Results are typed models (pydantic v2): drivers parse vendor JSON at the edge
and the rest of fleetctl never digs in raw dicts.

All capability methods are coroutines: a sweep over thousands of BMCs runs in
one event loop. A driver class (:class:`BMC`) provides the sweep itself
(:meth:`BMC.sweep`) and, for a batch that opens BMCs one at a time, the
connections they share (:meth:`BMC.fleet_session`).
"""

from __future__ import annotations

import abc
import contextlib
import datetime as dt
import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from fleetctl.errors import DriverError
from fleetctl.interfaces.sweep import BMCSweepResult, SweepProgress

# --------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------


@runtime_checkable
class Revealable(Protocol):
    """Anything holding a secret that can be revealed (``fleetctl.secrets.Secret``)."""

    def reveal(self) -> str: ...


def reveal(value: Revealable | str | None) -> str:
    """The clear text of a secret-like value (a ``Secret``, a plain str, or None)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return value.reveal()


@dataclass(frozen=True)
class BMCTarget:
    """One BMC to talk to, as the inventory describes it.

    Attributes:
        name: the server's name in the inventory (used in messages and results).
        url: ``https://10.1.2.3`` (or ``http://...`` when given explicitly).
        username: login name.
        password: a ``fleetctl.secrets.Secret`` (anything with ``.reveal()``) or str.
        system_id: the ComputerSystem id; None picks the only (or first) system.
        fingerprint: pinned SHA-256 of the BMC's certificate (hex, colons allowed);
            when set, the certificate must match it and CA verification is skipped.
        trust_on_first_use: with no pin and a certificate that fails CA
            verification, pin the certificate seen now (the driver exposes it
            for the caller to record in the inventory) instead of failing.
        max_in_flight: requests in flight to this BMC at once (BMCs fall over
            under load; Dell iDRAC runs out of sessions, RAC0218).
        timeout: seconds for one HTTP request, connect included.
        retries: extra attempts on 5xx and dropped connections.
        vendor_hint: a vendor profile to use when the BMC does not say.
        driver: the name of the BMC driver (entry point in ``fleetctl.bmc``)
            that talks to this BMC.
    """

    name: str
    url: str
    username: str = ""
    password: Any = field(default=None, repr=False)
    system_id: str | None = None
    fingerprint: str | None = None
    trust_on_first_use: bool = False
    max_in_flight: int = 2
    timeout: float = 30.0
    retries: int = 2
    vendor_hint: str | None = None
    driver: str = "redfish"

    def secret(self) -> str:
        return reveal(self.password)


# --------------------------------------------------------------------------
# Enums and state maps
# --------------------------------------------------------------------------


class PowerState(enum.StrEnum):
    ON = "on"
    OFF = "off"
    POWERING_ON = "powering_on"
    POWERING_OFF = "powering_off"
    UNKNOWN = "unknown"


class BootDevice(enum.StrEnum):
    PXE = "pxe"
    CD = "cd"
    HDD = "hdd"
    UEFI_TARGET = "uefi_target"
    BIOS_SETUP = "bios_setup"
    USB = "usb"
    NONE = "none"
    UNKNOWN = "unknown"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=False, extra="forbid")


# --------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------


class NIC(_Model):
    name: str
    mac: str | None = None


class PCIeDevice(_Model):
    id: str
    name: str | None = None
    manufacturer: str | None = None
    vendor_id: str | None = Field(None, description="0x-prefixed lower-case hex, e.g. 0x10de")
    device_id: str | None = None
    class_code: str | None = None
    serial: str | None = None
    slot: str | None = None
    pci_address: str | None = Field(None, description="segment:bus:device.function, e.g. 0000:07:00.0")
    link_gen: int | None = None
    link_width: int | None = None
    max_link_gen: int | None = None
    max_link_width: int | None = None
    firmware: str | None = None
    health: str | None = None

    @property
    def link_degraded(self) -> bool:
        """True when the link trained below what the device supports."""
        if self.link_gen and self.max_link_gen and self.link_gen < self.max_link_gen:
            return True
        return bool(self.link_width and self.max_link_width and self.link_width < self.max_link_width)


#: A board kind as the inventory names it (``mncore2``, ``gpu``, or one an accelerator driver registers): the BMC
#: driver's board rules give it, as data, so a new kind needs no edit here.
BoardKind = str


class Board(_Model):
    """An accelerator board recognised among the PCIe devices (or listed as a Processor).

    Its identity is its serial where the BMC reports one, with ``position``
    where several boards share it (NVIDIA GB200/GB300 report one serial per
    superchip module, shared by its two GPUs); a board without a serial is
    known by where it sits: ``slot``, ``location``, ``bmc_id`` or ``pci_address``.
    """

    kind: BoardKind
    serial: str | None = None
    slot: str | None = None
    pci_address: str | None = None
    model: str | None = None
    firmware: dict[str, str] = Field(default_factory=dict)
    pcie_device_id: str | None = None
    health: str | None = None
    bmc_id: str | None = Field(None, description="the BMC's own id of the board (a Processor's Id), e.g. GPU_SXM_1")
    location: str | None = Field(None, description="Location.PartLocation.ServiceLabel, the label printed at the slot")
    position: int | None = Field(
        None, description="1.. among the boards reporting the same serial (ordered by BMC id); None for a serial of its own"
    )


class SystemFacts(_Model):
    serial: str | None = None
    model: str | None = None
    manufacturer: str | None = None
    uuid: str | None = None
    bios_version: str | None = None
    power_state: PowerState | None = Field(None, description="as read with the facts (saves a request in a sweep)")
    cpu_count: int | None = None
    cpu_model: str | None = None
    cpu_cores: int | None = None
    memory_gib: float | None = None
    nics: list[NIC] = Field(default_factory=list)
    pcie_devices: list[PCIeDevice] = Field(default_factory=list)
    boards: list[Board] = Field(default_factory=list)
    vendor: str | None = Field(None, description="quirk profile the driver detected (hpe, openbmc, ami, ...)")
    warnings: list[str] = Field(
        default_factory=list, description="parts that could not be read (error bodies, missing sections)"
    )


class FirmwareComponent(_Model):
    id: str
    name: str
    version: str | None = None
    updateable: bool | None = None
    software_id: str | None = None
    health: str | None = None
    uri: str | None = Field(None, description="the FirmwareInventory member's @odata.id: what Redfish Targets names")


class UpdateServiceInfo(_Model):
    """How a BMC takes firmware: pull (SimpleUpdate), push (multipart upload), and when it applies it."""

    simple_update: bool = False
    transfer_protocols: list[str] = Field(default_factory=list, description="SimpleUpdate's TransferProtocol allowable values")
    simple_update_apply_times: list[str] = Field(
        default_factory=list, description="SimpleUpdate's @Redfish.OperationApplyTimeSupport SupportedValues (Immediate, OnReset)"
    )
    multipart_push_uri: str | None = None
    push_apply_times: list[str] = Field(default_factory=list, description="HttpPushUriOptions' ApplyTime allowable values")


# Status.State values under which a sensor's Reading is no reading: the part is
# not there (Absent), or not powered or not in use (a powered-off server's
# sensors: HPE iLO and Supermicro report Absent with Reading 0 and thresholds 0;
# OpenBMC and NVIDIA's BMCs StandbyOffline or UnavailableOffline). DMTF Resource
# schema, Status.State.
NO_READING_STATES: frozenset[str] = frozenset({"Absent", "StandbyOffline", "UnavailableOffline", "Disabled"})


class HealthItem(_Model):
    """A PSU or fan (or any part) with its status."""

    name: str
    health: str | None = None  # OK / Warning / Critical, None when the BMC did not say
    state: str | None = None  # Enabled / Absent / ...
    reading: float | None = None
    units: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "Absent" or self.health in (None, "OK")

    @property
    def absent(self) -> bool:
        """The part is not there: nothing of it is judged."""
        return self.state == "Absent"

    @property
    def reads(self) -> bool:
        """Whether ``reading`` is a reading (not the 0 of a sensor absent or offline)."""
        return self.reading is not None and self.state not in NO_READING_STATES


class Temperature(HealthItem):
    upper_critical: float | None = None
    upper_fatal: float | None = None

    @property
    def limit(self) -> float | None:
        """The upper threshold to judge against: critical, else fatal; None when there is none.

        A threshold at or below 0 C is no limit any part of a server has: it is
        what a BMC reports for a sensor without thresholds (HPE iLO 4 gives
        ``UpperThresholdFatal: 0`` beside a real critical one, and 0 for both on
        an absent sensor), so it is treated as absent.
        """
        for value in (self.upper_critical, self.upper_fatal):
            if value is not None and value > 0:
                return value
        return None


class HealthReport(_Model):
    system_health: str | None = None
    system_health_rollup: str | None = None
    chassis_health: str | None = None
    psus: list[HealthItem] = Field(default_factory=list)
    fans: list[HealthItem] = Field(default_factory=list)
    temperatures: list[Temperature] = Field(default_factory=list)
    source: str | None = Field(None, description="'Thermal/Power' (old schema) or 'Subsystems' (new)")
    warnings: list[str] = Field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """A line for each item not OK, for a report."""
        out = []
        for label, value in (("system", self.system_health), ("chassis", self.chassis_health)):
            if value not in (None, "OK"):
                out.append(f"{label} health {value}")
        for kind, items in (("psu", self.psus), ("fan", self.fans), ("temperature", self.temperatures)):
            out.extend(f"{kind} {i.name}: {i.health}" for i in items if not i.ok)
        return out


class LogEntry(_Model):
    id: str
    log: str = Field(description="the log service's URI")
    created: dt.datetime | None = None
    severity: str | None = None
    message: str | None = None
    message_id: str | None = None


class ManagerFacts(_Model):
    id: str | None = None
    model: str | None = None
    firmware_version: str | None = None
    datetime: dt.datetime | None = None
    clock_skew_seconds: float | None = Field(None, description="BMC clock minus our clock, seconds")
    health: str | None = None


class BootOverride(_Model):
    device: BootDevice
    persistent: bool | None = None
    mode: str | None = None  # UEFI / Legacy
    uefi_target: str | None = None


class MediaStatus(_Model):
    slot: str
    inserted: bool
    image: str | None = None
    media_types: list[str] = Field(default_factory=list)


class TaskProgress(_Model):
    percent: int | None = None
    state: str | None = None
    messages: list[str] = Field(default_factory=list)


class TaskResult(_Model):
    state: str
    percent: int | None = None
    messages: list[str] = Field(default_factory=list)
    task_uri: str | None = None


ProgressCallback = Callable[[TaskProgress], Any]


# --------------------------------------------------------------------------
# Capabilities
# --------------------------------------------------------------------------


class PowerInterface(abc.ABC):
    @abc.abstractmethod
    async def state(self) -> PowerState:
        """The system's power state (vendor values map to UNKNOWN, never crash)."""

    @abc.abstractmethod
    async def on(self) -> bool:
        """Power on. A server already on is left alone (never cycled).

        Returns:
            True when a power-on was requested, False when it was already on.
        """

    @abc.abstractmethod
    async def off(self, *, force: bool = False) -> bool:
        """Graceful shutdown, or a forced off. Returns False when already off."""

    @abc.abstractmethod
    async def restart(self, *, force: bool = True) -> None:
        """Force restart (or graceful restart with ``force=False``)."""

    @abc.abstractmethod
    async def cycle(self) -> None:
        """Power cycle (off, then on), emulated where the BMC has no PowerCycle."""

    @abc.abstractmethod
    async def wait_for(self, wanted: PowerState, *, timeout: float = 120.0, interval: float = 2.0) -> PowerState:
        """Poll until the state is ``wanted``; raises ``Timeout`` otherwise."""


class BootInterface(abc.ABC):
    @abc.abstractmethod
    async def get(self) -> BootOverride:
        """The current boot override."""

    @abc.abstractmethod
    async def set(
        self,
        device: BootDevice,
        *,
        persistent: bool = False,
        uefi_target: str | None = None,
        mode: str | None = None,
    ) -> None:
        """Override the next boot (``persistent=False``) or every boot."""


class MediaInterface(abc.ABC):
    @abc.abstractmethod
    async def slots(self) -> list[MediaStatus]:
        """Every virtual media slot, wherever the vendor puts them."""

    @abc.abstractmethod
    async def insert(self, image_url: str, *, media_type: str = "CD", slot: str | None = None) -> MediaStatus:
        """Insert an image (the BMC downloads it from ``image_url``)."""

    @abc.abstractmethod
    async def eject(self, *, media_type: str = "CD", slot: str | None = None) -> MediaStatus:
        """Eject whatever is in the slot."""


class BiosInterface(abc.ABC):
    @abc.abstractmethod
    async def attributes(self) -> dict[str, Any]:
        """The current BIOS attributes."""

    @abc.abstractmethod
    async def pending(self) -> dict[str, Any]:
        """Settings staged for the next reset."""

    @abc.abstractmethod
    async def stage(self, settings: Mapping[str, Any]) -> None:
        """Stage settings, applied by the BIOS at the next reset."""

    @abc.abstractmethod
    async def verify(self, expected: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Differences between ``expected`` and the current attributes: {name: (want, have)}."""


class FirmwareInterface(abc.ABC):
    @abc.abstractmethod
    async def inventory(self) -> list[FirmwareComponent]:
        """Every firmware component and its version."""

    @abc.abstractmethod
    async def simple_update(
        self,
        image_uri: str,
        *,
        targets: Sequence[str] | None = None,
        transfer_protocol: str | None = None,
        progress: ProgressCallback | None = None,
        timeout: float = 3600.0,
    ) -> TaskResult:
        """SimpleUpdate from ``image_uri``, following the task to its end."""

    @abc.abstractmethod
    async def update_service_info(self) -> UpdateServiceInfo:
        """What the UpdateService offers: SimpleUpdate, a multipart push URI, the apply times of each."""

    @abc.abstractmethod
    async def start_simple_update(
        self, image_uri: str, *, targets: Sequence[str] | None = None, apply_time: str | None = None
    ) -> str | None:
        """POST SimpleUpdate and return the task monitor's URI (None: the BMC finished at once).

        The caller journals the URI before it follows the task, so a process
        killed meanwhile can find the task again instead of flashing twice.
        """

    @abc.abstractmethod
    async def start_push(
        self, image: bytes, filename: str, *, targets: Sequence[str] | None = None, apply_time: str | None = None
    ) -> str | None:
        """Upload ``image`` to the MultipartHttpPushUri (UpdateParameters + UpdateFile); the task monitor's URI.

        Sent once: an upload that may have reached the BMC is never repeated here.
        """

    @abc.abstractmethod
    async def follow_task(self, task_uri: str | None, *, progress: ProgressCallback | None = None,
                          timeout: float = 3600.0) -> TaskResult:  # fmt: skip
        """Follow a task (its monitor or its resource) to its end; ``None``: a request that finished at once.

        Raises:
            BMCError: the task ended in Exception/Killed/Cancelled (its messages in the text).
            Timeout: still running after ``timeout`` seconds.
        """

    @abc.abstractmethod
    async def running_updates(self) -> list[TaskResult]:
        """Tasks of the BMC's TaskService still running (an update started by a
        process that died goes on in the BMC; a resumed workflow waits for it
        rather than flash the component a second time)."""


class InventoryInterface(abc.ABC):
    @abc.abstractmethod
    async def facts(self) -> SystemFacts:
        """Serial, model, CPUs, memory, NICs, PCIe devices, accelerator boards."""


class HealthInterface(abc.ABC):
    @abc.abstractmethod
    async def report(self) -> HealthReport:
        """System and chassis health, PSUs, fans, temperatures."""

    @abc.abstractmethod
    async def log_entries(self, since: str | None = None) -> tuple[list[LogEntry], str | None]:
        """Log entries newer than the cursor ``since``.

        Returns:
            (entries, cursor): pass ``cursor`` as ``since`` next time.
        """


class ManagerInterface(abc.ABC):
    @abc.abstractmethod
    async def facts(self) -> ManagerFacts:
        """The BMC's firmware version and clock (with its skew from ours)."""


# --------------------------------------------------------------------------
# Noop implementations
# --------------------------------------------------------------------------


class _Noop:
    capability = "this capability"

    def __init__(self, bmc_name: str = "BMC", reason: str | None = None) -> None:
        self._bmc_name = bmc_name
        self._reason = reason

    def _refuse(self) -> DriverError:
        why = f" ({self._reason})" if self._reason else ""
        return DriverError(f"{self._bmc_name}: {self.capability} is not supported by this BMC{why}")


def _noop_methods(cls: type[Any]) -> type[Any]:
    """Fill every abstract coroutine of the capability with one that refuses."""
    for name in list(getattr(cls, "__abstractmethods__", ())):

        async def refuse(self: _Noop, *args: Any, **kwargs: Any) -> Any:
            raise self._refuse()

        refuse.__name__ = name
        setattr(cls, name, refuse)
    cls.__abstractmethods__ = frozenset()
    return cls


@_noop_methods
class NoopPower(_Noop, PowerInterface):
    capability = "power control"


@_noop_methods
class NoopBoot(_Noop, BootInterface):
    capability = "boot override"


@_noop_methods
class NoopMedia(_Noop, MediaInterface):
    capability = "virtual media"


@_noop_methods
class NoopBios(_Noop, BiosInterface):
    capability = "BIOS settings"


@_noop_methods
class NoopFirmware(_Noop, FirmwareInterface):
    capability = "firmware inventory and update"


@_noop_methods
class NoopInventory(_Noop, InventoryInterface):
    capability = "inventory"


@_noop_methods
class NoopHealth(_Noop, HealthInterface):
    capability = "health"


@_noop_methods
class NoopManager(_Noop, ManagerInterface):
    capability = "manager facts"


class BMC(abc.ABC):
    """A BMC driver: the capabilities composed, used as an async context manager.

    ``async with driver_cls(target) as bmc: await bmc.power.state()``

    A driver class is constructed as ``driver_cls(target, *, fleet=None,
    **options)``: ``fleet`` is what the entered :meth:`fleet_session` gave
    (None: the driver opens what it needs for this BMC alone); ``options``
    are the driver's own (for Redfish ``task_poll_interval``, ``backoff``,
    ``accelerators_file``).
    """

    power: PowerInterface
    boot: BootInterface
    media: MediaInterface
    bios: BiosInterface
    firmware: FirmwareInterface
    inventory: InventoryInterface
    health: HealthInterface
    manager: ManagerInterface

    async def __aenter__(self) -> BMC:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abc.abstractmethod
    async def close(self) -> None:
        """Log out and release connections."""

    @property
    def fingerprint(self) -> str | None:
        """The certificate pin in use for this BMC (None: not pinned, or not TLS)."""
        return None

    @property
    def fingerprint_first_seen(self) -> bool:
        """True when ``fingerprint`` was pinned on first use by this connection
        (for the caller to record in the inventory)."""
        return False

    @property
    def vendor(self) -> str | None:
        """The vendor profile the driver detected, when it knows one."""
        return None

    @classmethod
    @abc.abstractmethod
    async def sweep(
        cls,
        targets: Iterable[BMCTarget],
        operation: Callable[[BMC], Awaitable[Any]],
        *,
        concurrency: int = 200,
        progress: SweepProgress[BMCSweepResult] | None = None,
        per_target_timeout: float | None = None,
        fleet: Any = None,
        **options: Any,
    ) -> list[BMCSweepResult]:
        """Run ``operation(bmc)`` on every target; one verdict each, in target order.

        Each BMC is opened, handed to ``operation`` and closed. Nothing is
        raised for one BMC's failure (timeout, refused login, TLS mismatch, a
        bug in a parser): it is that BMC's :class:`BMCSweepResult`, and the
        sweep goes on.

        Args:
            targets: the BMCs (all of them for this driver). Iterated once, as the BMCs are taken: a sized one
                (the health sweep's :class:`fleetctl.plugins.Stream`) is made from the store as it is taken, so it
                is not listed first; its ``len`` is an upper bound.
            operation: an async function of an opened driver.
            concurrency: BMCs worked on at once.
            progress: called as ``progress(done, total, result)`` after each
                BMC; awaited when it returns a coroutine.
            per_target_timeout: an overall bound per BMC (open to close), seconds.
            fleet: the entered value of :meth:`fleet_session` to share; None
                opens one for this call.
            options: passed to the driver's constructor.

        Returns:
            One result per target, in the order given.
        """

    @classmethod
    def fleet_session(cls) -> AbstractAsyncContextManager[Any]:
        """The connections the BMCs of one batch share, as an async context manager.

        ``async with driver_cls.fleet_session() as fleet:`` then
        ``driver_cls(target, fleet=fleet)`` or ``driver_cls.sweep(..., fleet=fleet)``
        for as many BMCs as the batch has; leaving the block closes what was
        shared. (``fleetctl.plugins.FleetSessions`` keeps one per driver for
        a batch over several drivers.)

        The default shares nothing and gives None; the Redfish driver gives
        one HTTP connection pool.
        """
        return contextlib.nullcontext(None)


CoroFn = Callable[[BMC], Awaitable[Any]]
