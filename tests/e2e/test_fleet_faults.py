"""Faults at fleet scale, small (issue #13): 40 generated lab BMCs, some answering 5xx, hung, dropping, out of sessions.

`power status`, `server inspect`, `server health` and `sweep run` over all of
them: every server gets a verdict (ok, or a one-line error naming it and
saying what happened), the exit code says some failed, nothing prints a
traceback, the faulty BMCs are named with the right reason, and the healthy
BMCs' answers match the lab's truth (power state from its counters; serial,
boards and BMC firmware from its generated specs). The wall time is printed,
never asserted: what bounded the run is asserted instead, from the hung BMC's
error (the request timeout for the first three, the sweep's --timeout for the
sweep). bench/faults.py runs the same at 1,000 BMCs.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests_helpers_bmc import lab_up  # (path set in conftest)

from tests.conftest import Result, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # heavy: minutes long; `make test-heavy` runs the heavy ones alone

N = 40
# Generous: the lab serves 40 HTTPS BMCs from one process, on a machine other jobs load too.
REQUEST_TIMEOUT = 10  # FLEETCTL_BMC_TIMEOUT for power/inspect/health
RETRIES = 1
SWEEP_REQUEST_TIMEOUT = 20  # the sweep's --request-timeout (a sweep reads ~45 resources per BMC)
SWEEP_TIMEOUT = 30  # the sweep's --timeout: shorter than two request timeouts, so it is what ends a hung BMC

# The mix at 40 BMCs, at least one of each: server -> (fault kind, lab fault arguments)
FAULTS: dict[str, tuple[str, list[str]]] = {
    "lab-mncore-00002": ("5xx", ["--set", "error_rate=1"]),
    "lab-gpu-00013": ("5xx", ["--set", "error_rate=1"]),
    "lab-gpu-00007": ("hang", ["--set", "hang=true"]),
    "lab-mncore-00020": ("drop", ["--set", "drop=true"]),
    "lab-gpu-00031": ("session", ["--set", "session_limit=true"]),
}


def classify(error: str | None) -> str:
    """The reason class of a one-line verdict."""
    if not error:
        return "ok"
    if "session limit reached on the BMC" in error:
        return "session"
    if "no answer to" in error or "no result within" in error:
        return "hang"
    if "connection dropped" in error:
        return "drop"
    if "HTTP 500" in error or "HTTP 503" in error:
        return "5xx"
    return "other"


@dataclass
class Lab:
    env: dict[str, str]
    control_url: str
    specs: dict[str, Any]


def _use(env: dict[str, str], mp: pytest.MonkeyPatch) -> None:
    from fleetctl.store import reset_engines

    for k, v in env.items():
        mp.setenv(k, v)
    reset_engines()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    from fleetctl_lab.bmc.spec import generate_specs

    root = tmp_path_factory.mktemp("fleet-faults")
    env = {"FLEETCTL_LAB_DIR": str(root / "lab"), "FLEETCTL_DATA_DIR": str(root / "data"), "FLEETCTL_DB": str(root / "src.db"),
           "FLEETCTL_ACTOR": "tester@ci", "FLEETCTL_BMC_TIMEOUT": str(REQUEST_TIMEOUT), "FLEETCTL_BMC_RETRIES": str(RETRIES)}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        _use(env, mp)
        r = lab_up(run_cli, mp, "--generate", str(N), "--power-transition", "0.2")
        assert r.code == 0, r.err
        env["FLEETCTL_DB"] = os.environ["FLEETCTL_DB"]
        try:
            for name, (_, args) in FAULTS.items():
                r = run_cli("lab", "fault", name, *args)
                assert r.code == 0, (name, r.err)
            doc = json.loads((root / "lab" / "lab.json").read_text())
            yield Lab(env, doc["control_url"], {s.name: s for s in generate_specs(N)})
        finally:
            _use(env, mp)
            run_cli("lab", "down")


@pytest.fixture
def on_lab(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Lab:
    """Point this test at the lab's fleet (the autouse isolation points every test elsewhere first)."""
    _use(lab.env, monkeypatch)
    return lab


