"""The verdict for one device of a sweep: results are data, never raised.

Every driver's ``sweep`` (BMCs over Redfish, switches over SSH) returns one
of these per target, in order, so a CLI or a workflow reads them the same
way. Each family adds its own fields in a subclass: :class:`BMCSweepResult`,
:class:`SwitchSweepResult`. (An SNMP poll's verdict is its
:class:`~fleetctl.interfaces.snmp.PollResult`.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fleetctl.errors import FleetError

R = TypeVar("R")

#: ``progress(done, total, result)``, called by a sweep after each target.
#: A BMC sweep awaits what it returns when that is a coroutine.
SweepProgress = Callable[[int, int, R], Any]


@dataclass
class TargetResult:
    """The verdict for one target of a sweep.

    Attributes:
        target: the device's name.
        ok: the operation returned.
        value: what it returned (when ok).
        error: a one-line reason (when not ok).
        error_type: the exception's class name (``Timeout``, ``AuthError``, ...).
        elapsed: seconds spent on this device, login and logout included.
    """

    target: str
    ok: bool = False
    value: Any = None
    error: str | None = None
    error_type: str | None = None
    elapsed: float = 0.0

    def failed(self, exc: BaseException) -> None:
        """Record why the operation failed on this target.

        A :class:`FleetError` is an expected failure and keeps its own message.
        Anything else is a bug, for example a parser meeting output it has not
        seen. It is recorded as unexpected, and the sweep carries on.
        """
        self.ok = False
        self.error_type = type(exc).__name__
        if isinstance(exc, FleetError):
            self.error = str(exc)
        else:
            self.error = f"{self.target}: unexpected {type(exc).__name__}: {exc}"


@dataclass
class BMCSweepResult(TargetResult):
    """The verdict for one BMC of a sweep (:meth:`fleetctl.interfaces.bmc.BMC.sweep`).

    Attributes:
        fingerprint: the certificate pinned on first use during this sweep, for
            the caller to record in the inventory (None when nothing new).
        vendor: the vendor profile the driver detected, when known.
    """

    fingerprint: str | None = None
    vendor: str | None = None


@dataclass
class SwitchSweepResult(TargetResult):
    """The verdict for one switch of a sweep (:meth:`fleetctl.interfaces.switch.Switch.sweep`).

    ``error_type`` is for example ``Timeout``, ``AuthError`` or ``SessionDropped``.

    Attributes:
        platform: the switch's platform name.
    """

    platform: str | None = None
