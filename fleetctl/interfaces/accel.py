"""Accelerators behind one interface: a driver per board kind, found through the ``fleetctl.accel`` entry points.

The core never names a vendor: burn-in (``fleetctl.burnin.host``) runs the
stages of :class:`AccelBurnin` on each host and judges the
:class:`BoardObservation` each board gives (``fleetctl.burnin.verdict``); the
sweep's host level (``fleetctl.sweep.host``) asks :meth:`AccelDriver.read`
for the boards and their counters. A driver receives an open host session
(:class:`~fleetctl.interfaces.host.HostSession`, every read bounded) and the
inventory's host variables (its tools' paths), never an address.

A driver registers one entry point per board kind it serves, in the
``fleetctl.accel`` group (``mncore2 = "pkg.mod:Driver"``); a board kind
without a driver gets :class:`NoopAccel`, which refuses with a message
naming the kind.

What the core judges is vendor-neutral: a driver's read gives
:class:`AccelReading` (its :class:`BoardReading` list, the device nodes it
found, the host's :class:`BoardEvent` list, the tool that listed them), and
its burn-in stages fill :class:`BoardObservation`. The default criteria of a
kind (burn-in levels, thresholds, which rules judge at which severity) are
data the driver ships (:meth:`AccelDriver.criteria`, a YAML file beside it);
a site's criteria file overrides them per kind and per hardware model.
"""

from __future__ import annotations

import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from fleetctl.errors import DriverError
from fleetctl.interfaces.host import HostSession, HostTarget

__all__ = ["AccelBurnin", "AccelDriver", "AccelReading", "BoardEvent", "BoardObservation", "BoardReading", "BurninContext",
           "BurninJob", "HostOutcome", "InvBoard", "NoopAccel", "Sampler", "StageError", "burnin_dir", "quote_argv"]  # fmt: skip

#: Telemetry samples kept per board; past it every second one is dropped.
MAX_SAMPLES_PER_BOARD = 20_000


class StageError(DriverError):
    """A burn-in stage cannot go on for this host; the message says which and why (the server gets an ``error`` result)."""


@dataclass(frozen=True)
class BoardEvent:
    """Something the host logged about a board (an NVIDIA Xid line, a driver's RAS event), judged by the criteria.

    ``code`` is the vendor's number for it (None: the line names none, judged as critical, never let pass).
    ``critical`` is the driver's own word where it has one; the criteria's ``xid_critical`` list, when set,
    decides instead (a site can make a code critical or not).
    """

    code: int | None
    message: str
    where: str = ""  # the board it is about: a PCI address (as the log writes it) or a device name
    critical: bool | None = None
    when: str = ""  # "since boot", "during the run": said with the finding


@dataclass
class BoardReading:
    """One board as a host tool lists it, for the sweep's host checks (None: the tool does not give it or could not).

    Every counter is what the core judges, named for what it is, not for the tool that gave it: the driver maps its
    tool's fields onto these (and keeps the rest out of the core).
    """

    device: str  # how findings name it: "GPU 0", "mnc2p27s0"
    serial: str | None = None
    pci_address: str | None = None
    slot: int | None = None
    model: str | None = None  # the board's product name as the tool says it
    temp_c: float | None = None
    power_w: float | None = None
    retired_pages: int | None = None  # memory pages retired for errors (single + double bit, or the vendor's bad pages)
    retired_pages_pending: bool | None = None  # pages waiting to be retired (a reset retires them)
    ecc_corrected: int | None = None  # memory errors since the driver loaded (volatile)
    ecc_uncorrected: int | None = None
    ecc_corrected_total: int | None = None  # over the board's life (aggregate), where the tool keeps it
    ecc_uncorrected_total: int | None = None
    link_gen: int | None = None  # the PCIe link now, and what board and slot can do
    link_gen_max: int | None = None
    link_width: int | None = None
    link_width_max: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # the tool's own figures, kept as evidence, never judged


