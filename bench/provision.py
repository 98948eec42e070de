#!/usr/bin/env python3
"""Provisioning benchmark (issue 5): a 40-server lab rack with a 30 s install.

A generated site: rack-01 holds 40 1U MN-Core servers (4 boards each, board
firmware one version below the baseline, so every server flashes 4
components), two leaves and a management switch; rack-02 holds one more
server. The lab serves all of it: HTTPS BMCs, SSH switches, and hosts that
install for ``--install-time`` seconds after their PXE boot and are then
configured by the real playbooks over SSH.

1. ``fleetctl provision s01/rack-02``: one server alone. Its makespan is a
   server's own time, with nothing else running (no stagger, no sharing).
2. ``fleetctl provision s01/rack-01``: the 40 servers.

Prints the makespan, the slowest server's own time (alone, and the slowest
per-server elapsed inside the rack run), the stagger the rack run needed,
fleetctl's CPU per server (its own process: Ansible's child processes are
not in it, and the thread reading Ansible's events is subtracted), Ansible's
CPU for information, and the targets with met/MISSED. Asserts nothing.

    python bench/provision.py [--servers 40] [--install-time 30] [--stagger 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FLEETCTL = [sys.executable, "-m", "fleetctl"]


def site(servers: int) -> dict[str, Any]:
    from fleetctl_lab.sitegen import fleet

    doc = fleet(servers + 1, per_rack=servers)
    s = doc["sites"][0]
    s["provisioning"] = {
        "vlan": 200, "boot": "pxe", "firmware_images": "https://fw.lab.example/firmware", "install_timeout": 900,
        "k8s": {"endpoint": "k8s-api.lab.example:6443", "token": "env:BENCH_K8S_TOKEN", "ca_cert_hash": "sha256:" + "ab" * 32},
    }  # fmt: skip
    for rack in s["racks"]:
        if rack.get("servers"):
            rack["power_budget"] = 1500 * len(rack["servers"]) + 1000
        for srv in rack.get("servers", []):
            for b in srv.get("boards", []):
                b["firmware"] = {k: "0.9.6" for k in (b.get("firmware") or {"mncore2-board": ""})}
    return doc


def run(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*FLEETCTL, *args], env=env, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        sys.exit(f"fleetctl {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done


def provision(target: str, env: dict[str, str], stagger: float, poll: float) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    done = run("provision", target, "--stagger", str(stagger), "--poll", str(poll), "--output", "json", env=env, check=False)
    wall = time.monotonic() - t0
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        sys.exit(f"provision {target}: no JSON ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return doc, wall


def lab_db(out: str) -> str:
    """The lab's database, from the `export FLEETCTL_DB=...` line `fleetctl lab up` ends with."""
    import shlex

    lines = [x for x in out.splitlines() if x.startswith("export FLEETCTL_DB=")]
    if not lines:
        sys.exit(f"lab up printed no `export FLEETCTL_DB=` line: {out.strip()[-500:]}")
    return shlex.split(lines[-1].removeprefix("export "))[0].partition("=")[2]


