"""`make demo`: the main job on the embedded default, command by command.

Runs the real `fleetctl` CLI against a SQLite inventory of its own and prints
each command before its output, so the demo doubles as a tour. Everything it
writes (its database, the lab, Ansible's run folders, reports) stays in its own
folder, ``<data folder>/demo``: the fleetctl it runs gets that folder as its
data folder (FLEETCTL_DATA_DIR), so it never touches a real inventory.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetctl.config import data_dir
from fleetctl.inventory.render import to_document
from fleetctl.inventory.schema import SiteFile
from fleetctl.term import use_color

REPO = Path(__file__).resolve().parents[1]


def _fleetctl() -> list[str]:
    exe = Path(sys.executable).with_name("fleetctl")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "fleetctl.cli.app"]


def _styled(text: str, sgr: str = "1") -> str:
    """``text`` in bold (or the SGR given) on a terminal; plain into a file or a pipe, or under NO_COLOR (`make demo > log`)."""
    return f"\033[{sgr}m{text}\033[0m" if use_color(sys.stdout) else text


def step(title: str) -> None:
    print("\n" + _styled(f"== {title}", "1;34"), flush=True)


def sh(
    *args: str, env: dict[str, str], expect: int = 0, tail: int | None = None, live: bool = False, progress: Callable[[], str] | None = None
) -> str:
    """Run ``fleetctl ARGS``, print its output (the last ``tail`` lines), check its exit code.

    ``live``: for the long commands (provision, burn-in, sweep). Their progress
    (a live table or bar on stderr) goes straight to the terminal as it comes;
    their result (stdout) is printed as each line arrives. Where stderr is not a
    terminal (`make demo | tee`), fleetctl draws no progress, so a heartbeat
    line says every few seconds that the command is still at work, and
    ``progress()`` where given (the servers' states, read from the database).
    """
    print(_styled(f"$ fleetctl {' '.join(args)}"), flush=True)
    if live:
        return _live(args, env=env, expect=expect, tail=tail, progress=progress)
    done = subprocess.run([*_fleetctl(), *args], env=env, capture_output=True, text=True, check=False)
    out = done.stdout + done.stderr
    lines = out.rstrip("\n").splitlines()
    if tail is not None and len(lines) > tail:
        print(f"  ... ({len(lines) - tail} lines above)")
        lines = lines[-tail:] if tail else []
    print("\n".join(lines), flush=True)
    _check(done.returncode, expect)
    return done.stdout


def _check(code: int, expect: int) -> None:
    if code != expect:
        print(f"demo: expected exit code {expect}, got {code}", file=sys.stderr)
        raise SystemExit(1)
    if expect:
        print(f"(exit code {code}, as expected)")


HEARTBEAT_S = 10.0


def _live(args: tuple[str, ...], *, env: dict[str, str], expect: int, tail: int | None, progress: Callable[[], str] | None) -> str:
    """``sh(live=True)``: stderr passes through, stdout is echoed line by line (a long table cut to ``tail``)."""
    started = time.monotonic()
    last = [started]
    done = threading.Event()
    proc = subprocess.Popen([*_fleetctl(), *args], env=env, stdout=subprocess.PIPE, stderr=None, text=True, bufsize=1)

    def heartbeat() -> None:
        while not done.wait(1.0):
            now = time.monotonic()
            if now - last[0] >= HEARTBEAT_S:
                last[0] = now
                where = progress() if progress else ""
                print(f"  ... fleetctl {args[0]} still at work, {now - started:.0f} s{': ' + where if where else ''}", flush=True)

    beat = None if sys.stderr.isatty() else threading.Thread(target=heartbeat, daemon=True)
    if beat:
        beat.start()
    lines: list[str] = []
    shown = 0
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            last[0] = time.monotonic()
            # The result table comes at the end: hold back all but its last `tail` lines.
            if tail is None:
                print(lines[-1], flush=True)
                shown += 1
        code = proc.wait()
    finally:
        done.set()
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    if tail is not None:
        rest = lines[-tail:] if tail else []
        if len(lines) > len(rest):
            print(f"  ... ({len(lines) - len(rest)} lines above)")
        print("\n".join(rest), flush=True)
    print(f"({time.monotonic() - started:.0f} s)", flush=True)
    _check(code, expect)
    return "\n".join(lines) + "\n"


def server_states(db: str, *, rack: str | None = None, server: str | None = None) -> str:
    """The servers' lifecycle states in a SQLite fleet, counted ("3 ready, 15 preparing, 1 failed"); "" if it cannot be read."""
    import sqlite3

    query = "SELECT s.state, count(*) FROM server s JOIN rack r ON r.id = s.rack_id WHERE r.name = ? OR s.name = ? GROUP BY s.state"
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            rows = conn.execute(query, (rack, server)).fetchall()
    except sqlite3.Error:
        return ""
    return ", ".join(f"{n} {state}" for state, n in sorted(rows, key=lambda r: -r[1]))


def _key(item: Any) -> str | None:
    if isinstance(item, dict):
        for k in ("name", "serial"):
            if isinstance(item.get(k), str):
                return str(item[k])
    return None


def differences(a: Any, b: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """Where two site documents differ, as (path, what): lists of named items are compared by name (boards by serial)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[tuple[tuple[str, ...], str]] = []
        for k in sorted(set(a) | set(b), key=str):
            p = (*path, str(k))
            if k not in b:
                out.append((p, f"only in the original: {_short(a[k])}"))
            elif k not in a:
                out.append((p, f"only in the export: {_short(b[k])}"))
            else:
                out += differences(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list):
        ka, kb = [_key(x) for x in a], [_key(x) for x in b]
        if None not in ka and None not in kb and len(set(ka)) == len(ka) and len(set(kb)) == len(kb):
            return differences(dict(zip(ka, a, strict=True)), dict(zip(kb, b, strict=True)), (*path, "*"))
        ca = sorted(json.dumps(x, sort_keys=True, default=str) for x in a)
        cb = sorted(json.dumps(x, sort_keys=True, default=str) for x in b)
        gone, new = [x for x in ca if x not in cb], [x for x in cb if x not in ca]
        return [(path, f"only in the original: {x[:100]}") for x in gone] + [(path, f"only in the export: {x[:100]}") for x in new]
    return [] if a == b else [(path, f"{_short(a)} -> {_short(b)}")]


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 100 else text[:97] + "..."


def compare_export(original: Path, exported: Path) -> list[str]:
    """The differences between two site files read through the schema (defaults filled in), grouped by kind.

    A difference repeated across many items (a field every board's export
    writes out) is one line with a count, the first place it occurs as example.
    """
    import yaml

    def read(p: Path) -> Any:
        return to_document(SiteFile.model_validate(yaml.safe_load(p.read_text())))

    groups: dict[tuple[tuple[str, ...], str], list[str]] = {}
    for path, what in differences(read(original), read(exported)):
        shape = tuple("*" if i and path[i - 1] == "*" else part for i, part in enumerate(path))
        kind = what.split(":", 1)[0] if what.startswith("only in") else "changed"
        named = ".".join(p for p in path if p != "*")
        groups.setdefault((shape, kind), []).append(f"{named}: {what}")
    out = []
    for (_, _), items in groups.items():
        if len(items) <= 3:
            out += items
        else:
            out.append(f"{items[0]}  (and {len(items) - 1} more like it)")
    return out


def main() -> None:
    demo_dir = data_dir() / "demo"
    demo_dir.mkdir(parents=True, exist_ok=True)
    db = demo_dir / "fleetctl.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    env = {**os.environ, "FLEETCTL_DB": str(db), "FLEETCTL_ACTOR": os.environ.get("USER", "demo") + "@demo", "COLUMNS": "160",
           # The demo folder is the data folder of the fleetctl it runs: Ansible's run folders, the known_hosts of
           # the lab's hosts and the run records of provisioning go there, never into the user's own data folder;
           # and Ansible keeps its own files (~/.ansible: temporary files, SSH control sockets) there too.
           "FLEETCTL_DATA_DIR": str(demo_dir), "ANSIBLE_HOME": str(demo_dir / "ansible")}  # fmt: skip
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
        print(_styled(f"$ {export}"))
        sh("server", "inspect", "rack-12", env=env, tail=6)
        sh("firmware", "list", "gpu-tyo1-r12-17", env=env, tail=4, expect=1)  # the GPUs are off their vbios baseline
        print("\nThe lab's Kubernetes API stand-in: the site's cluster (the lab's fleet points it there). A server becomes")
        print("a node when provisioning joins it (kubeadm join), and gang-scheduled training pods land on it:")
        sh("lab", "k8s", "up", "--joined-only", "--pods-per-node", "2", "--gang-size", "4", env=env, tail=0)

        step("7. Provision rack-12: firmware, BIOS, provisioning VLAN, PXE install, production VLANs, Ansible, board check")
        print("The plan first; a dry run reads the BMCs and switches and changes nothing:")
        sh("provision", "rack-12", "--dry-run", env=env, tail=10)
        print("\nOne server's host will come up with a board missing (a loose card); the rest must not care:")
        sh("lab", "fault", "mn-tyo1-r12-05", "--set", "device_missing=1", env=env, tail=0)
        lab_db = env["FLEETCTL_DB"]
        sh("provision", "rack-12", "--stagger", "1", "--poll", "1", env=env, expect=1, live=True,
           progress=lambda: server_states(lab_db, rack="rack-12"))  # fmt: skip
        sh("rack", "show", "rack-12", env=env, tail=24)
        sh("server", "show", "mn-tyo1-r12-05", env=env, tail=12)
        print("\nThe card is reseated; provisioning the server again resumes it (--restart reinstalls it from step 1):")
        sh("lab", "fault", "mn-tyo1-r12-05", "--clear", env=env, tail=0)
        sh("provision", "mn-tyo1-r12-05", "--restart", "--poll", "1", env=env, live=True,
           progress=lambda: server_states(lab_db, server="mn-tyo1-r12-05"))  # fmt: skip
        sh("provision", "rack-12", env=env, tail=4)  # everything ready: nothing to do
        sh("events", "list", "--name", "mn-tyo1-r12-05", "--limit", "6", env=env)

        step("8. Burn in rack-12's MN-Core boards: all at once, a verdict per board, a failing one sent to RMA")
        print("One board computes wrong results (a lab fault the burn-in program cannot know of):")
        sh("lab", "fault", "mn-tyo1-r12-04", "--board", "2", "--set", "fault=checksum", env=env, tail=0)
        sh("burnin", "--mncore", "rack-12", "--level", "quick", "--duration", "10", env=env, expect=5, tail=8, live=True)
        sh("board", "rma", "list", env=env)
        sh("server", "list", "--state", "maintenance", env=env, tail=3)
        burnin_report = demo_dir / "burnin.html"
        sh("burnin", "report", "--html", str(burnin_report), env=env)
        print(f"(open {burnin_report}: every board's verdict, why, and its temperatures through the run)")

        step("8b. Kubernetes: the servers are nodes; disrupting one in service drains it first, through the cluster")
        sh("k8s", "status", "mn-tyo1-r12-01", "mn-tyo1-r12-02", env=env, tail=12)
        print("\nmn-tyo1-r12-01 goes into service: training pods run on it. Burning it in again now cordons its node and")
        print("evicts its pods through the Eviction API; its gang's PodDisruptionBudget refuses for a few seconds (a")
        print("replacement still starting elsewhere), so the drain waits; then the burn-in, then the node is uncordoned:")
        sh("server", "set-state", "mn-tyo1-r12-01", "in-service", "--reason", "demo: handed to the training cluster", env=env, tail=0)
        on_it = json.loads(sh("k8s", "status", "mn-tyo1-r12-01", "-o", "json", env=env, tail=0))[0]["pods"]
        gang = next(b for p in on_it for b in p["budgets"])  # the budget of its gang's pods
        sh("lab", "k8s", "fault", "--pdb", gang, "--seconds", "6", env=env, tail=0)
        sh("burnin", "--mncore", "mn-tyo1-r12-01", "--force", "--level", "quick", "--duration", "5", "--delete-emptydir-data",
           env=env, tail=6)  # fmt: skip
        sh("k8s", "status", "mn-tyo1-r12-01", env=env, tail=8)
        sh("events", "list", "--name", "mn-tyo1-r12-01", "--limit", "4", env=env)

        step("9. The morning health sweep: every BMC and switch, judged and remembered")
        print("The first sweep of a fleet: every problem is new. The GPU servers run a newer vbios than the baseline,")
        print("and the server racked in step 5 shows none of the four boards its model holds (none was recorded):")
        sh("sweep", "--publish", env=env, expect=5, tail=8, live=True)

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
        sh("sweep", "--publish", "--timeout", "10", env=env, expect=5, tail=16, live=True)
        print("\nOn a node in service, the MN-Core device plugin marks a board unhealthy: the node advertises 3 of the 4")
        print("boards the inventory holds. The Kubernetes-level sweep finds it, and its verdict reaches the scheduler: the")
        print("node's FleetctlHealthy condition turns False and a NoSchedule taint keeps new jobs off it:")
        sh("server", "set-state", "mn-tyo1-r12-06", "in-service", "--reason", "demo: handed to the training cluster", env=env, tail=0)
        sh("lab", "k8s", "fault", "--node", "mn-tyo1-r12-06", "--unhealthy", "1", env=env, tail=0)
        sh("sweep", "rack-12", "--level", "k8s", "--publish", env=env, expect=5, tail=6, live=True)
        sh("k8s", "status", "mn-tyo1-r12-06", env=env, tail=8)
        sh("finding", "ack", "mn-tyo1-r12-07:accel.pcie", "--reason", "reseat booked for Thursday", "--until", "7d", env=env)
        sh("sweep", "diff", env=env, tail=12)
        report = demo_dir / "report.html"
        sh("report", "--html", str(report), env=env)
        print(f"(open {report} in a browser: rack elevations by health, each server's findings on click)")
    finally:
        subprocess.run([*_fleetctl(), "lab", "k8s", "down"], env=env, capture_output=True, check=False)
        subprocess.run([*_fleetctl(), "lab", "down"], env=env, capture_output=True, check=False)
        env["FLEETCTL_DB"] = str(db)
    print("\n" + _styled(f"$ export FLEETCTL_DB={db}") + "   # back to the demo fleet: the lab's work stayed in the lab's database")

    step("11. Export: the site files back, compared with the ones imported in step 2")
    original = inventory / "site-tyo1.yaml"
    exported = demo_dir / "export" / "site-tyo1.yaml"
    exported.parent.mkdir(exist_ok=True)
    text = sh("inventory", "export", env=env, tail=0)
    exported.write_text(text)
    original_lines = len(original.read_text().splitlines())
    print(f"(written to {exported}: {len(text.splitlines())} lines; {original.relative_to(REPO)} has {original_lines})")
    print("The two compared as data (each read through the site-file schema, so a default written out or left")
    print("implicit, and the order of keys, make no difference); the export writes each board's kind, which the")
    print("example leaves to the model, and carries the edits of step 5:")
    diffs = compare_export(original, exported)
    print("\n".join(f"  {d}" for d in diffs) if diffs else "  identical")
    print("\nByte for byte: the export imported into a database of its own exports the same text again:")
    scratch = demo_dir / "roundtrip.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{scratch}{suffix}").unlink(missing_ok=True)
    renv = {**env, "FLEETCTL_DB": str(scratch)}
    sh("inventory", "import", str(exported), env=renv, tail=1)
    again = sh("inventory", "export", env=renv, tail=0)
    if again != text:
        print("demo: the second export differs from the first", file=sys.stderr)
        raise SystemExit(1)
    print(f"identical: {len(again.splitlines())} lines, {len(again.encode())} bytes")

    step("12. Ansible sees the fleet grouped by site, rack, role, state and accelerator")
    ansible_inventory = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or shutil.which("ansible-inventory")
    script = inventory / "fleetctl.py"
    if ansible_inventory and script.exists():
        print(_styled("$ ansible-inventory -i inventory/fleetctl.py --graph accel_mncore2"), flush=True)
        done = subprocess.run([ansible_inventory, "-i", str(script), "--graph", "accel_mncore2"], env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        lines = done.stdout.splitlines()
        print("\n".join(lines[:8] + ([f"  ... ({len(lines) - 8} more)"] if len(lines) > 8 else [])))
    else:
        print("(ansible-inventory not found; skipped)")

    print(f"\nThe demo inventory stays in {db}; explore it with:\n  export FLEETCTL_DB={db}\n  fleetctl --help")


if __name__ == "__main__":
    main()
