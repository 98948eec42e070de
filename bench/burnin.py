#!/usr/bin/env python3
"""Burn-in benchmark: `fleetctl burnin --mncore` over 1,000 MN-Core boards on 250 lab servers.

The issue's targets: with a 60 s workload, the orchestration overhead (wall
time minus the workload) <= 10 s; fleetctl's CPU per board and its peak
memory are reported.

1. The site: ``fleetctl_lab.sitegen.fleet(N)`` (1U MN-Server 2, four MN-Core
   2 boards each), its switches and cabling dropped (the burn-in never talks
   to a switch, and the lab's snmpsim would only take CPU from the run), with
   the example site's provisioning section (which the lab fills with its SSH
   user, key and known_hosts).
2. The lab, with the real CLI: ``fleetctl lab up --site SITE`` on a temporary
   lab folder (a BMC and an SSH host per server), short power, install and
   boot times. Every server is PXE-booted by fleetctl itself (``boot set all
   --device pxe``, ``power on all --stagger 0``), which makes the lab install
   its OS; once every host is up (``GET /lab/v1/hosts``), each server is moved
   to ``ready`` with the lifecycle's own ``move(..., force=True)``, in one
   child process (what ``server set-state ... ready --force`` does, without
   250 CLI start-ups).
3. ``fleetctl burnin --mncore all --level L --duration D -o json`` as a
   process of its own (the lab's database selected with FLEETCTL_DB; every
   server at once unless ``--concurrency`` says otherwise): wall
   time, its CPU (user+sys) and peak RSS from ``os.wait4`` (children
   included), and the lab daemon's CPU over the same window (its own and its
   waited-for children's: the stand-ins the hosts ran). The JSON is checked:
   every board of the site has a verdict, all ``pass`` (the lab is healthy).
   With ``--stages``, the same CLI runs in a process of this script with
   ``fleetctl.burnin.host.burn`` wrapped to record each host's start, end and
   stage times (cleanup, pre-checks, reset, workload, post-checks), printed
   as median/max over hosts: where the overhead goes.
4. The floor (``--skip-floor`` skips it): a bare asyncssh client, one
   connection per host, ``gpfn3-smi list`` then the burn-in program on every
   listed board for D seconds, result lines read with mncore.yaml's
   ``burnin.result_pattern``; the same number of hosts at once. What any
   client pays on this machine for 250 SSH sessions and 250 stand-in runs.

Prints the figures and the 10 s target with met/MISSED. Exits 1 when a board
has no verdict or a verdict other than pass, or the CLI failed; 2 when
``fleetctl burnin`` does not exist (the lab and the floor are still
measured). Every heavy step runs in a child process so no child inherits
the parent's peak RSS; the load average is printed at each step (other jobs
on the machine change every figure).

    .venv/bin/python bench/burnin.py [--servers 250 | --servers 50,100,250] [--duration 60] [--level quick] [--concurrency N]
        [--install-time 2] [--stages] [--skip-floor] [--keep]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FLEETCTL = [str(BIN / "fleetctl")] if (BIN / "fleetctl").exists() else [sys.executable, "-m", "fleetctl.cli.app"]
BOARDS_PER_SERVER = 4  # sitegen's mn-server-2-1u
OVERHEAD_TARGET_S = 10.0


def _bench_sweep() -> Any:
    """bench/sweep.py as a module: measured(), child_env(), load(), say() (stdlib-only at import)."""
    spec = importlib.util.spec_from_file_location("bench_sweep", REPO / "bench" / "sweep.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_sweep"] = mod
    spec.loader.exec_module(mod)
    return mod


S = _bench_sweep()
say, load, child_env = S.say, S.load, S.child_env


def daemon_cpu(pid: int) -> float:
    """CPU seconds of the lab daemon and of its children it has waited for (the commands its SSH hosts ran)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    except (OSError, IndexError, ValueError):
        return float("nan")


