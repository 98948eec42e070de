"""Run one BMC operation over many servers, journaled, results as data.

Every server gets a verdict (ok, or the reason it failed) and one bad BMC
never stops the rest. The run is a Job with one JobStep per server, so what
was done survives the process; fingerprints pinned on first use are written
to the inventory as they are learned.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fleetctl.inventory.service import actor
from fleetctl.plugins import drivers_for, sweep
from fleetctl.store import get_engine
from fleetctl.targets import ServerRef, bmc_targets
from fleetctl.workflows.journal import JobState, Journal, StepResult, summary


@dataclass
class Outcome:
    server: str
    ok: bool
    value: Any = None
    error: str | None = None
    elapsed: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"server": self.server, "ok": self.ok, "error": self.error, "elapsed": round(self.elapsed, 2), **self.details}


def run(
    servers: list[ServerRef],
    operation: Callable[[Any], Awaitable[Any]],
    *,
    kind: str,
    target_label: str,
    args: dict[str, Any] | None = None,
    concurrency: int = 200,
    progress: Callable[[int, int, str, bool], None] | None = None,
    url: str | None = None,
) -> list[Outcome]:
    """Run ``operation(bmc)`` on each server's BMC; one Outcome per server, in order."""
    targets, unreachable = bmc_targets(servers)
    drivers_for("bmc", targets)  # a BMC driver that is not installed stops us before the journal
    journal = Journal.open(get_engine(url), kind=kind, target=target_label, args=args or {}, actor=actor())

    ids = {s.name: s.id for s in servers}
    outcomes: dict[str, Outcome] = {n: Outcome(n, False, error=why) for n, why in unreachable.items()}
    done = len(outcomes)
    total = len(servers)
    if progress:
        for n in outcomes:
            progress(done, total, n, False)

    pinned: dict[str, str] = {}

    def on_result(n_done: int, n_total: int, result: Any) -> None:
        if result.fingerprint:
            pinned[result.target] = result.fingerprint
        if progress:
            progress(done + n_done, total, result.target, result.ok)

    # Each server's BMC driver (``BMCTarget.driver``) sweeps its own servers; results come back in order.
    try:
        results = sweep("bmc", targets, operation, concurrency=concurrency, progress=on_result)
    except BaseException:  # Ctrl-C or SIGTERM (`fleetctl jobs cancel`): the job ends interrupted now, not once found dead
        journal.finish(JobState.INTERRUPTED, "interrupted")
        raise
    for r in results:
        outcomes[r.target] = Outcome(r.target, r.ok, r.value, r.error, r.elapsed)

    # One step row per server, the certificates pinned on first use (trust on first use: only where
    # nothing was pinned yet) and the job finished, in one transaction.
    failed = sum(1 for o in outcomes.values() if not o.ok)
    journal.record(
        [StepResult(ids[o.server], o.ok, o.elapsed, output=summary(o.value) if o.ok else None, error=o.error) for o in outcomes.values()],
        pins=pinned, state=JobState.FAILED if failed else JobState.SUCCEEDED, error=f"{failed} of {total} failed" if failed else None,
    )  # fmt: skip
    return [outcomes[s.name] for s in servers]
