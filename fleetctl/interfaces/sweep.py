"""The verdict for one device of a sweep: results are data, never raised.

Both sweeps (BMCs over Redfish, switches over SSH) return one of these per
target, in order, so a CLI or a workflow reads them the same way. Each
driver family adds its own fields in a subclass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetctl.errors import FleetError


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