def measured(cmd: list[str], env: dict[str, str], stdout: Any, timeout: float) -> dict[str, Any]:
    """bench/sweep.py's measured(), with a deadline: a burn-in that hangs is killed, not waited for."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=err, cwd=REPO)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "user": ru.ru_utime, "sys": ru.ru_stime,
            "rss_mb": ru.ru_maxrss / 1024, "rc": proc.returncode, "stderr": text, "timed_out": wall >= timeout}  # fmt: skip


# --- helpers that run in child processes -------------------------------------------------


def h_site(servers: int, out: str, expected_out: str) -> None:
    """The site (no switches) and, for the parent, each server's board serials."""
    import copy

    from fleetctl_lab.sitegen import PROVISIONING, fleet

    from fleetctl.inventory.render import dump_yaml

    doc = fleet(servers)
    for site in doc["sites"]:
        for r in site["racks"]:
            r.pop("switches", None)
        site["racks"] = [r for r in site["racks"] if r.get("servers")]
        site["cabling"] = []
        # fleet()'s sites have no provisioning section, and the lab gives its SSH user, key and
        # known_hosts only to a site that has one: without it fleetctl cannot log in to the hosts.
        site["provisioning"] = copy.deepcopy(PROVISIONING)
    Path(out).write_text(dump_yaml(doc))
    expected = {s["name"]: [b["serial"] for b in s["boards"]] for site in doc["sites"] for r in site["racks"] for s in r["servers"]}
    Path(expected_out).write_text(json.dumps(expected))


def h_ready(names_file: str) -> None:
    """Every server to ``ready``, forced: what ``server set-state NAME ready --force`` does, in one process."""
    from fleetctl.lifecycle.machine import move
    from fleetctl.store import write_transaction

    names = json.loads(Path(names_file).read_text())
    t0 = time.perf_counter()
    with write_transaction() as conn:
        for n in names:
            move(conn, n, "ready", actor="bench", reason="bench/burnin.py: OS installed by the lab", force=True)
    print(json.dumps({"servers": len(names), "seconds": time.perf_counter() - t0}))


def h_client(stages_out: str, args: list[str]) -> None:
    """The fleetctl CLI, in this process, with each host's stage times recorded (``--stages``).

    ``fleetctl.burnin.host.burn`` is wrapped: when it started and ended (seconds since this
    process started its CLI) and its ``HostOutcome.stages``; one dict per host, nothing else.
    """
    import atexit

    from fleetctl.burnin import host

    rec: dict[str, dict[str, Any]] = {}
    t_proc = time.monotonic()
    orig = host.burn

    async def burn(job: Any) -> Any:
        t0 = time.monotonic() - t_proc
        out = await orig(job)
        rec[job.server] = {"start": t0, "end": time.monotonic() - t_proc, "stages": dict(out.stages), "error": out.error}
        return out

    host.burn = burn  # the engine looks it up at each call
    atexit.register(lambda: Path(stages_out).write_text(json.dumps({"hosts": rec, "exit": time.monotonic() - t_proc})))
    from fleetctl.cli.app import main as cli_main

    sys.argv = ["fleetctl", *args]
    cli_main()


def stage_summary(doc: dict[str, Any]) -> list[str]:
    """Lines: per stage the median and max over hosts; when hosts started and ended."""
    import statistics

    hosts = list((doc.get("hosts") or {}).values())
    if not hosts:
        return ["no stage times recorded"]
    names: list[str] = []
    for h in hosts:
        names += [k for k in h["stages"] if k not in names]
    parts = []
    for k in names:
        v = [h["stages"][k] for h in hosts if k in h["stages"]]
        parts.append(f"{k} {statistics.median(v):.1f}/{max(v):.1f}")
    starts, ends = sorted(h["start"] for h in hosts), sorted(h["end"] for h in hosts)
    return [f"stages, median/max over {len(hosts)} hosts (s): " + ", ".join(parts),
            f"hosts started {starts[0]:.1f}..{starts[-1]:.1f} s, ended {ends[0]:.1f}..{ends[-1]:.1f} s after the CLI's start; "
            f"the process exited at {doc.get('exit', float('nan')):.1f} s"]  # fmt: skip