def daemon_cpu(lab_dir: Path) -> tuple[float, float]:
    """(the lab daemon's own CPU seconds, its finished children's: the simulated hosts' commands)."""
    try:
        pid = json.loads((lab_dir / "lab.json").read_text())["pid"]
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick
    except (OSError, ValueError, KeyError, IndexError):
        return float("nan"), float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", type=int, default=40)
    ap.add_argument("--install-time", type=float, default=30.0)
    ap.add_argument("--firmware-time", type=float, default=2.0)
    ap.add_argument("--power-transition", type=float, default=2.0)
    ap.add_argument("--stagger", type=float, default=1.0, help="seconds between two power-ons in the rack")
    ap.add_argument("--poll", type=float, default=1.0)
    a = ap.parse_args()

    import yaml

    with tempfile.TemporaryDirectory(prefix="fleetctl-bench-") as tmp:
        t = Path(tmp)
        env = dict(os.environ, FLEETCTL_DATA_DIR=str(t / "data"), FLEETCTL_DB=str(t / "fleet.db"), FLEETCTL_LAB_DIR=str(t / "lab"),
                   BENCH_K8S_TOKEN="benchx.0123456789abcdef", PYTHONPATH=str(ROOT))  # fmt: skip
        (t / "site.yaml").write_text(yaml.safe_dump(site(a.servers), sort_keys=False))
        run("inventory", "import", str(t / "site.yaml"), env=env)
        t0 = time.monotonic()
        up = run("lab", "up", "--install-time", str(a.install_time), "--firmware-time", str(a.firmware_time),
                 "--power-transition", str(a.power_transition), env=env)  # fmt: skip
        # The lab is a fleet of its own: provision works on the lab's database, as its last line says.
        env["FLEETCTL_DB"] = lab_db(up.stdout)
        print(f"lab up: {a.servers + 1} BMCs, hosts and 3+3 switches in {time.monotonic() - t0:.1f} s", flush=True)
        try:
            solo, _ = provision("s01/rack-02", env, a.stagger, a.poll)
            bad = [r for r in solo["servers"] if r["result"] != "ready"]
            if bad:
                sys.exit(f"the solo server did not reach ready: {bad}")
            print(f"one server alone: {solo['makespan_s']:.1f} s", flush=True)
            rack, rack_wall = provision("s01/rack-01", env, a.stagger, a.poll)
            print(json.dumps({k: v for k, v in rack.items() if k != "servers"}), flush=True)
            lab_cpu = daemon_cpu(t / "lab")
        finally:
            run("lab", "down", env=env, check=False)
    rows = rack["servers"]
    ready = sum(1 for r in rows if r["result"] == "ready")
    n = len(rows)
    solo_time = solo["makespan_s"]
    # A server's own time: its steps' durations minus what it waited for on shared things
    # (a power slot, a switch session, an Ansible batch to start).
    own = max(r["own_s"] for r in rows)
    slowest_in_run = max(r["elapsed"] for r in rows)
    stagger_total = a.stagger * (n - 1)
    target = 1.25 * own + stagger_total
    target_solo = 1.25 * solo_time + stagger_total
    fleet_cpu = rack["process_cpu_s"] - rack["ansible_runner_cpu_s"]
    per_server = fleet_cpu / n
    print()
    print(f"provision of {n} servers (install {a.install_time:.0f} s, firmware {a.firmware_time:.0f} s per component, "
          f"power transition {a.power_transition:.0f} s, stagger {a.stagger:g} s), "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"  servers ready                   {ready}/{n}")
    print(f"  makespan                        {rack['makespan_s']:.1f} s  (process wall {rack_wall:.1f} s)")
    print(f"  slowest server's own time       {own:.1f} s  (steps minus waits for power slots, switch sessions, Ansible batches)")
    print(f"  slowest server's elapsed        {slowest_in_run:.1f} s")
    print(f"  one server alone (no sharing)   {solo_time:.1f} s")
    print(f"  power-on stagger ({n - 1} x {a.stagger:g} s)  {stagger_total:.1f} s")
    print(f"  ansible batches                 {rack['ansible_batches']}  switch sessions {rack['switch_sessions']}")
    print(f"  fleetctl CPU                    {fleet_cpu:.2f} s = {per_server:.3f} s per server "
          f"(process {rack['process_cpu_s']:.2f} s, minus {rack['ansible_runner_cpu_s']:.2f} s reading Ansible's events)")  # fmt: skip
    print(f"  Ansible CPU (child processes)   {rack['children_cpu_s']:.1f} s = {rack['children_cpu_s'] / n:.2f} s per server (not counted)")
    print(f"  lab CPU                         daemon {lab_cpu[0]:.1f} s (BMCs, switches, SSH of the hosts); "
          f"commands run on the simulated hosts (Ansible's modules) {lab_cpu[1]:.1f} s")  # fmt: skip
    print()
    ok1 = rack["makespan_s"] <= target
    ok2 = per_server <= 0.5
    print(f"  target: makespan <= 1.25 x {own:.1f} + {stagger_total:.1f} = {target:.1f} s   "
          f"{rack['makespan_s']:.1f} s ({rack['makespan_s'] / (own + stagger_total):.2f}x own+stagger)  "
          f"{'met' if ok1 else 'MISSED'}")  # fmt: skip
    ok3 = rack["makespan_s"] <= target_solo
    print(f"  the same against one server alone: <= 1.25 x {solo_time:.1f} + {stagger_total:.1f} = {target_solo:.1f} s   "
          f"{'met' if ok3 else 'MISSED'}")  # fmt: skip
    print(f"  target: <= 0.5 CPU s per server                {per_server:.3f} s  {'met' if ok2 else 'MISSED'}")


if __name__ == "__main__":
    main()
