"""Issue #25 item 9: acknowledged findings are exposed apart, and the documented alert rules do not page on them.

Rows written by hand (as test_prometheus_render.py does): a server whose only
critical finding is acknowledged, one with an acknowledged critical finding
and an unacknowledged one, and a switch like the first. The exposition is then
fed to `promtool test rules` with docs/metrics.md's rules: ServerCritical fires
for the second server alone, SwitchCritical not at all.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import insert

from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.sweep.prometheus import render

T0 = dt.datetime(2026, 11, 30, 3, 0, 0, tzinfo=dt.UTC)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _ack(c: Any, target: str, kind: str = "server") -> int:
    return int(c.execute(insert(T.finding_ack).values(kind=kind, target=target, check="psu", subject="", status="critical",
                                                      reason="swap booked", actor="t", created_at=T0)
                         .returning(T.finding_ack.c.id)).scalar_one())  # fmt: skip


def _finding(c: Any, run_id: int, target: str, check: str, *, ack: int | None, new: bool, kind: str = "server") -> None:
    c.execute(insert(T.finding).values(run_id=run_id, kind=kind, target=target, check=check, subject="", status="critical",
                                       message="m", evidence={}, first_seen=T0, last_seen=T0, new=new, ack_id=ack))  # fmt: skip


@pytest.fixture
def exposition() -> str:
    with get_engine().begin() as c:
        rid = int(c.execute(insert(T.sweep_run).values(
            started_at=T0, finished_at=T0, state="finished", level="bmc", selector="all", actor="t", host="h", pid=1,
            duration_s=1.0, servers=3, switches=1, counts={}, worst_new="critical").returning(T.sweep_run.c.id)).scalar_one())  # fmt: skip
        for kind, name in (("server", "srv-acked"), ("server", "srv-mixed"), ("server", "srv-ok"), ("switch", "leaf-acked")):
            c.execute(insert(T.sweep_target).values(run_id=rid, kind=kind, name=name, site="tyo1", rack="rack-1", position=1,
                                                    status="ok" if name == "srv-ok" else "critical", elapsed=0.1, error=None,
                                                    metrics={}))  # fmt: skip
        _finding(c, rid, "srv-acked", "psu", ack=_ack(c, "srv-acked"), new=True)  # new to this run, yet acknowledged
        _finding(c, rid, "srv-mixed", "psu", ack=_ack(c, "srv-mixed"), new=False)
        _finding(c, rid, "srv-mixed", "fan", ack=None, new=True)
        _finding(c, rid, "leaf-acked", "psu", ack=_ack(c, "leaf-acked", "switch"), new=False, kind="switch")
    with get_engine().connect() as c:
        return render(c)


def _samples(text: str) -> dict[str, float]:
    return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines() if line and not line.startswith("#")}


def test_acknowledged_findings_are_exposed_apart(exposition: str) -> None:
    s = _samples(exposition)
    assert s['fleetctl_findings{status="critical",check="psu",acknowledged="true"}'] == 3
    assert s['fleetctl_findings{status="critical",check="fan",acknowledged="false"}'] == 1
    assert s['fleetctl_findings_acknowledged{status="critical"}'] == 3
    assert s['fleetctl_findings_new{status="critical"}'] == 1  # srv-mixed's fan; srv-acked's psu is acknowledged
    assert s['fleetctl_server_health{server="srv-acked",site="tyo1",rack="rack-1"}'] == 3
    assert s['fleetctl_server_health_unacknowledged{server="srv-acked",site="tyo1",rack="rack-1"}'] == 1
    assert s['fleetctl_server_health_unacknowledged{server="srv-mixed",site="tyo1",rack="rack-1"}'] == 3
    assert s['fleetctl_switch_health_unacknowledged{switch="leaf-acked",site="tyo1",rack="rack-1"}'] == 1
    assert not [k for k in s if k.startswith("fleetctl_server_health_unacknowledged") and "srv-ok" in k]  # only where acked


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_the_documented_rules_do_not_page_on_an_acknowledged_finding(exposition: str, tmp_path: Path) -> None:
    rules = DOCS.read_text().split("## Alerts", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "rules.yml").write_text(rules)
    series = []
    for key, value in _samples(exposition).items():
        if re.match(r"fleetctl_(server|switch)_health|fleetctl_findings_new", key):
            series.append({"series": key, "values": f"{value:g}x5"})
    wanted = [{"eval_time": "1m", "alertname": name, "exp_alerts": alerts} for name, alerts in (
        ("ServerCritical", [{"exp_labels": {"severity": "page", "server": "srv-mixed", "site": "tyo1", "rack": "rack-1"},
                             "exp_annotations": {"summary": "srv-mixed (rack-1) is critical",
                                                 "description": "fleetctl sweep show --target srv-mixed"}}]),
        ("SwitchCritical", []),
        ("NewCriticalFinding", [{"exp_labels": {"severity": "page"},
                                 "exp_annotations": {"summary": "1 new critical findings: fleetctl sweep show --status critical"}}]),
    )]  # fmt: skip
    test = {"rule_files": ["rules.yml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": wanted}]}  # fmt: skip
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = subprocess.run(["promtool", "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