def h_floor(lab_json: str, seconds: float, concurrency: int, out: str) -> None:
    """The bare client: per host one SSH connection, the listing, the burn-in program on every board."""
    import asyncio
    import re
    import shlex

    import asyncssh
    from fleetctl_drivers.accel.mncore import mncore_config

    pattern = re.compile(mncore_config().burnin.result_pattern)
    hosts = json.loads(Path(lab_json).read_text())["hosts"]

    async def one(gate: asyncio.Semaphore, h: dict[str, Any]) -> tuple[int, int, str]:
        v = h["vars"]
        async with gate, asyncssh.connect(h["address"], port=int(h["port"]), username=h["user"], client_keys=[h["key_file"]],
                                          known_hosts=h["known_hosts"]) as conn:  # fmt: skip
            listing = await conn.run(shlex.join([v["fleetctl_smi_cmd"], "list"]), check=True)
            devices = [ln.split(":", 1)[1].strip() for ln in str(listing.stdout).splitlines() if ":" in ln]
            argv = [v["fleetctl_mncore_burnin_cmd"]]
            for d in devices:
                argv += ["--device", d]
            r = await conn.run(shlex.join([*argv, "--seconds", f"{seconds:g}"]), check=False)
            verdicts = [m.group("verdict") for ln in str(r.stdout).splitlines() if (m := pattern.match(ln))]
            return len(devices), verdicts.count("PASS"), "" if r.exit_status == 0 else f"exit {r.exit_status}: {str(r.stderr)[-200:]}"

    async def main() -> list[Any]:
        gate = asyncio.Semaphore(concurrency)
        return await asyncio.gather(*(one(gate, h) for h in hosts.values()), return_exceptions=True)

    t0 = time.perf_counter()
    res = asyncio.run(main())
    wall = time.perf_counter() - t0
    ok = [r for r in res if not isinstance(r, BaseException)]
    errors = [repr(r)[:200] for r in res if isinstance(r, BaseException)] + [r[2] for r in ok if r[2]]
    Path(out).write_text(json.dumps({"wall": wall, "hosts": len(hosts), "boards": sum(r[0] for r in ok),
                                     "pass": sum(r[1] for r in ok), "errors": errors[:5], "n_errors": len(errors)}))  # fmt: skip


# --- the phases, from the parent -----------------------------------------------------------


def helper(name: str, *args: Any) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--_helper", name, *map(str, args)]


def run_cli(args: list[str], env: dict[str, str], what: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*FLEETCTL, *args], env=env, capture_output=True, text=True, check=False, cwd=REPO, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
    return done


def lab_up(args: argparse.Namespace, n: int, tmp: Path) -> dict[str, Any]:
    """Site, lab up (retried: another lab on this machine may hold the addresses for a while)."""
    site, expected = tmp / "site.yaml", tmp / "expected.json"
    done = subprocess.run(helper("site", n, site, expected), env=child_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"site generation failed: {done.stderr[-2000:]}")
    sd = tmp / "lab"
    env = child_env(FLEETCTL_LAB_DIR=str(sd), FLEETCTL_DB=str(tmp / "unused-source.db"))
    cmd = [*FLEETCTL, "lab", "up", "--site", str(site), "--power-transition", "0.2", "--install-time", f"{args.install_time:g}",
           "--os-boot-time", "0.2", "-o", "json"]  # fmt: skip
    for attempt in range(1, 4):
        t0 = time.perf_counter()
        up = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=REPO)
        took = time.perf_counter() - t0
        if up.returncode == 0:
            break
        say(f"  lab up failed ({up.returncode}, attempt {attempt}/3) after {took:.0f} s: {up.stderr.strip()[-500:]}")
        subprocess.run([*FLEETCTL, "lab", "down"], env=env, capture_output=True, check=False, cwd=REPO)
        if attempt == 3:
            raise SystemExit("fleetctl lab up failed three times")
        time.sleep(30)
    doc = json.loads((sd / "lab.json").read_text())
    return {"sd": sd, "db": str(sd / "fleet.db"), "doc": doc, "pid": int(doc["pid"]), "control": doc["control_url"], "up_s": took,
            "expected": json.loads(expected.read_text()), "lab_json": sd / "lab.json"}  # fmt: skip


def lab_down(lab: dict[str, Any]) -> None:
    subprocess.run([*FLEETCTL, "lab", "down"], env=child_env(FLEETCTL_LAB_DIR=str(lab["sd"])), capture_output=True, check=False, cwd=REPO)


def hosts_up(control: str, names: set[str], timeout: float) -> float:
    """Poll the lab until every host's OS is up; returns how long it took."""
    t0 = time.perf_counter()
    phases: dict[str, int] = {}
    while time.perf_counter() - t0 < timeout:
        with urllib.request.urlopen(f"{control}/lab/v1/hosts", timeout=30) as r:
            hosts = json.loads(r.read())
        phases = {}
        for n in names:
            p = hosts.get(n, {}).get("phase", "absent")
            phases[p] = phases.get(p, 0) + 1
        if phases.get("up", 0) == len(names):
            return time.perf_counter() - t0
        time.sleep(0.5)
    raise SystemExit(f"hosts not up after {timeout:.0f} s: {phases}")


