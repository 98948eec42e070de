"""`make demo`: the main job on the embedded default, command by command.

Runs the real `fleetctl` CLI against a SQLite inventory of its own (in the
user's data folder, so it never touches a real inventory) and prints each
command before its output, so the demo doubles as a tour.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _fleetctl() -> list[str]:
    exe = Path(sys.executable).with_name("fleetctl")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "fleetctl.cli.app"]


def step(title: str) -> None:
    print(f"\n\033[1;34m== {title}\033[0m", flush=True)


def sh(*args: str, env: dict[str, str], expect: int = 0, tail: int | None = None) -> str:
    print(f"\033[1m$ fleetctl {' '.join(args)}\033[0m", flush=True)
    done = subprocess.run([*_fleetctl(), *args], env=env, capture_output=True, text=True, check=False)
    out = done.stdout + done.stderr
    lines = out.rstrip("\n").splitlines()
    if tail is not None and len(lines) > tail:
        print(f"  ... ({len(lines) - tail} lines above)")
        lines = lines[-tail:] if tail else []
    print("\n".join(lines), flush=True)
    if done.returncode != expect:
        print(f"demo: expected exit code {expect}, got {done.returncode}", file=sys.stderr)
        raise SystemExit(1)
    if expect:
        print(f"(exit code {done.returncode}, as expected)")
    return done.stdout


def main() -> None:
    from fleetctl.config import data_dir

    demo_dir = data_dir() / "demo"
    demo_dir.mkdir(parents=True, exist_ok=True)
    db = demo_dir / "fleetctl.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    env = {**os.environ, "FLEETCTL_DB": str(db), "FLEETCTL_ACTOR": os.environ.get("USER", "demo") + "@demo", "COLUMNS": "160"}
    inventory = REPO / "inventory"

    step("1. Plan the import of the example site (a dry run changes nothing)")
    sh("inventory", "import", str(inventory), "--dry-run", env=env, tail=6)
    step("2. Import it, all or nothing; a second import changes nothing")
    sh("inventory", "import", str(inventory), "--reason", "initial load", env=env, tail=3)
    sh("inventory", "import", str(inventory), env=env)
    step("3. What is in it")
    sh("site", "list", env=env)
    sh("rack", "list", env=env)
    sh("rack", "show", "rack-12", env=env)
    sh("server", "list", "--rack", "rack-12", "--tag", "mncore2", env=env)
    sh("server", "show", "mn-tyo1-r12-01", env=env)
    sh("switch", "show", "leaf-tyo1-r12-a", env=env, tail=8)

    step("4. Bad input is refused with the file, line and field; the inventory is untouched")
    with tempfile.TemporaryDirectory() as tmp:
        broken = Path(tmp) / "site-tyo1.yaml"
        text = (inventory / "site-tyo1.yaml").read_text()
        # Put the second MN-Core server of rack-12 onto the first one's units.
        bmc_line = "\n      bmc: https://mn-tyo1-r12-02-bmc"
        broken.write_text(text.replace("position: 3" + bmc_line, "position: 2" + bmc_line, 1))
        shutil.copy(inventory / "site-tyo1.yaml", Path(tmp) / "original.yaml")
        sh("inventory", "import", str(broken), env=env, expect=2)
    sh("server", "add", "mn-tyo1-r12-99", "--rack", "rack-12", "--position", "45", "--model", "mn-server-2",
       "--serial", "MNS0101245", "--credential", "env:BMC_TYO1", env=env, expect=2)  # fmt: skip

    step("5. Edits go through the same checks, and the audit log records who and why")
    sh("server", "add", "mn-tyo1-r13-09", "--rack", "rack-13", "--position", "17", "--model", "mn-server-2",
       "--serial", "MNS0101317", "--bmc", "https://mn-tyo1-r13-09-bmc.oob.tyo1.example", "--credential", "env:BMC_TYO1",
       "--nic", "eth0=02:fc:01:0d:11:01", "--tag", "mncore2", "--reason", "new node racked", env=env)  # fmt: skip
    sh("board", "set", "MN2B-01012010", "--state", "suspect", "--reason", "ECC errors seen", env=env)
    sh("events", "list", "--limit", "5", env=env)

    step("6. The lab: a simulated BMC per server (HTTPS, its own certificate each), every switch, and the hosts")
    print("The lab is a fleet of its own: it serves the demo fleet's servers and switches on its own addresses,")
    print("writes that fleet into its own database, and says how to point the CLI at it.")
    env["FLEETCTL_LAB_DIR"] = str(demo_dir / "lab")
    # The example site's Kubernetes join token is `env:FLEETCTL_K8S_TOKEN`; the lab's kubeadm takes any well-formed one.
    env.setdefault("FLEETCTL_K8S_TOKEN", "demo00.0123456789abcdef")
    subprocess.run([*_fleetctl(), "lab", "down"], env=env, capture_output=True, check=False)
    try:
        up = sh("lab", "up", "--power-transition", "1", "--firmware-time", "0.5", "--install-time", "20", env=env)
        export = [line for line in up.splitlines() if line.startswith("export FLEETCTL_DB=")][-1]
        env["FLEETCTL_DB"] = shlex.split(export.removeprefix("export "))[0].partition("=")[2]
        print(f"\033[1m$ {export}\033[0m")
        sh("server", "inspect", "rack-12", env=env, tail=6)
        sh("firmware", "list", "gpu-tyo1-r12-17", env=env, tail=4, expect=1)  # the GPUs are off their vbios baseline

        step("7. Provision rack-12: firmware, BIOS, provisioning VLAN, PXE install, production VLANs, Ansible, board check")
        print("The plan first; a dry run reads the BMCs and switches and changes nothing:")
        sh("provision", "rack-12", "--dry-run", env=env, tail=10)
        print("\nOne server's host will come up with a board missing (a loose card); the rest must not care:")
        sh("lab", "fault", "mn-tyo1-r12-05", "--set", "device_missing=1", env=env, tail=0)
        sh("provision", "rack-12", "--stagger", "1", "--poll", "1", env=env, expect=1)
        sh("rack", "show", "rack-12", env=env, tail=24)
        sh("server", "show", "mn-tyo1-r12-05", env=env, tail=12)
        print("\nThe card is reseated; provisioning the server again resumes it (--restart reinstalls it from step 1):")
        sh("lab", "fault", "mn-tyo1-r12-05", "--clear", env=env, tail=0)
        sh("provision", "mn-tyo1-r12-05", "--restart", "--poll", "1", env=env)
        sh("provision", "rack-12", env=env, tail=4)  # everything ready: nothing to do
        sh("events", "list", "--name", "mn-tyo1-r12-05", "--limit", "6", env=env)

        step("8. Burn in rack-12's MN-Core boards: all at once, a verdict per board, a failing one sent to RMA")
        print("One board computes wrong results (a lab fault the burn-in program cannot know of):")
        sh("lab", "fault", "mn-tyo1-r12-04", "--board", "2", "--set", "fault=checksum", env=env, tail=0)
        sh("burnin", "--mncore", "rack-12", "--level", "quick", "--duration", "10", env=env, expect=5, tail=8)
        sh("board", "rma", "list", env=env)
        sh("server", "list", "--state", "maintenance", env=env, tail=3)
        burnin_report = demo_dir / "burnin.html"
        sh("burnin", "report", "--html", str(burnin_report), env=env)
        print(f"(open {burnin_report}: every board's verdict, why, and its temperatures through the run)")

        step("9. The morning health sweep: every BMC and switch, judged and remembered")
        print("The first sweep of a fleet: every problem is new. The GPU servers run a newer vbios than the baseline,")
        print("and the server racked in step 5 shows none of the four boards its model holds (none was recorded):")
        sh("sweep", env=env, expect=5, tail=8)

        step("10. Day two: drift, a failing BMC, a swapped cable")
        sh("lab", "fault", "mn-tyo1-r13-05", "--set", "error_rate=1", env=env)
        sh("board", "remove", "MN2B-01013031", "--reason", "demo: pretend the record was lost", env=env, tail=1)
        sh("server", "inspect", "mn-tyo1-r13-02", "mn-tyo1-r13-04", "mn-tyo1-r13-05", env=env, expect=1)
        sh("switch", "verify-cabling", "rack-12", env=env)
        print("\nSomeone swaps two cables and a link starts taking CRC errors:")
        sh("lab", "fault", "leaf-tyo1-r12-a", "--port", "Ethernet3", "--set", "miscabled=true", env=env, tail=0)
        sh("lab", "fault", "leaf-tyo1-r12-a", "--port", "Ethernet8", "--set", "crc=120", env=env, tail=0)
        sh("switch", "verify-cabling", "leaf-tyo1-r12-a", env=env, expect=1)
        sh("switch", "poll", "leaf-tyo1-r12-a", "--interval", "2", env=env, expect=1)
        print("\nA PSU fails and a card's link trains at half width; the next sweep says what is new since yesterday:")
        sh("lab", "fault", "mn-tyo1-r12-03", "--set", "psu_failed=true", env=env, tail=0)
        sh("lab", "fault", "mn-tyo1-r12-07", "--set", "pcie_degraded=true", env=env, tail=0)
        sh("sweep", "--timeout", "10", env=env, expect=5, tail=16)
        sh("finding", "ack", "mn-tyo1-r12-07:accel.pcie", "--reason", "reseat booked for Thursday", "--until", "7d", env=env)
        sh("sweep", "diff", env=env, tail=12)
        report = demo_dir / "report.html"
        sh("report", "--html", str(report), env=env)
        print(f"(open {report} in a browser: rack elevations by health, each server's findings on click)")
    finally:
        subprocess.run([*_fleetctl(), "lab", "down"], env=env, capture_output=True, check=False)
        env["FLEETCTL_DB"] = str(db)
    print(f"\n\033[1m$ export FLEETCTL_DB={db}\033[0m   # back to the demo fleet: the lab's work stayed in the lab's database")

    step("11. Export: the same site files back, byte for byte")
    first = sh("inventory", "export", "--output", "json", env=env, tail=0)
    print(f"({len(first.splitlines())} lines of JSON)")

    step("12. Ansible sees the fleet grouped by site, rack, role, state and accelerator")
    ansible_inventory = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or shutil.which("ansible-inventory")
    script = inventory / "fleetctl.py"
    if ansible_inventory and script.exists():
        print("\033[1m$ ansible-inventory -i inventory/fleetctl.py --graph accel_mncore2\033[0m", flush=True)
        done = subprocess.run([ansible_inventory, "-i", str(script), "--graph", "accel_mncore2"], env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        lines = done.stdout.splitlines()
        print("\n".join(lines[:8] + ([f"  ... ({len(lines) - 8} more)"] if len(lines) > 8 else [])))
    else:
        print("(ansible-inventory not found; skipped)")

    print(f"\nThe demo inventory stays in {db}; explore it with:\n  export FLEETCTL_DB={db}\n  fleetctl --help")


if __name__ == "__main__":
    main()
