#!/usr/bin/env python3
"""Inventory benchmark: a 10,000-server site through the real CLI.

Generates a site of 10,000 servers (40,000 MN-Core boards, ~750 switches,
full cabling) as YAML, imports it into a fresh SQLite store with `fleetctl`,
then times a filtered `server list --rack`, `rack show`, `--help`, and an
idempotent re-import. Every figure is a separate `fleetctl` process, measured
with os.wait4 (wall time and that process's own peak RSS). Prints figures and
the issue's targets; it asserts nothing.

    python bench/inventory.py [--servers 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def fleetctl_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("fleetctl")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "fleetctl.cli.app"]


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit code) of one fleetctl process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*fleetctl_cmd(), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"fleetctl {' '.join(args)} failed ({proc.returncode}): {err}")
    return wall, usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--servers", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleetctl-bench-") as tmp:
        site = Path(tmp) / "fleet.yaml"
        t0 = time.perf_counter()
        # Generated in a child process: Linux carries a parent's peak RSS into
        # the children it forks, so a big parent would inflate every figure below.
        with site.open("w") as out:
            subprocess.run([sys.executable, "-m", "fleetctl_lab.sitegen", "fleet", "--servers", str(args.servers)],
                           stdout=out, check=True, cwd=REPO)  # fmt: skip
        gen = time.perf_counter() - t0
        text = site.read_text()
        racks = text.count("\n  - name: rack-")
        switches = text.count("platform: ")
        boards = text.count("slot: ")
        cables = text.count("vlans: ")
        del text
        env = {**os.environ, "FLEETCTL_DB": str(Path(tmp) / "bench.db"), "FLEETCTL_DATA_DIR": tmp}
        print(f"site: {args.servers} servers, {boards} boards, {switches} switches, {racks} racks, {cables} cables; "
              f"{site.stat().st_size / 1e6:.1f} MB of YAML (generated in {gen:.1f} s)")  # fmt: skip

        imp_wall, imp_rss, _ = run(["inventory", "import", str(site)], env)
        re_wall, re_rss, _ = run(["inventory", "import", str(site)], env)
        rack = "rack-120" if racks > 120 else "rack-01"
        lists = [run(["server", "list", "--rack", rack, "--output", "json"], env) for _ in range(args.repeat)]
        shows = [run(["rack", "show", rack], env) for _ in range(args.repeat)]
        helps = [run(["--help"], env) for _ in range(args.repeat)]

    def med(xs: list[tuple[float, float, int]], i: int = 0) -> float:
        return statistics.median(x[i] for x in xs)

    rows = [
        ("import (fresh store)", f"{imp_wall:.2f} s", "<= 15 s", imp_wall <= 15),
        ("peak memory of import", f"{imp_rss:.0f} MB", "<= 300 MB", imp_rss <= 300),
        ("re-import, nothing to change", f"{re_wall:.2f} s ({re_rss:.0f} MB)", "-", None),
        (f"server list --rack {rack}", f"{med(lists):.3f} s (median of {args.repeat})", "<= 0.5 s", med(lists) <= 0.5),
        (f"rack show {rack}", f"{med(shows):.3f} s (median of {args.repeat})", "-", None),
        ("fleetctl --help", f"{med(helps):.3f} s (median of {args.repeat})", "<= 0.3 s", med(helps) <= 0.3),
        ("peak memory of list / show", f"{med(lists, 1):.0f} / {med(shows, 1):.0f} MB", "-", None),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'figure'.ljust(width)}  {'measured':<32} {'target':<10} verdict")
    for name, value, target, ok in rows:
        verdict = "" if ok is None else ("met" if ok else "MISSED")
        print(f"{name.ljust(width)}  {value:<32} {target:<10} {verdict}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