def ready(lab: dict[str, Any], tmp: Path, args: argparse.Namespace) -> None:
    """PXE-install every server through its BMC, as an operator would, then mark it ready."""
    env = child_env(FLEETCTL_DB=lab["db"])
    names = sorted(lab["expected"])
    t0 = time.perf_counter()
    run_cli(["boot", "set", "all", "--device", "pxe", "-o", "json"], env, "boot set all --device pxe")
    run_cli(["power", "on", "all", "--stagger", "0", "-o", "json"], env, "power on all")
    t_power = time.perf_counter() - t0
    waited = hosts_up(lab["control"], set(names), args.install_time + 300)
    names_file = tmp / "names.json"
    names_file.write_text(json.dumps(names))
    done = subprocess.run(helper("ready", names_file), env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"moving the servers to ready failed: {done.stderr[-2000:]}")
    say(f"  boot set pxe + power on: {t_power:.1f} s; every OS up {waited:.1f} s later; {len(names)} servers ready "
        f"(total {time.perf_counter() - t0:.1f} s; load {load()})")  # fmt: skip


def check_result(doc: dict[str, Any], expected: dict[str, list[str]]) -> list[str]:
    """What is wrong with the burn-in's JSON for a healthy lab: boards without a verdict, verdicts other than pass."""
    problems: list[str] = []
    boards = doc.get("boards") or []
    got = {(b.get("server"), b.get("serial")): b for b in boards}
    want = {(s, serial) for s, serials in expected.items() for serial in serials}
    missing = sorted(k for k in want if not (got.get(k) or {}).get("verdict"))
    if missing:
        problems.append(f"{len(missing)} of {len(want)} boards have no verdict, e.g. {missing[:3]}")
    extra = sorted(set(got) - want)
    if extra:
        problems.append(f"{len(extra)} boards not in the site, e.g. {extra[:3]}")
    bad = [b for k, b in got.items() if k in want and b.get("verdict") and b.get("verdict") != "pass"]
    if bad:
        by: dict[str, int] = {}
        for b in bad:
            by[str(b["verdict"])] = by.get(str(b["verdict"]), 0) + 1
        why = json.dumps({k: bad[0].get(k) for k in ("server", "device", "verdict", "reasons") if k in bad[0]})[:400]
        problems.append(f"{len(bad)} boards not pass on a healthy lab: {by}; e.g. {why}")
    return problems


def burnin_phase(lab: dict[str, Any], tmp: Path, args: argparse.Namespace, conc: int) -> dict[str, Any]:
    env = child_env(FLEETCTL_DB=lab["db"])
    cli = ["burnin", "--mncore", "all", "--level", args.level, "--duration", f"{args.duration:g}", "--concurrency", str(conc), "-o", "json"]
    stages_file = tmp / "stages.json"
    cmd = helper("client", stages_file, *cli) if args.stages else [*FLEETCTL, *cli]
    say(f"\n[1] fleetctl {' '.join(cli)}{' (in-process, stage times recorded)' if args.stages else ''} (load {load()})")
    out_path = tmp / "burnin.json"
    d0, load0 = daemon_cpu(lab["pid"]), load()
    with out_path.open("wb") as out:
        m = measured(cmd, env, out, timeout=args.duration * 3 + 900)
    m.update(lab_cpu=daemon_cpu(lab["pid"]) - d0, load_before=load0, load_after=load())
    try:
        m["json"] = json.loads(out_path.read_text())
    except ValueError:
        m["json"] = {}
    doc = m["json"]
    nb = len(doc.get("boards") or [])
    workload = doc.get("workload_s")
    m["problems"] = check_result(doc, lab["expected"])
    if m["rc"] != 0:
        m["problems"].insert(0, f"exit {m['rc']}{' (killed: timed out)' if m['timed_out'] else ''}: {m['stderr'].strip()[-1500:]}")
    say(f"  wall {m['wall']:.1f} s (the run's own elapsed_s {doc.get('elapsed_s')}), workload_s {workload}, run {doc.get('run')}, "
        f"counts {doc.get('counts')}, exit {m['rc']}")  # fmt: skip
    say(f"  overhead (wall - duration) {m['wall'] - args.duration:.1f} s"
        + (f"; wall - workload_s {m['wall'] - float(workload):.1f} s" if isinstance(workload, int | float) else ""))  # fmt: skip
    say(f"  fleetctl CPU {m['cpu']:.1f} s (user {m['user']:.1f}, sys {m['sys']:.1f}) = {m['cpu'] / max(nb, 1) * 1000:.1f} ms per board "
        f"({nb} boards); peak RSS {m['rss_mb']:.0f} MB")  # fmt: skip
    ncpu = os.cpu_count() or 1
    say(f"  lab CPU over the same window (daemon + the commands its hosts ran): {m['lab_cpu']:.1f} s = "
        f"{m['lab_cpu'] / max(len(lab['expected']), 1):.2f} s per host, {m['lab_cpu'] / ncpu:.1f} s of wall on {ncpu} cores; "
        f"load {m['load_before']} -> {m['load_after']}")  # fmt: skip
    if args.stages:
        for ln in stage_summary(json.loads(stages_file.read_text()) if stages_file.exists() else {}):
            say(f"  {ln}")
    for p in m["problems"]:
        say(f"  PROBLEM: {p}")
    return m


