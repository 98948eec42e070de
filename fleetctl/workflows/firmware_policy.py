"""The rules of a firmware campaign, as pure functions: no BMC, no store.

Which way a version moves (and whether it can be told), what each component
of a server needs against its model's baseline, when a campaign has failed
enough to halt, and when a maintenance window is open. The campaign
(:mod:`fleetctl.workflows.firmware_campaign`) and ``fleetctl firmware
check`` both decide through these, so the check says what the update would
do.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from fleetctl.errors import InputError
from fleetctl.workflows.firmware import baseline_key

# What ``firmware check`` says of a component, and what the campaign does with it.
NONE = "none"  # at the baseline
UPDATE = "update"  # the baseline is newer: the campaign flashes it
DOWNGRADE = "downgrade"  # the baseline is older and --allow-downgrade was given: flashed
DOWNGRADE_REFUSED = "downgrade-refused"  # older (or cannot be ordered) and no --allow-downgrade
UNKNOWN = "unknown"  # in the baseline, not reported by the BMC
NOT_IN_BASELINE = "not-in-baseline"  # reported by the BMC, the baseline says nothing of it

COMPLIANT = frozenset({NONE, NOT_IN_BASELINE})


def _int_tuple(v: str) -> tuple[int, ...] | None:
    parts = re.split(r"[.\-_]", v.strip())
    if parts and all(p.isdigit() for p in parts):
        return tuple(int(p) for p in parts)
    return None


def compare_versions(current: str, wanted: str) -> int | None:
    """-1 when ``wanted`` is older than ``current``, 0 equal, 1 newer; None when they cannot be ordered.

    Equal strings are equal. PEP 440 where both parse (``1.9.0`` < ``1.10.0``,
    ``2.0.0rc1`` < ``2.0.0``), else dot/dash separated integers compared as
    numbers (``96.00.74.00.01``), else None: a vendor string such as
    ``U46 v2.72`` is not guessed at.
    """
    if current.strip() == wanted.strip():
        return 0
    try:
        # packaging comes with pip, setuptools and ansible-core; without it, the integer rule alone.
        from packaging.version import Version

        a, b = Version(current), Version(wanted)
    except Exception:  # noqa: BLE001 - InvalidVersion, or packaging missing: the integer rule decides
        ta, tb = _int_tuple(current), _int_tuple(wanted)
        if ta is None or tb is None:
            return None
        # Trailing zeros do not make a version newer: 1.8 == 1.8.0.
        n = max(len(ta), len(tb))
        ta, tb = ta + (0,) * (n - len(ta)), tb + (0,) * (n - len(tb))
        return (tb > ta) - (tb < ta)
    return (b > a) - (b < a)


def classify(current: str | None, wanted: str, *, allow_downgrade: bool) -> tuple[str, str | None]:
    """(action, reason) for a component reported at ``current`` whose baseline is ``wanted``."""
    if current is None:
        return UNKNOWN, "the BMC reports no version for it"
    order = compare_versions(current, wanted)
    if order == 0:
        return NONE, None
    if order == 1:
        return UPDATE, None
    if order is None:
        why = f"cannot order {current!r} and {wanted!r}"
        return (DOWNGRADE, why + "; --allow-downgrade given") if allow_downgrade else (DOWNGRADE_REFUSED, why + ": give --allow-downgrade")
    if allow_downgrade:
        return DOWNGRADE, f"baseline {wanted} is older than {current}; --allow-downgrade given"
    return DOWNGRADE_REFUSED, f"baseline {wanted} is older than {current}: give --allow-downgrade"


@dataclass(frozen=True)
class ComplianceRow:
    component: str
    baseline_component: str | None
    current: str | None
    wanted: str | None
    action: str
    reason: str | None = None
    uri: str | None = None  # the FirmwareInventory member (Redfish Targets)


def compliance(inventory: Iterable[Any], want: dict[str, str], *, allow_downgrade: bool = False) -> list[ComplianceRow]:
    """One row per reported component, then one per baseline component nothing answered to (``unknown``)."""
    rows: list[ComplianceRow] = []
    answered: set[str] = set()
    for comp in inventory:
        key = baseline_key(want, comp)
        uri = getattr(comp, "uri", None)
        if key is None:
            rows.append(ComplianceRow(comp.id, None, comp.version, None, NOT_IN_BASELINE, uri=uri))
            continue
        answered.add(key)
        action, reason = classify(comp.version, want[key], allow_downgrade=allow_downgrade)
        rows.append(ComplianceRow(comp.id, key, comp.version, want[key], action, reason, uri=uri))
    for key in sorted(set(want) - answered):
        rows.append(ComplianceRow(key, key, None, want[key], UNKNOWN, "not reported by the BMC"))
    return rows


# --------------------------------------------------------------------- threshold


@dataclass(frozen=True)
class Threshold:
    """How many failed servers halt a campaign: a count, or a percentage of its servers."""

    count: int | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, text: str) -> Threshold:
        """``3`` (servers) or ``5%`` (of the campaign's servers). Raises InputError."""
        t = text.strip()
        try:
            if t.endswith("%"):
                p = float(t[:-1])
                if not 0 < p <= 100 or math.isnan(p):
                    raise ValueError
                return cls(percent=p)
            n = int(t)
            if n < 1:
                raise ValueError
            return cls(count=n)
        except ValueError:
            raise InputError(f"{text!r} is not a failure threshold: a count of servers (1 or more) or a percentage "
                             "(0% < P <= 100%)", field="--max-failures") from None  # fmt: skip

    def limit(self, total: int) -> int:
        """Failed servers at which the campaign halts (at least 1: a 1% threshold over 20 servers halts at the first)."""
        if self.count is not None:
            return self.count
        return max(1, math.ceil((self.percent or 100.0) * total / 100.0))

    def reached(self, failed: int, total: int) -> bool:
        return failed >= self.limit(total)

    def __str__(self) -> str:
        return f"{self.percent:g}%" if self.percent is not None else str(self.count)


# ------------------------------------------------------------------------ window


class Clock(Protocol):
    """The time the campaign's waves see (the window); tests give a fake one."""

    def now(self) -> dt.datetime: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass(frozen=True)
class Window:
    """A daily maintenance window in UTC; ``22:00-04:00`` wraps past midnight."""

    start: dt.time
    end: dt.time

    @classmethod
    def parse(cls, text: str) -> Window:
        m = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*", text)
        try:
            if not m:
                raise ValueError
            h1, m1, h2, m2 = (int(g) for g in m.groups())
            start, end = dt.time(h1, m1), dt.time(h2, m2)
        except ValueError:
            raise InputError(f"{text!r} is not a window: give START-END in UTC, as 22:00-04:00", field="--window") from None
        if start == end:
            raise InputError(f"{text!r}: the window starts where it ends", field="--window")
        return cls(start, end)

    def contains(self, at: dt.datetime) -> bool:
        t = at.astimezone(dt.UTC).time().replace(tzinfo=None)
        if self.start < self.end:
            return self.start <= t < self.end
        return t >= self.start or t < self.end  # wraps past midnight

    def opens_in(self, at: dt.datetime) -> float:
        """Seconds until the window is open (0 when it is)."""
        if self.contains(at):
            return 0.0
        at = at.astimezone(dt.UTC)
        opens = at.replace(hour=self.start.hour, minute=self.start.minute, second=0, microsecond=0)
        if opens <= at:
            opens += dt.timedelta(days=1)
        return (opens - at).total_seconds()

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M} UTC"


# ------------------------------------------------------------------------ boards

_BOARD_ID = re.compile(r"^(?P<kind>[A-Za-z0-9]+)_slot(?P<slot>\d+)_(?P<part>.+)$")


def board_slot(component_id: str) -> int | None:
    """The slot of an accelerator board component (``mncore2_slot0_mncore2-board`` -> 0); None for other components."""
    m = _BOARD_ID.match(component_id)
    return int(m.group("slot")) if m else None
