"""From what was observed of one board to its verdict: pure, so every rule is tested without a host.

A board's verdict is the worst of its reasons (fail > degraded > pass); a
reason of severity ``note`` is kept with the verdict but does not change it.
Each reason names the criterion, says what was seen in words an operator
acts on, and carries the evidence (the figures, the lines).

A reading the sweep's host checks also judge (retired pages, pages pending
retirement, uncorrected ECC errors, temperature, the PCIe link, Xids) is
judged here by the same rule of ``Criteria`` (``judge_*``), so a board that
passes burn-in is not failed by the next sweep on the same figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fleetctl.burnin.criteria import Criteria, Judgement, xid_code
from fleetctl.interfaces.accel import BoardObservation

VERDICTS = ("pass", "degraded", "fail")
RANK = {"pass": 0, "note": 0, "degraded": 1, "fail": 2, "error": 3}


@dataclass(frozen=True)
class Reason:
    criterion: str
    severity: str  # fail, degraded, note
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BoardVerdict:
    verdict: str
    reasons: list[Reason]
    metrics: dict[str, Any]

    def reasons_as_dicts(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.reasons]


def _max(samples: list[dict[str, Any]], key: str) -> float | None:
    values = [float(s[key]) for s in samples if isinstance(s.get(key), int | float)]
    return max(values) if values else None


def evaluate(obs: BoardObservation, crit: Criteria) -> BoardVerdict:
    """The verdict of one board under ``crit`` (see criteria.yaml for the rules)."""
    reasons: list[Reason] = []

    def add(criterion: str, message: str, severity: str | None = None, **evidence: Any) -> None:
        reasons.append(Reason(criterion, severity or crit.severity_of(criterion), message, evidence))

    def judged(j: Judgement | None, **evidence: Any) -> None:
        if j is not None:
            reasons.append(Reason(j.criterion, j.severity, j.message, {**j.evidence, **evidence}))

    if not obs.present:
        add("missing", f"{obs.device}: the inventory has this board, the host does not list it", serial=obs.serial)
    for when, link in (("before", obs.link_before), ("after", obs.link_after)):
        if link:
            judged(crit.judge_link(link.get("gen"), link.get("max_gen"), link.get("width"), link.get("max_width"),
                                   f"{when} the workload"), when=when, link=link)  # fmt: skip
    for comp, current, wanted in obs.firmware:
        add("firmware", f"firmware {comp} is {current or 'unknown'}, the baseline is {wanted}", component=comp,
            current=current, wanted=wanted)  # fmt: skip
    judged(crit.judge_retired_pages(obs.retired_pages))
    judged(crit.judge_retired_pending(obs.retired_pages_pending))
    if obs.hung:
        add("hung", "the workload did not end in its time and was stopped")
    if obs.lost:
        add("device_lost", obs.lost)
    if obs.checksum_ok is False or obs.workload_ok is False or (obs.workload_errors or 0) > 0:
        what = []
        if obs.checksum_ok is False:
            what.append("wrong checksum")
        if (obs.workload_errors or 0) > 0:
            what.append(f"{obs.workload_errors} compute errors")
        if obs.workload_ok is False and not what:
            what.append("the workload reported a failure")
        add("checksum", "; ".join(what), **{k: v for k, v in obs.evidence.items() if k == "result"})
    for x in obs.xids:
        judged(crit.judge_xid(xid_code(x), x))
    for ev in obs.events:  # the typed form: the driver's code and word, judged by the same rule
        judged(crit.judge_event(ev))
    for d in obs.diag:
        if d.get("setup_error"):
            continue  # a setup error is the server's, not this board's (engine reports it)
        tool = d.get("tool") or "diagnostic"  # the driver names its diagnostic tool
        if d.get("status") == "Fail":
            add("diag_fail", f"{tool} {d.get('test')}: {d.get('message') or 'failed'}", diag=d)
        elif d.get("status") == "Warn":
            add("diag_warn", f"{tool} {d.get('test')}: {d.get('message') or 'warning'}", diag=d)
    new = {k: obs.errors_after.get(k, 0) - obs.errors_before.get(k, 0) for k in obs.errors_after if k in obs.errors_before}
    bad = {k: v for k, v in new.items() if v > 0 and not k.startswith("corrected")}
    if bad:
        add("new_memory_errors", "new memory errors during the run: " + ", ".join(f"{k} +{v}" for k, v in sorted(bad.items())),
            before=obs.errors_before, after=obs.errors_after)  # fmt: skip
    if "uncorrected_ecc" not in bad:  # the count of the moment, as the sweep judges it (new ones are said above)
        judged(crit.judge_uncorrected_errors(obs.errors_after.get("uncorrected_ecc", obs.errors_before.get("uncorrected_ecc"))))
    corrected = sum(v for k, v in new.items() if k.startswith("corrected") and v > 0)
    if crit.corrected_errors_max is not None and corrected > crit.corrected_errors_max:
        add("corrected_errors", f"{corrected} new corrected memory errors (at most {crit.corrected_errors_max})", count=corrected)

    # Throughput against the model's golden value (only for a board that gave a figure).
    metrics: dict[str, Any] = {"throughput": obs.throughput, "unit": crit.unit}
    if obs.throughput is not None and crit.golden_throughput:
        frac = obs.throughput / crit.golden_throughput
        metrics["throughput_fraction"] = round(frac, 3)
        if frac < crit.pass_fraction:
            sev = "fail" if frac < crit.fail_fraction else "degraded"
            add("throughput", f"throughput {obs.throughput:g} {crit.unit} is {frac:.0%} of the golden {crit.golden_throughput:g} "
                f"(pass >= {crit.pass_fraction:.0%}, fail < {crit.fail_fraction:.0%})", sev if crit.severity_of("throughput") in
                ("by_fraction", "fail") else crit.severity_of("throughput"), throughput=obs.throughput,
                golden=crit.golden_throughput)  # fmt: skip
    t = _max(obs.telemetry, "temp_c")
    metrics["max_temp_c"] = t
    judged(crit.judge_temperature(t))
    p = _max(obs.telemetry, "power_w")
    metrics["max_power_w"] = p
    if p is not None and crit.power_max_w is not None and p > crit.power_max_w:
        add("power", f"drew {p:g} W (limit {crit.power_max_w:g} W)", max_power_w=p)
    metrics["samples"] = len(obs.telemetry)
    if obs.errors_after:
        metrics["memory_errors"] = obs.errors_after
    worst = max((RANK[r.severity] for r in reasons), default=0)
    verdict = {0: "pass", 1: "degraded", 2: "fail"}[min(worst, 2)]
    reasons.sort(key=lambda r: -RANK[r.severity])
    return BoardVerdict(verdict, reasons, metrics)


def worst(verdicts: list[str]) -> str:
    """The worst of several verdicts (a server's is the worst of its boards'); pass for none."""
    return max(verdicts, key=lambda v: RANK.get(v, 3), default="pass")