@dataclass
class BoardObservation:
    """Everything the stages saw of one board (None: not read, or could not be); judged by ``fleetctl.burnin.verdict``."""

    server: str
    device: str  # mnc2p27s0, or GPU <index>
    kind: str  # mncore2, gpu
    serial: str | None = None
    slot: int | None = None
    model: str | None = None  # the server's hardware model (criteria are per model)
    present: bool = True  # listed by the host tool at the pre-checks
    link_before: dict[str, Any] | None = None  # PcieLink.model_dump()
    link_after: dict[str, Any] | None = None
    firmware: list[tuple[str, str | None, str]] = field(default_factory=list)  # (component, current, wanted) that differ
    throughput: float | None = None  # what the workload reported
    checksum_ok: bool | None = None  # None: the workload says nothing of it
    workload_ok: bool | None = None  # the program's own verdict (MN-Core PASS/FAIL, gpu-burn OK/FAULTY)
    workload_errors: int | None = None  # compute errors counted by the workload
    lost: str | None = None  # why the board is gone (device node vanished, DIED, no result)
    hung: bool = False
    errors_before: dict[str, int] = field(default_factory=dict)  # memory error counters before the workload
    errors_after: dict[str, int] = field(default_factory=dict)
    retired_pages: int | None = None
    retired_pages_pending: bool | None = None  # pages waiting to be retired (nvidia-smi retired_pages.pending), None: not read
    xids: list[str] = field(default_factory=list)  # kernel lines naming their Xid (older drivers); ``events`` is the typed form
    events: list[BoardEvent] = field(default_factory=list)  # what the host logged about this board, judged by the criteria
    diag: list[dict[str, Any]] = field(default_factory=list)  # dcgmi: {"test", "status", "message", "setup_error"}
    telemetry: list[dict[str, Any]] = field(default_factory=list)  # {"t", "temp_c", "power_w", "clock_mhz", "source"}
    evidence: dict[str, str] = field(default_factory=dict)  # raw lines worth keeping (the result line)


@dataclass(frozen=True)
class InvBoard:
    """A board as the inventory holds it."""

    serial: str
    kind: str
    slot: int | None = None
    pci_address: str | None = None
    model: str | None = None


@dataclass
class BurninJob:
    """One server's burn-in, as planned (``fleetctl.burnin.engine.plan``)."""

    server: str
    target: HostTarget  # how to reach its OS (fleetctl.targets.host_target)
    hostvars: dict[str, Any]
    kind: str  # what the CLI asked for: mncore, gpu
    boards: list[InvBoard]
    model: str | None  # the server's hardware model
    seconds: float
    dcgm_level: int | None = None  # the level's diagnostic depth (the criteria's dcgm_level), for drivers that have one
    grace: float = 60.0  # past the workload's length before it counts as hung
    interval: float = 5.0  # telemetry sampling
    force: bool = False  # reset boards another program holds
    connect_timeout: float = 20.0
    command_timeout: float = 60.0
    board_kind: str = ""  # the hardware model's board kind: the driver's key (the boards' kind when empty)

    @property
    def driver_key(self) -> str:
        return self.board_kind or (self.boards[0].kind if self.boards else self.kind)


@dataclass
class HostOutcome:
    """What the stages on one host gave: an error (no verdict for its boards), or one observation per board."""

    error: str | None = None
    notes: list[str] = field(default_factory=list)  # server-level facts (a diagnostic's setup error, a leftover stopped)
    observations: list[BoardObservation] = field(default_factory=list)
    workload_s: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage


def burnin_dir(hostvars: Mapping[str, Any]) -> str:
    """The folder on the host of a burn-in's session id: ``fleetctl_burnin_dir``, else under ``fleetctl_root``."""
    if hostvars.get("fleetctl_burnin_dir"):
        return str(hostvars["fleetctl_burnin_dir"])
    root = str(hostvars.get("fleetctl_root") or "").rstrip("/")
    return f"{root}/var/tmp/fleetctl-burnin"


def quote_argv(argv: list[str]) -> str:
    """A shell command line of ``argv``, each word quoted."""
    return " ".join(shlex.quote(a) for a in argv)


class Sampler:
    """Telemetry sampled while the workload runs; each sample's time is from the workload's start.

    At most :data:`MAX_SAMPLES_PER_BOARD` per board: past it every second sample is dropped, so a long run (or a
    workload printing progress without pause) keeps samples over the whole run in bounded memory.
    """

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.samples: dict[str, list[dict[str, Any]]] = {}

    def add(self, key: str, **values: Any) -> None:
        got = self.samples.setdefault(key, [])
        if len(got) >= MAX_SAMPLES_PER_BOARD:
            del got[1::2]
        got.append({"t": round(time.monotonic() - self.t0, 2), "source": "host", **values})


