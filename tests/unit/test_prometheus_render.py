"""render(): the exposition of a stored sweep run, from rows written by hand.

Label escaping, HELP and TYPE for every family, the value of each status,
the latest finished run by default, and the atomic textfile.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

from fleetctl.errors import NotFound
from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.sweep.prometheus import HEALTH_VALUE, escape_label, format_value, render, write_textfile

T0 = dt.datetime(2026, 11, 30, 3, 0, 0, tzinfo=dt.UTC)
NASTY = 'rack "7"\\east\nrow'  # a rack name with a quote, a backslash and a newline


def _run(c: Any, *, state: str = "finished", started: dt.datetime = T0, duration: float = 12.5) -> int:
    return int(c.execute(insert(T.sweep_run).values(
        started_at=started, finished_at=started + dt.timedelta(seconds=duration) if state == "finished" else None,
        state=state, level="bmc", selector="all", actor="t", host="h", pid=1, duration_s=duration, servers=4, switches=1,
        counts={}, worst_new="critical").returning(T.sweep_run.c.id)).scalar_one())  # fmt: skip


def _target(c: Any, run_id: int, kind: str, name: str, status: str, metrics: dict[str, Any], rack: str = "rack-12") -> None:
    c.execute(insert(T.sweep_target).values(run_id=run_id, kind=kind, name=name, site="tyo1", rack=rack, position=1,
                                            status=status, elapsed=0.5, error=None, metrics=metrics))  # fmt: skip


def _finding(c: Any, run_id: int, target: str, check: str, status: str, *, new: bool = False, subject: str = "") -> None:
    c.execute(insert(T.finding).values(run_id=run_id, kind="server", target=target, check=check, subject=subject, status=status,
                                       message="m", evidence={}, first_seen=T0, last_seen=T0, new=new, ack_id=None))  # fmt: skip


@pytest.fixture
def store() -> Any:
    engine = get_engine()
    with engine.begin() as c:
        old = _run(c, started=T0 - dt.timedelta(days=1))
        _target(c, old, "server", "srv-ok", "critical", {})
        rid = _run(c)
        _target(c, rid, "server", "srv-ok", "ok", {"temperatures": {"Inlet": 22.0, "CPU1": 61.5}, "max_temp_c": 61.5, "psus_ok": 2,
                                                   "psus": 2, "fans_ok": 6, "clock_skew_s": -0.6})  # fmt: skip
        _target(c, rid, "server", "srv-warn", "warning", {"temperatures": {"Inlet": 24.0, "GPU0": 70.0}, "psus_ok": 2, "psus": 2})
        _target(c, rid, "server", "srv-unknown", "unknown", {})
        _target(c, rid, "server", "srv-crit", "critical", {"max_temp_c": 91.0, "psus_ok": 1, "psus": 2}, rack=NASTY)
        rates = {"in_errors_ps": 66.5, "out_errors_ps": 0.0, "in_discards_ps": 0.0, "out_discards_ps": 1.25}
        _target(c, rid, "switch", "leaf-1", "critical", {"uptime_s": 3600, "ports_up": 20, "ports": 54, "temperatures": {"ASIC": 53.0},
                                                          "port_rates": {"Ethernet5": rates}})  # fmt: skip
        _finding(c, rid, "srv-crit", "psu", "critical", new=True, subject="PSU 1")
        _finding(c, rid, "srv-crit", "psu.redundancy", "critical", new=True)
        _finding(c, rid, "srv-warn", "firmware.baseline", "warning")
        _finding(c, rid, "srv-unknown", "bmc.reachable", "unknown")
        _run(c, state="running", started=T0 + dt.timedelta(hours=1))  # still running: not the latest finished
    with engine.connect() as c:
        yield c, rid


def samples(text: str) -> dict[str, float]:
    return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines() if line and not line.startswith("#")}


def test_every_family_has_help_and_type_once_and_before_its_samples(store: Any) -> None:
    c, _ = store
    text = render(c)
    helps = re.findall(r"^# HELP (\S+) \S", text, re.M)
    types = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
    assert helps == [n for n, _ in types] and len(set(helps)) == len(helps)
    assert {t for _, t in types} == {"gauge"}
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    assert names <= set(helps)
    current = None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            current = line.split()[2]
        elif not line.startswith("#"):
            assert line.split("{")[0].split(" ")[0] == current, line  # samples sit under their own family
    for family in ("fleetctl_server_health", "fleetctl_switch_health", "fleetctl_sweep_duration_seconds",
                   "fleetctl_sweep_timestamp_seconds", "fleetctl_sweep_targets", "fleetctl_findings", "fleetctl_findings_new",
                   "fleetctl_switch_port_errors_per_second", "fleetctl_switch_port_discards_per_second",
                   "fleetctl_server_temperature_max_celsius", "fleetctl_server_clock_skew_seconds"):  # fmt: skip
        assert family in helps


def test_health_value_for_each_status(store: Any) -> None:
    c, _ = store
    s = samples(render(c))
    assert HEALTH_VALUE == {"unknown": 0, "ok": 1, "warning": 2, "critical": 3}
    assert s['fleetctl_server_health{server="srv-ok",site="tyo1",rack="rack-12"}'] == 1
    assert s['fleetctl_server_health{server="srv-warn",site="tyo1",rack="rack-12"}'] == 2
    assert s['fleetctl_server_health{server="srv-unknown",site="tyo1",rack="rack-12"}'] == 0
    assert s['fleetctl_switch_health{switch="leaf-1",site="tyo1",rack="rack-12"}'] == 3


def test_label_values_are_escaped(store: Any) -> None:
    c, _ = store
    text = render(c)
    assert escape_label(NASTY) == 'rack \\"7\\"\\\\east\\nrow'
    assert 'fleetctl_server_health{server="srv-crit",site="tyo1",rack="rack \\"7\\"\\\\east\\nrow"} 3\n' in text
    assert all(line.count('"') % 2 == 0 for line in text.splitlines() if not line.startswith("#"))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_promtool_accepts_it_escapes_and_all(store: Any) -> None:
    c, _ = store
    p = subprocess.run(["promtool", "check", "metrics"], input=render(c), capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr


def test_run_metrics_targets_and_findings(store: Any) -> None:
    c, rid = store
    s = samples(render(c))
    assert s["fleetctl_sweep_run_id"] == rid  # the latest finished run, not the running one
    assert s["fleetctl_sweep_duration_seconds"] == 12.5
    assert s["fleetctl_sweep_timestamp_seconds"] == (T0 + dt.timedelta(seconds=12.5)).timestamp()
    assert s["fleetctl_sweep_start_timestamp_seconds"] == T0.timestamp()
    assert s['fleetctl_sweep_targets{kind="server",status="ok"}'] == 1
    assert s['fleetctl_sweep_targets{kind="server",status="critical"}'] == 1
    assert s['fleetctl_sweep_targets{kind="switch",status="warning"}'] == 0  # every status, zero included
    assert s['fleetctl_findings{status="critical",check="psu",acknowledged="false"}'] == 1
    assert s['fleetctl_findings{status="unknown",check="bmc.reachable",acknowledged="false"}'] == 1
    assert s['fleetctl_findings_new{status="critical"}'] == 2
    assert s['fleetctl_findings_new{status="warning"}'] == 0
    assert s['fleetctl_findings_acknowledged{status="critical"}'] == 0


def test_server_and_switch_metrics(store: Any) -> None:
    c, _ = store
    text = render(c)
    s = samples(text)
    ok = 'server="srv-ok",site="tyo1",rack="rack-12"'
    assert s[f"fleetctl_server_temperature_max_celsius{{{ok}}}"] == 61.5
    assert s['fleetctl_server_temperature_max_celsius{server="srv-warn",site="tyo1",rack="rack-12"}'] == 70  # from the sensors
    assert s[f"fleetctl_server_clock_skew_seconds{{{ok}}}"] == -0.6
    assert s[f"fleetctl_server_psus_ok{{{ok}}}"] == 2 and s[f"fleetctl_server_fans_ok{{{ok}}}"] == 6
    assert "srv-unknown" not in text.split("fleetctl_server_temperature_max_celsius", 1)[1]  # no metric, no sample
    leaf = 'switch="leaf-1",port="Ethernet5",direction'
    assert s[f'fleetctl_switch_port_errors_per_second{{{leaf}="in",site="tyo1",rack="rack-12"}}'] == 66.5
    assert s[f'fleetctl_switch_port_discards_per_second{{{leaf}="out",site="tyo1",rack="rack-12"}}'] == 1.25
    assert s['fleetctl_switch_uptime_seconds{switch="leaf-1",site="tyo1",rack="rack-12"}'] == 3600
    assert s['fleetctl_switch_temperature_max_celsius{switch="leaf-1",site="tyo1",rack="rack-12"}'] == 53
    # a bounded number of series per server, whatever its sensors
    per_server = [k for k in s if 'server="srv-ok"' in k]
    assert len(per_server) == 6


def test_an_older_run_by_id(store: Any) -> None:
    c, rid = store
    s = samples(render(c, rid - 1))
    assert s["fleetctl_sweep_run_id"] == rid - 1
    assert s['fleetctl_server_health{server="srv-ok",site="tyo1",rack="rack-12"}'] == 3


def test_no_finished_run_is_not_found() -> None:
    with get_engine().connect() as c, pytest.raises(NotFound):
        render(c)


def test_format_value() -> None:
    assert format_value(3) == "3" and format_value(2.0) == "2" and format_value(0.25) == "0.25"
    assert format_value(float("nan")) == "NaN" and format_value(float("inf")) == "+Inf" and format_value(float("-inf")) == "-Inf"
    assert format_value(True) == "1"


def test_write_textfile_is_atomic_and_readable(store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c, _ = store
    tmp_path = tmp_path / "textfile"
    tmp_path.mkdir()
    (tmp_path / "fleetctl.prom").write_text("old\n")
    path = write_textfile(c, tmp_path)
    assert path == tmp_path / "fleetctl.prom"
    assert path.read_text() == render(c)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleetctl.prom"]
    assert path.stat().st_mode & 0o777 == 0o644

    # A failure before the rename leaves the old file whole, and no temporary file.
    path.write_text("old\n")

    def boom(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_textfile(c, tmp_path)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleetctl.prom"]


def test_the_temporary_name_is_not_read_by_the_collector(store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """node_exporter reads *.prom: the file being written must not match."""
    c, _ = store
    seen: list[str] = []
    real = os.replace

    def spy(src: Any, dst: Any) -> None:
        seen.append(Path(src).name)
        real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_textfile(c, tmp_path)
    assert seen and not seen[0].endswith(".prom") and Path(seen[0]).parent == Path(".")


def test_latest_full_run_skips_partial_sweeps(store: Any) -> None:
    from fleetctl.sweep.prometheus import latest_full_run

    c, rid = store
    with get_engine().begin() as w:
        partial = int(w.execute(insert(T.sweep_run).values(
            started_at=T0 + dt.timedelta(hours=2), finished_at=T0 + dt.timedelta(hours=2, seconds=1), state="finished",
            level="bmc", selector="rack-12", actor="t", host="h", pid=1, duration_s=1.0, servers=1, switches=0, counts={},
            worst_new="ok").returning(T.sweep_run.c.id)).scalar_one())  # fmt: skip
    assert latest_full_run(c) == rid
    assert samples(render(c))["fleetctl_sweep_run_id"] == partial  # render(None): the latest finished run, whatever it swept


def test_no_full_run_is_not_found() -> None:
    from fleetctl.sweep.prometheus import latest_full_run

    with get_engine().connect() as c, pytest.raises(NotFound):
        latest_full_run(c)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_the_documented_alert_rules_are_valid(tmp_path: Path) -> None:
    """docs/metrics.md's alert rules load in Prometheus and name only metrics that exist."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    rules = doc.split("## Alerts", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "rules.yml").write_text(rules)
    p = subprocess.run(["promtool", "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    with get_engine().begin() as c:
        rid = _run(c)
    with get_engine().connect() as c:
        ours = set(re.findall(r"^# TYPE (\S+)", render(c, rid), re.M))
    ours |= {"fleetctl_exporter_last_scrape_error", "fleetctl_exporter_scrape_duration_seconds"}
    assert set(re.findall(r"\bfleetctl_[a-z_]+", rules)) <= ours
