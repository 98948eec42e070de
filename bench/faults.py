#!/usr/bin/env python3
"""Faults at fleet scale (issue #13): four commands over 1,000 lab BMCs of which some misbehave.

A lab of ``--bmcs`` generated BMCs is started with the real CLI
(``fleetctl lab up --generate N`` on a temporary lab folder, HTTPS, no
hosts), and a seeded random choice of them is given a fault through the
lab's control endpoint (``POST /lab/v1/faults``):

- ``--error-pct`` (5 %) answer every request 500 or 503 (``error_rate=1``);
- ``--hang-pct`` (2 %) never answer (``hang=true``);
- ``--drop-pct`` (1 %) close every connection without an answer (``drop=true``);
- ``--session-pct`` (2 %) refuse every new session, 503 SessionLimitExceeded
  (``session_limit=true``: their slots all taken, as by other clients).

Then, one after the other, each a process of its own with the lab's fleet
selected: ``fleetctl power status all``, ``server inspect all``, ``server
health all`` (``FLEETCTL_BMC_TIMEOUT`` = ``--request-timeout``,
``FLEETCTL_BMC_RETRIES`` = ``--retries``) and ``fleetctl sweep run
--timeout T --request-timeout R --retries N`` (``--sweep-timeout``,
``--sweep-request-timeout``: a sweep reads ~45 resources per BMC, and on
a loaded machine the lab, one process for every BMC, answers slowly), all
``-o json``.

Per command it prints: targets, verdicts by class (ok, HTTP 5xx, timed out,
connection dropped, session limit, other), the exit code, whether a
traceback was printed, the wall time, the per-target timeout (the sweep's
``--timeout``; for the other three, which have no overall bound per BMC,
attempts x request timeout: what a BMC that never answers costs), the bound
(wall - per-target timeout), the faulty BMCs named with the right reason,
and how many of the healthy BMCs' answers are right against the lab's truth
(power state from the lab's counters; serial, board count and BMC firmware
from the lab's generated specs; for the sweep: no finding on a healthy BMC).

Asserts nothing. The load average is printed: other jobs on the machine
change every figure.

    .venv/bin/python bench/faults.py [--bmcs 1000] [--request-timeout 10] [--sweep-timeout 60] [--sweep-request-timeout 20]
        [--retries 1] [--commands power,inspect,health,sweep] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FLEETCTL = [str(BIN / "fleetctl")] if (BIN / "fleetctl").exists() else [sys.executable, "-m", "fleetctl.cli.app"]

# the reason class each fault must show as
EXPECTED = {"error": "http_5xx", "hang": "timed_out", "drop": "dropped", "session": "session_limit"}
FAULT_SETTINGS = {"error": {"error_rate": 1}, "hang": {"hang": True}, "drop": {"drop": True}, "session": {"session_limit": True}}


def say(msg: str) -> None:
    print(msg, flush=True)


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def classify(error: str | None) -> str:
    """The reason class of a one-line verdict."""
    if not error:
        return "ok"
    if "session limit reached" in error:
        return "session_limit"
    if "no answer to" in error or "no result within" in error or "timed out" in error:
        return "timed_out"
    if "connection dropped" in error or "Server disconnected" in error:
        return "dropped"
    if "HTTP 50" in error:
        return "http_5xx"
    return "other"


def control(url: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, method=method, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def run(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    load0 = load()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=REPO)
    wall = time.perf_counter() - t0
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = None
    return {"rc": done.returncode, "wall": wall, "doc": doc, "stderr": done.stderr, "stdout": done.stdout,
            "traceback": "Traceback" in done.stderr or "Traceback" in done.stdout, "load": f"{load0} -> {load()}"}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--bmcs", type=int, default=1000)
    p.add_argument("--error-pct", type=float, default=5.0)
    p.add_argument("--hang-pct", type=float, default=2.0)
    p.add_argument("--drop-pct", type=float, default=1.0)
    p.add_argument("--session-pct", type=float, default=2.0)
    p.add_argument("--request-timeout", type=float, default=10.0, help="seconds for one request (all four commands)")
    p.add_argument("--retries", type=int, default=1, help="extra attempts per request (all four commands)")
    p.add_argument("--sweep-timeout", type=float, default=60.0, help="the sweep's --timeout: seconds one BMC may take in all")
    p.add_argument("--sweep-request-timeout", type=float, default=20.0, help="the sweep's --request-timeout")
    p.add_argument("--commands", default="power,inspect,health,sweep", help="which of the four to run (comma-separated)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (outputs, the lab's log)")
    args = p.parse_args()

    from fleetctl_lab.bmc.spec import generate_specs

    specs = {s.name: s for s in generate_specs(args.bmcs)}
    names = sorted(specs)
    rng = random.Random(args.seed)
    pool = names[:]
    rng.shuffle(pool)
    fault_of: dict[str, str] = {}
    for kind, pct in (("error", args.error_pct), ("hang", args.hang_pct), ("drop", args.drop_pct), ("session", args.session_pct)):
        n = max(1, round(args.bmcs * pct / 100))
        for name in pool[:n]:
            fault_of[name] = kind
        pool = pool[n:]
    healthy = [n for n in names if n not in fault_of]

    tmp = Path(tempfile.mkdtemp(prefix=f"fleetctl-bench-faults-{args.bmcs}-"))
    lab_dir = tmp / "lab"
    base_env = {**os.environ, "FLEETCTL_LAB_DIR": str(lab_dir), "FLEETCTL_DATA_DIR": str(tmp / "data"),
                "FLEETCTL_DB": str(tmp / "unused-source.db"), "NO_COLOR": "1", "COLUMNS": "200"}  # fmt: skip
    say(f"bench/faults.py: {args.bmcs:,} lab BMCs (HTTPS): {Counter(fault_of.values())} faulty, {len(healthy):,} healthy; "
        f"request timeout {args.request_timeout:g} s, {args.retries} retr{'y' if args.retries == 1 else 'ies'}, "
        f"sweep --timeout {args.sweep_timeout:g} s --request-timeout {args.sweep_request_timeout:g} s")  # fmt: skip
    say(f"machine: {os.cpu_count()} CPUs, load average at start {load()}")
    t_up = time.perf_counter()
    up = subprocess.run([*FLEETCTL, "lab", "up", "--generate", str(args.bmcs), "--power-transition", "0.2", "-o", "json"],
                        env=base_env, capture_output=True, text=True, check=False, cwd=REPO)  # fmt: skip
    if up.returncode != 0:
        say(f"lab up FAILED ({up.returncode}): {up.stderr[-3000:]}")
        return 1
    results: dict[str, dict[str, Any]] = {}
    try:
        lab = json.loads((lab_dir / "lab.json").read_text())
        curl = lab["control_url"]
        say(f"lab up: {time.perf_counter() - t_up:.0f} s")
        by_kind: dict[str, list[str]] = {}
        for n, k in fault_of.items():
            by_kind.setdefault(k, []).append(n)
        for k, ns in by_kind.items():
            control(curl, "POST", "/lab/v1/faults", {"names": ns, "faults": FAULT_SETTINGS[k]})
        truth_power = {n: str(control(curl, "GET", f"/lab/v1/bmcs/{n}/counters")["power_state"]).lower() for n in healthy}
        env = {**base_env, "FLEETCTL_DB": str(lab_dir / "fleet.db"), "FLEETCTL_BMC_TIMEOUT": f"{args.request_timeout:g}",
               "FLEETCTL_BMC_RETRIES": str(args.retries)}  # fmt: skip
        attempts_bound = (1 + args.retries) * args.request_timeout
        commands = {
            "power status": ([*FLEETCTL, "power", "status", "all", "-o", "json"], attempts_bound),
            "server inspect": ([*FLEETCTL, "server", "inspect", "all", "-o", "json"], attempts_bound),
            "server health": ([*FLEETCTL, "server", "health", "all", "-o", "json"], attempts_bound),
            "sweep": ([*FLEETCTL, "sweep", "run", "all", "--timeout", f"{args.sweep_timeout:g}", "--request-timeout",
                       f"{args.sweep_request_timeout:g}", "--retries", str(args.retries), "-o", "json"], args.sweep_timeout),  # fmt: skip
        }
        wanted = {w.strip() for w in args.commands.split(",")}
        for label, (cmd, per_target) in commands.items():
            if {"power status": "power"}.get(label, label.split()[-1]) not in wanted:
                continue
            say(f"\n[{label}] {' '.join(cmd[1:])} (load {load()})")
            m = run(cmd, env)
            verdicts = verdicts_of(label, m["doc"], names)
            judged = judge(label, verdicts, m["doc"], fault_of, healthy, specs, truth_power)
            m.update(judged, verdicts=verdicts, per_target=per_target, bound=m["wall"] - per_target)
            results[label] = m
            report(label, m, len(names))
    finally:
        subprocess.run([*FLEETCTL, "lab", "down"], env=base_env, capture_output=True, check=False, cwd=REPO)
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    say(f"\nload average at end {load()}")
    say(f"\n{'command':<15} {'targets':>7} {'verdicts':>8}  {'ok':>5} {'5xx':>4} {'timeout':>7} {'dropped':>7} {'session':>7} "
        f"{'other':>5}  {'rc':>2} {'tb':>3}  {'wall s':>7} {'per-target s':>12} {'bound s':>7}  {'faulty right':>12}  "
        f"{'healthy right':>13}")  # fmt: skip
    for label, m in results.items():
        c = m["classes"]
        say(f"{label:<15} {len(names):>7} {m['n_verdicts']:>8}  {c.get('ok', 0):>5} {c.get('http_5xx', 0):>4} "
            f"{c.get('timed_out', 0):>7} {c.get('dropped', 0):>7} {c.get('session_limit', 0):>7} {c.get('other', 0):>5}  "
            f"{m['rc']:>2} {'yes' if m['traceback'] else 'no':>3}  {m['wall']:>7.1f} {m['per_target']:>12.1f} {m['bound']:>7.1f}  "
            f"{m['faulty_right']:>5}/{m['faulty_n']:<6}  {m['healthy_right']:>6}/{m['healthy_n']:<6}")  # fmt: skip
    return 0


def verdicts_of(label: str, doc: Any, names: list[str]) -> dict[str, str | None]:
    """server -> None (ok) or its one-line error."""
    out: dict[str, str | None] = {}
    if label == "sweep":
        if not isinstance(doc, dict):
            return out
        # a sweep's verdict per server: its bmc.reachable finding (or none: read)
        reach = {f["target"]: f["message"] for f in (doc.get("new") or []) + (doc.get("persisting") or [])
                 if f.get("kind") == "server" and f.get("check") == "bmc.reachable"}  # fmt: skip
        counted = sum((doc.get("targets_by_status") or {}).values())
        if counted == len(names):
            out = {n: reach.get(n) for n in names}
        return out
    if not isinstance(doc, list):
        return out
    for row in doc:
        if isinstance(row, dict) and "server" in row:
            out[row["server"]] = None if row.get("error") is None and row.get("ok", True) is not False else str(row.get("error"))
    return out


def judge(label: str, verdicts: dict[str, str | None], doc: Any, fault_of: dict[str, str], healthy: list[str],
          specs: dict[str, Any], truth_power: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    classes = Counter(classify(v) for v in verdicts.values())
    faulty_right = sum(1 for n, k in fault_of.items() if n in verdicts and classify(verdicts[n]) == EXPECTED[k])
    wrong = [f"{n} ({fault_of[n]}): {verdicts.get(n)}" for n in fault_of if classify(verdicts.get(n)) != EXPECTED[fault_of[n]]]
    rows = {r["server"]: r for r in doc if isinstance(r, dict) and "server" in r} if isinstance(doc, list) else {}
    findings: dict[str, list[str]] = {}
    if label == "sweep" and isinstance(doc, dict):
        for f in (doc.get("new") or []) + (doc.get("persisting") or []):
            findings.setdefault(f["target"], []).append(f"{f['check']} {f['status']}")
    right = 0
    bad: list[str] = []
    for n in healthy:
        spec = specs[n]
        r = rows.get(n, {})
        if label == "power status":
            ok = r.get("ok") is True and r.get("power") == truth_power[n]
        elif label == "server inspect":
            ok = (r.get("ok") is True and r.get("serial") == spec.serial and str(r.get("boards")).split("/")[0] == str(len(spec.boards))
                  and not r.get("drift"))  # fmt: skip
        elif label == "server health":
            ok = r.get("ok") is True and not r.get("problems") and r.get("bmc_firmware") == spec.firmware.get("BMC")
        else:
            ok = n in verdicts and not findings.get(n)
        right += ok
        if not ok and len(bad) < 5:
            bad.append(f"{n}: {r or findings.get(n)}")
    slowest = max((float(r["elapsed"]) for r in rows.values() if isinstance(r.get("elapsed"), (int, float))), default=None)
    return {"classes": classes, "n_verdicts": len(verdicts), "slowest": slowest, "faulty_right": faulty_right, "faulty_n": len(fault_of),
            "wrong": wrong, "healthy_right": right, "healthy_n": len(healthy), "bad": bad}  # fmt: skip


def report(label: str, m: dict[str, Any], total: int) -> None:
    c = m["classes"]
    say(f"  targets {total:,}, verdicts {m['n_verdicts']:,}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    say(f"  exit {m['rc']}, traceback {'YES' if m['traceback'] else 'none'}; wall {m['wall']:.1f} s; per-target timeout "
        f"{m['per_target']:g} s; bound (wall - per-target timeout) {m['bound']:.1f} s; load {m['load']}")  # fmt: skip
    if m.get("slowest") is not None:
        say(f"  the slowest target took {m['slowest']:.1f} s (its own elapsed, login to logout)")
    say(f"  faulty BMCs named with the right reason: {m['faulty_right']} of {m['faulty_n']}; "
        f"healthy BMCs' answers right: {m['healthy_right']} of {m['healthy_n']}")  # fmt: skip
    for w in m["wrong"][:5]:
        say(f"    wrong reason: {w[:300]}")
    for n, v in [(n, v) for n, v in m["verdicts"].items() if classify(v) == "other"][:5]:
        say(f"    other: {n}: {str(v)[:300]}")
    for b in m["bad"]:
        say(f"    healthy but not right: {str(b)[:300]}")
    if m["doc"] is None:
        say(f"  no JSON on stdout; stderr: {m['stderr'][-1500:]}")


if __name__ == "__main__":
    sys.exit(main())