def timed(*args: str) -> tuple[Result, Any]:
    t0 = time.perf_counter()
    r = run_cli(*args)
    wall = time.perf_counter() - t0
    print(f"fleetctl {' '.join(args)}: {wall:.1f} s (exit {r.code})")  # for the record; never asserted
    assert "Traceback" not in r.out + r.err, r.err[-3000:]
    return r, json.loads(r.out)


def check_verdicts(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One row per server; the faulty ones failed with the right reason, naming the server, on one line."""
    by = {r["server"]: r for r in rows}
    assert sorted(by) == sorted(f"lab-{'mncore' if i % 2 == 0 else 'gpu'}-{i:05d}" for i in range(N))
    for name, row in by.items():
        kind = FAULTS.get(name, ("ok", []))[0]
        assert classify(row["error"]) == kind, (name, row["error"])
        assert row["ok"] is (kind == "ok"), row
        if row["error"]:
            assert row["error"].startswith(f"{name}: ") and "\n" not in row["error"], row["error"]
    hung = [n for n, (k, _) in FAULTS.items() if k == "hang"]
    for name in hung:  # the request timeout ended it: two attempts of REQUEST_TIMEOUT s each, nothing longer
        assert f"within {REQUEST_TIMEOUT} s" in by[name]["error"], by[name]["error"]
    session = [n for n, (k, _) in FAULTS.items() if k == "session"]
    for name in session:  # retried once with backoff, then named
        assert f"refused a new session {1 + RETRIES} times" in by[name]["error"], by[name]["error"]
    return by


def healthy(lab: Lab) -> list[str]:
    return [n for n in lab.specs if n not in FAULTS]


def test_power_status(on_lab: Lab) -> None:
    r, rows = timed("power", "status", "all", "-o", "json")
    assert r.code == 1
    by = check_verdicts(rows)
    for name in healthy(on_lab):
        with urllib.request.urlopen(f"{on_lab.control_url}/lab/v1/bmcs/{name}/counters", timeout=10) as resp:
            truth = json.loads(resp.read())["power_state"].lower()
        assert by[name]["power"] == truth, (name, by[name])


def test_server_inspect(on_lab: Lab) -> None:
    r, rows = timed("server", "inspect", "all", "-o", "json")
    assert r.code == 1
    by = check_verdicts(rows)
    for name in healthy(on_lab):
        spec = on_lab.specs[name]
        assert by[name]["serial"] == spec.serial, by[name]
        assert str(by[name]["boards"]).split("/")[0] == str(len(spec.boards)), by[name]
        assert not by[name]["drift"], by[name]


def test_server_health(on_lab: Lab) -> None:
    r, rows = timed("server", "health", "all", "-o", "json")
    assert r.code == 1
    by = check_verdicts(rows)
    for name in healthy(on_lab):
        assert by[name]["problems"] == [] and by[name]["bmc_firmware"] == on_lab.specs[name].firmware["BMC"], by[name]


def test_sweep(on_lab: Lab) -> None:
    r, doc = timed("sweep", "run", "all", "--timeout", str(SWEEP_TIMEOUT), "--request-timeout", str(SWEEP_REQUEST_TIMEOUT),
                   "--retries", str(RETRIES), "-o", "json")  # fmt: skip
    assert r.code == 5  # a new critical finding: the BMCs that did not answer
    assert sum(doc["targets_by_status"].values()) == N and doc["targets_by_status"]["ok"] == N - len(FAULTS)
    found: dict[str, list[dict[str, Any]]] = {}
    for f in doc["new"]:
        found.setdefault(f["target"], []).append(f)
    assert sorted(found) == sorted(FAULTS)  # the healthy BMCs: nothing found
    for name, (kind, _) in FAULTS.items():
        [f] = found[name]
        assert f["check"] == "bmc.reachable" and classify(f["message"]) == kind, f
        assert f["status"] == ("unknown" if kind in ("5xx", "session") else "critical"), f
        if kind == "hang":  # the sweep's per-target timeout ended it, before a second request timeout could
            assert f"no result within {SWEEP_TIMEOUT} s" in f["message"], f