def floor_phase(lab: dict[str, Any], tmp: Path, args: argparse.Namespace, conc: int) -> dict[str, Any]:
    say(f"\n[2] the floor: bare asyncssh, {len(lab['expected'])} hosts, {conc} at once, listing + burn-in program "
        f"{args.duration:g} s on every board (load {load()})")  # fmt: skip
    out = tmp / "floor.json"
    d0 = daemon_cpu(lab["pid"])
    m = measured(helper("floor", lab["lab_json"], args.duration, conc, out), child_env(), subprocess.DEVNULL,
                 timeout=args.duration * 3 + 600)  # fmt: skip
    m["lab_cpu"] = daemon_cpu(lab["pid"]) - d0
    fj = json.loads(out.read_text()) if out.exists() else {}
    m.update(fj)
    if m["rc"] != 0:
        say(f"  floor client FAILED rc {m['rc']}: {m['stderr'][-1500:]}")
        return m
    eg = f" e.g. {fj['errors'][0]}" if fj["errors"] else ""
    say(f"  wall {fj['wall']:.1f} s in the loop ({m['wall']:.1f} s for the process) = overhead {fj['wall'] - args.duration:.1f} s; "
        f"{fj['pass']}/{fj['boards']} boards PASS; errors {fj['n_errors']}{eg}")  # fmt: skip
    say(f"  client CPU {m['cpu']:.1f} s, peak RSS {m['rss_mb']:.0f} MB; lab CPU {m['lab_cpu']:.1f} s; load {load()}")
    return m


def cli_has_burnin() -> bool:
    done = subprocess.run([*FLEETCTL, "burnin", "--help"], env=child_env(), capture_output=True, text=True, check=False, cwd=REPO)
    return done.returncode == 0


