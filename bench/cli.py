#!/usr/bin/env python3
"""CLI start-up benchmark: wall time of `fleetctl --help` and `fleetctl server list --help`.

Each run is a fresh `fleetctl` process (the installed entry point, else
`python -m fleetctl.cli.app`), output discarded. Prints the median and max of
--repeat runs per command line (the target: `fleetctl --help` under 0.3 s on
2 cores); it asserts nothing.

    python bench/cli.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = [["--help"], ["server", "list", "--help"]]


def fleetctl_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("fleetctl")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "fleetctl.cli.app"]


def wall(args: list[str]) -> float:
    """Seconds one `fleetctl ARGS` process took, start to exit."""
    t0 = time.perf_counter()
    subprocess.run([*fleetctl_cmd(), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    print(f"{'command':<32} {'median':>8} {'max':>8}  ({args.repeat} runs each)")
    for words in COMMANDS:
        wall(words)  # warm the page cache and the bytecode
        times = [wall(words) for _ in range(args.repeat)]
        print(f"{'fleetctl ' + ' '.join(words):<32} {statistics.median(times):>7.3f}s {max(times):>7.3f}s")


if __name__ == "__main__":
    main()
