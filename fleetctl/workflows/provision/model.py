"""The provisioning workflow's values: options, what is known of a server, its progress and failure."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from fleetctl.errors import FleetError, Timeout
from fleetctl.lifecycle.locks import Refused
from fleetctl.workflows.maintained import DrainPlan

# NICs that are a BMC's own port: never moved to the provisioning VLAN.
BMC_NIC_NAMES = frozenset({"bmc", "ipmi", "oob", "ilo", "idrac", "xcc", "mgmt-bmc"})

PROVISIONING_DEFAULTS: dict[str, Any] = {
    "vlan": None, "boot": "pxe", "image": None, "firmware_images": None,
    "firmware_template": "{base}/{id}-{version}.bin", "install_timeout": 3600,
    "ssh_user": "root", "ssh_key": None, "k8s": None,
}  # fmt: skip


@dataclass
class Options:
    dry_run: bool = False
    reprovision: bool = False
    restart: bool = False
    accept_drift: bool = False
    concurrency: int = 64
    stagger_s: float = 2.0
    ansible_window_s: float = 10.0
    ansible_forks: int = 50
    switch_window_s: float = 1.0
    switch_sessions: int = 8
    poll_s: float = 2.0
    firmware_timeout_s: float = 3600.0
    url: str | None = None
    #: Servers reprovisioned in service that are live Kubernetes nodes: drained first, uncordoned when ready again.
    drain: DrainPlan | None = None


@dataclass
class ServerCtx:
    """What the workflow knows of one server, read once at the start."""

    id: int
    name: str
    state: str
    site: str
    rack: str  # "site/rack"
    model: str
    board_kind: str | None
    board_count: int
    peak_w: int
    baseline: dict[str, str]
    bios: dict[str, Any]
    ports: list[Any]  # PortWant of data ports
    prov: dict[str, Any]
    groups: list[str]
    hostvars: dict[str, Any]
    bmc_ref: Any
    in_service: bool = False


class StepFailed(FleetError):
    """A step found the server not as it must be (drift, over budget, a failed check)."""


class ErrorKind(enum.StrEnum):
    """What kind of thing stopped a server."""

    CHECK = "check"  # a step found the server not as it must be (StepFailed)
    TIMEOUT = "timeout"  # a device or the installed OS did not answer in time
    FLEET = "fleet"  # fleetctl's own error from a driver, the inventory or the store
    NETWORK = "network"  # an OS-level error reaching a device
    INTERNAL = "internal"  # a bug: not an expected failure


@dataclass(frozen=True)
class Failure:
    """Where and why a server stopped: the step (empty before the first), the kind, the reason.

    Its text, ``"<step>: <reason>"``, is what the server's ``last_error``,
    the report and the audit event say.
    """

    step: str
    kind: ErrorKind
    reason: str

    @classmethod
    def of(cls, step: str, e: BaseException) -> Failure:
        """The failure an exception raised in ``step`` means."""
        if isinstance(e, StepFailed):
            kind = ErrorKind.CHECK
        elif isinstance(e, (TimeoutError, Timeout)):
            kind = ErrorKind.TIMEOUT
        elif isinstance(e, FleetError):
            kind = ErrorKind.FLEET
        elif isinstance(e, OSError):
            kind = ErrorKind.NETWORK
        else:
            return cls(step, ErrorKind.INTERNAL, f"{e.__class__.__name__}: {e}")
        return cls(step, kind, str(e) or e.__class__.__name__)

    def __str__(self) -> str:
        if self.kind == ErrorKind.INTERNAL:
            return f"{self.step}: internal error: {self.reason}"
        return f"{self.step}: {self.reason}"


class StepError(Exception):
    """Carries a step's :class:`Failure` from the step to the server's engine (never leaves it)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


class Result(enum.StrEnum):
    """A server's result at the end of the run."""

    READY = "ready"
    FAILED = "failed"
    REFUSED = "refused"  # a state provisioning does not touch (rma; in service without --reprovision)
    SKIPPED = "skipped"  # already ready
    LOCKED = "locked"  # another worker holds it
    PLANNED = "planned"  # dry run


@dataclass
class Progress:
    """The live view's row for one server, and its final result."""

    server: str
    state: str
    step: str = ""
    status: str = "waiting"
    started: float = 0.0
    finished: float | None = None
    result: Result | None = None
    failure: Failure | None = None  # why it failed (result FAILED)
    locked_by: Refused | None = None  # who holds it (result LOCKED)
    error: str | None = None  # the text of the above, or why refused/skipped, or the plan's problems
    done: list[str] = field(default_factory=list)  # steps finished in this run
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step finished in this run
    # Seconds spent waiting on what is shared (a power slot, a switch session, an Ansible batch):
    # the step timings minus these are the server's own time.
    waited: float = 0.0
    resumed: list[str] = field(default_factory=list)  # steps found done in the journal
    plan: dict[str, Any] = field(default_factory=dict)
    cpu_s: float = 0.0

    @property
    def failed_step(self) -> str | None:
        return self.failure.step if self.failure else None

    def row(self) -> dict[str, Any]:
        elapsed = (self.finished or time.monotonic()) - self.started if self.started else 0.0
        out = {"server": self.server, "result": str(self.result or "running"), "state": str(self.state),
               "step": self.failed_step or self.step, "elapsed": round(elapsed, 1), "error": self.error,
               "done": self.done, "resumed": self.resumed, "timings": self.timings, "waited": round(self.waited, 2),
               "own_s": round(sum(self.timings.values()) - self.waited, 2)}  # fmt: skip
        if self.plan:
            out["plan"] = self.plan
        return out
