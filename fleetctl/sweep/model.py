"""Statuses, findings and check metadata: what a sweep produces, as data."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal


class Status(enum.StrEnum):
    OK = "ok"
    WARNING = "warning"
    UNKNOWN = "unknown"  # the target or a part of it could not be read
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Status.OK: 0, Status.WARNING: 1, Status.UNKNOWN: 2, Status.CRITICAL: 3}


def worst(statuses: Iterable[str | Status]) -> Status:
    """The worst of the statuses (OK for none)."""
    return max((Status(s) for s in statuses), key=lambda s: s.rank, default=Status.OK)


TargetKind = Literal["server", "switch"]


@dataclass
class Finding:
    """A problem one check found on one target.

    ``subject`` names the part (a PSU, a sensor, a port, a board's slot); the
    key ``(kind, target, check, subject)`` identifies the same problem from
    one sweep to the next.
    """

    kind: str
    target: str
    check: str
    status: Status
    message: str
    subject: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.kind, self.target, self.check, self.subject)


@dataclass(frozen=True)
class Problem:
    """What a check function yields: the finding without its target."""

    status: Status
    message: str
    subject: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def problem(status: Status, message: str, subject: str = "", **evidence: Any) -> Problem:
    return Problem(status, message, subject, evidence)


@dataclass(frozen=True)
class CheckSpec:
    """A check and its metadata.

    Attributes:
        name: dotted, stable (``psu``, ``port.errors``): it keys findings and acks.
        kind: the target kind it judges (``server`` or ``switch``).
        severity: the status it gives a plain failure (some checks grade).
        reads: what it reads (Redfish resources, MIB tables), for the docs
            and ``fleetctl sweep checks``.
        cost: what it adds to a sweep (``0 requests``: it reads what others read).
        level: ``bmc`` (every sweep) or ``host`` (``--level host``).
        description: one line for operators.
        fn: ``fn(reading, expect) -> Iterable[Problem]``.
        needs: the parts of a reading it judges (:data:`fleetctl.sweep.collect.READ_KEYS`: ``health.psus``,
            ``manager`` ...), from which a sweep reads only what its enabled checks need; None (a plugin that
            does not say): every part.
    """

    name: str
    kind: str
    severity: Status
    reads: tuple[str, ...]
    cost: str
    level: str
    description: str
    fn: Callable[[Any, Any], Iterable[Problem]]
    needs: tuple[str, ...] | None = None

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "severity": str(self.severity), "level": self.level,
                "reads": list(self.reads), "cost": self.cost, "description": self.description,
                # what a sweep reads for it (fleetctl.sweep.collect.READ_KEYS); None: everything
                "needs": list(self.needs) if self.needs is not None else None}  # fmt: skip