class BurninContext(Protocol):
    """What a driver's burn-in stages work with (the core's stage runner makes it): the host session, the job, the
    outcome the stages fill, and the host folder of the burn-in's session."""

    host: HostSession
    job: BurninJob
    out: HostOutcome
    work: str  # burnin_dir(job.hostvars)

    async def run(self, cmd: str, *, what: str, timeout: float | None = None, ok_codes: tuple[int, ...] = (0,),
                  max_bytes: int = ...) -> str:  # fmt: skip
        """stdout of ``cmd``, read within bounds (the job's command timeout unless ``timeout``).

        Raises:
            StageError: more than ``max_bytes``, past the timeout, or an exit status not in ``ok_codes``; the message
                starts with ``what``.
        """
        ...

    def in_session(self, body: str) -> str:
        """``body`` in a session of its own whose id is kept in the burn-in folder, so that a hung one is killed whole."""
        ...

    async def stop_session(self, what: str) -> str:
        """Kill what runs in the burn-in folder's session (a hung workload, or one a killed run left); ``stopped PGID`` or ''."""
        ...


@dataclass
class AccelReading:
    """What a driver read of a host's boards for the sweep's host checks (a part is None when it could not be read).

    ``boards``: every board the host tool lists (``tool`` names that tool in findings: "nvidia-smi");
    ``device_nodes``: the boards' device files present, for a kind that has them (None: not read, or the kind has
    none; the count is then not checked); ``events``: what the host logged about its boards (kernel lines), each
    naming its board; ``errors`` by the tool whose output could not be had or read, saying why.
    """

    boards: list[BoardReading] | None = None
    tool: str = ""
    device_nodes: list[str] | None = None
    events: list[BoardEvent] | None = None
    errors: dict[str, str] = field(default_factory=dict)


class AccelBurnin(ABC):
    """The burn-in stages of one host, in the order the core runs them (one instance per host and run).

    Each stage raises :class:`StageError` when the host cannot go on (its boards then get no verdict); what a
    stage saw of a board goes into that board's :class:`BoardObservation`.
    """

    def __init__(self, ctx: BurninContext) -> None:
        self.ctx = ctx

    @abstractmethod
    async def prechecks(self) -> list[BoardObservation]:
        """The inventory's boards as the host shows them (one observation each, ``present`` or not) and their state before."""

    async def prepare(self) -> None:  # noqa: B027 - a kind without a reset has nothing to prepare
        """Make the present boards ready for the workload (reset, clear); nothing by default."""

    @abstractmethod
    async def workload(self) -> None:
        """Run the workload on every present board at once, with telemetry; results into the observations."""

    @abstractmethod
    async def postchecks(self) -> None:
        """The boards' state after the workload (still there, links, counters) into the observations."""


class AccelDriver(ABC):
    """One kind of accelerator (or several kinds one vendor's tools serve), found by board kind."""

    #: The hardware models' board kinds this driver serves (its entry points' names).
    kinds: ClassVar[tuple[str, ...]] = ()
    #: The driver's default criteria (see :meth:`criteria`): a YAML file shipped beside the driver, or None.
    criteria_file: ClassVar[Path | None] = None

    def criteria(self) -> Mapping[str, Any]:
        """The default criteria of the kinds this driver serves, as data in the criteria file's shape.

        ``{"levels": {kind: {level: {"seconds": ..}}}, "kinds": {kind: {...}}, "models": {model: {...}}}``, each
        section optional: ``levels`` says how long each burn-in level runs (a kind without levels has no burn-in),
        ``kinds`` the thresholds and the severity of each rule, ``models`` a hardware model's keys on top. The core
        validates it (``fleetctl.burnin.criteria``); a site's criteria file overrides it key by key. By default the
        YAML of :attr:`criteria_file` (nothing when unset).

        Raises:
            DriverError: the file cannot be read or is not a YAML mapping.
        """
        if self.criteria_file is None:
            return {}
        import yaml

        try:
            data = yaml.safe_load(Path(self.criteria_file).read_text())
        except (OSError, yaml.YAMLError) as e:
            raise DriverError(f"{self.criteria_file}: cannot read the driver's criteria: {e}") from e
        if not isinstance(data, dict):
            raise DriverError(f"{self.criteria_file}: expected a mapping (levels, kinds, models)")
        return data

    @abstractmethod
    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        """The boards and their counters as the host's tools show them, for the sweep; never raises for a tool."""

    @abstractmethod
    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        """The burn-in stages of one host."""


class NoopAccel(AccelDriver):
    """A board kind no installed driver serves: every use says so, naming the kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def _refuse(self) -> StageError:
        return StageError(f"no accelerator driver serves board kind {self.kind!r} (none registered in fleetctl.accel)")

    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        return AccelReading(errors={"accelerators": str(self._refuse())})

    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        raise self._refuse()