def scale(args: argparse.Namespace, n: int, has_cli: bool, rows: list[tuple[str, str, str, str]]) -> list[str]:
    """One lab of ``n`` servers: up, installed, ready; the burn-in; the floor; down. Returns the problems."""
    conc = args.concurrency or n
    say(f"\n=== {n} servers x {BOARDS_PER_SERVER} MN-Core boards, {conc} at once (load {load()}) ===")
    tmp = Path(tempfile.mkdtemp(prefix=f"fleetctl-bench-burnin-{n}-"))
    m: dict[str, Any] = {}
    f: dict[str, Any] = {}
    lab: dict[str, Any] | None = None
    try:
        lab = lab_up(args, n, tmp)
        say(f"  lab up: {len(lab['expected'])} BMCs + SSH hosts in {lab['up_s']:.1f} s (load {load()})")
        ready(lab, tmp, args)
        if has_cli:
            m = burnin_phase(lab, tmp, args, conc)
        if not args.skip_floor:
            f = floor_phase(lab, tmp, args, conc)
    except SystemExit as e:
        say(f"  size {n} NOT MEASURED: {e}")
        return [f"{n} servers: not measured: {e}"]
    finally:
        if lab:
            lab_down(lab)
        if args.keep:
            say(f"  kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    tag = f"[{n}]"
    if m:
        boards = m["json"].get("boards") or []
        nb = len(boards)
        over = m["wall"] - args.duration
        ncpu = os.cpu_count() or 1
        rows += [
            (f"{tag} boards / servers", f"{nb} / {len({b.get('server') for b in boards})}", "", ""),
            (f"{tag} wall / workload_s", f"{m['wall']:.1f} / {m['json'].get('workload_s')} s", "", ""),
            (f"{tag} orchestration overhead (wall - duration)", f"{over:.1f} s", f"<= {OVERHEAD_TARGET_S:g} s",
             "met" if over <= OVERHEAD_TARGET_S else "MISSED"),
            (f"{tag} fleetctl CPU (user+sys) / per board", f"{m['cpu']:.1f} s / {m['cpu'] / max(nb, 1) * 1000:.1f} ms", "", ""),
            (f"{tag} fleetctl peak RSS", f"{m['rss_mb']:.0f} MB", "", ""),
            (f"{tag} lab CPU (daemon + host commands) / {ncpu} cores", f"{m['lab_cpu']:.1f} s / {m['lab_cpu'] / ncpu:.1f} s", "", ""),
            (f"{tag} every board a verdict, all pass", "yes" if not m["problems"] else "NO", "yes",
             "met" if not m["problems"] else "MISSED"),
        ]  # fmt: skip
    if f.get("wall"):
        rows.append((f"{tag} floor (bare asyncssh): overhead / client CPU", f"{f['wall'] - args.duration:.1f} s / {f['cpu']:.1f} s",
                     "", ""))  # fmt: skip
    return [f"{n} servers: {p}" for p in m.get("problems", [])]


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--_helper":
        name, rest = sys.argv[2], sys.argv[3:]
        if name == "site":
            h_site(int(rest[0]), rest[1], rest[2])
        elif name == "ready":
            h_ready(rest[0])
        elif name == "client":
            h_client(rest[0], rest[1:])
        elif name == "floor":
            h_floor(rest[0], float(rest[1]), int(rest[2]), rest[3])
        return 0
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--servers", default="250", help="lab servers (four MN-Core boards each); comma-separated for several labs, "
                   "one after the other")
    p.add_argument("--duration", type=float, default=60.0, help="the workload's seconds (burnin --duration)")
    p.add_argument("--level", default="quick", choices=["quick", "standard", "extended"])
    p.add_argument("--concurrency", type=int, default=0, help="servers at once, for fleetctl and the floor (0: all of them; "
                   "the CLI's own default is 50, which takes five waves of 250)")
    p.add_argument("--install-time", type=float, default=2.0, help="the lab's OS install time (lab up --install-time)")
    p.add_argument("--stages", action="store_true", help="run the CLI in a process of this script, with each host's stage "
                   "times recorded (a wrapper around fleetctl.burnin.host.burn), and print where the time went")
    p.add_argument("--skip-floor", action="store_true", help="skip the bare asyncssh client")
    p.add_argument("--keep", action="store_true", help="keep each size's temporary folder (site, burn-in JSON, the lab's log)")
    args = p.parse_args()
    sizes = [int(x) for x in str(args.servers).split(",") if x.strip()]
    S.B.raise_nofile()  # 250 SSH sessions in one client, 250 more in the lab daemon (inherited by both)
    say(f"bench/burnin.py: labs of {', '.join(map(str, sizes))} servers x {BOARDS_PER_SERVER} MN-Core boards, level {args.level}, "
        f"workload {args.duration:g} s; concurrency {args.concurrency or 'every server'}")  # fmt: skip
    say(f"machine: {os.cpu_count()} CPUs, load average at start {load()}")
    has_cli = cli_has_burnin()
    if not has_cli:
        say("fleetctl burnin: NOT AVAILABLE in this tree (`fleetctl burnin --help` fails); the lab and the floor only")
    t_start = time.perf_counter()
    rows: list[tuple[str, str, str, str]] = []
    problems: list[str] = []
    for n in sizes:
        problems += scale(args, n, has_cli, rows)
    say(f"\nran {time.perf_counter() - t_start:.0f} s; load average at end {load()}")
    if rows:
        w, v = max(len(x[0]) for x in rows), max(len(x[1]) for x in rows)
        say(f"\n{'figure':<{w}}  {'value':>{v}}  {'target':>8}  verdict")
        for name, val, target, verdict in rows:
            say(f"{name:<{w}}  {val:>{v}}  {target:>8}  {verdict}")
    for prob in problems:
        say(f"PROBLEM: {prob}")
    if not has_cli:
        return 2
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
