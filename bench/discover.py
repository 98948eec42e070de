#!/usr/bin/env python3
"""Discovery benchmark: `fleetctl discover --range` over a /16 of loopback holding lab BMCs, the rest closed.

A lab (``fleetctl_lab.daemon.lab_up``, TLS, address mode) puts ``--bmcs`` BMCs
on consecutive addresses from ``127.20.0.1`` on port ``--port``; every other
address of ``127.20.0.0/16`` refuses (Linux routes all of 127/8 to lo). Then,
one after the other, each in a process of its own:

1. ``fleetctl discover --range 127.20.0.0/16 --port P -o json --no-switches``
   (the real CLI, an empty inventory): wall time, its CPU (user+sys, os.wait4),
   peak RSS, and how many service roots it found.
2. The floor: a bare asyncio client doing the same probe (TLS handshake,
   ``GET /redfish/v1``, read to the end, ``json.loads``, the certificate's
   SHA-256) under the same bound of connections at once, no rate limit, no
   per-/24 bound, nothing else: what any client must at least spend.
3. ``nmap -p P --open -n -Pn -T4 127.20.0.0/16`` where nmap is installed
   (Debian package nmap): the scanner most operators would reach for. It
   only finds open ports (no TLS, no HTTP), so it answers less.

fleetctl runs with ``--rate`` raised out of the way (its default, 2,000 new
connections a second, is a politeness bound for real management networks:
a /16 at that rate takes 33 s by design), and the lab's CPU over each window
is printed beside (on 2 cores the lab competes with the client).

Then placement (``--place N``, default 1,000; 0 skips it): "N placed right
out of N", the issue's target.

4. A generated site (``fleetctl_lab.sitegen.fleet(N)``: racks of 40 1U
   servers, each server's ``bmc`` NIC cabled to its rack's EOS management
   switch; the leaves and spines are left out, as they carry no BMC MAC) is
   served by ``fleetctl lab up --site`` (BMCs and the management switches,
   SNMP and SSH): each switch learns its servers' BMC MACs on their planned
   ports, and each BMC reports the same MAC from its Manager.
5. The plan, as a delivery's: the lab's fleet exported, each server kept at
   its rack and unit, cabled, but without its BMC address, pin, credential,
   BMC MAC and serial (a placeholder): nothing but the switch port can tie a
   BMC found to its planned server.
6. ``fleetctl discover --range <the BMCs' addresses> --credential <the lab's>
   --switches role=management -o json`` (probe, login for serial and MACs,
   the switches' MAC tables, the plan): wall, CPU, peak RSS, and how many of
   the N BMCs are adopted as the server the plan holds at that address's
   rack and unit, placed by a switch port.
7. The placement alone (``read_sightings`` + ``place`` on the N MACs, in a
   child process, timed inside it): its wall and CPU, sightings read.

Prints the figures and the ratio to the floor (target: within 1.3x); asserts
nothing. The load average is printed: other work on the machine changes
every figure.

    .venv/bin/python bench/discover.py [--bmcs 1000] [--prefix 16] [--port 443] [--concurrency 512] [--place 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FLEETCTL = [str(BIN / "fleetctl")] if (BIN / "fleetctl").exists() else [sys.executable, "-m", "fleetctl.cli.app"]
FLOOR_TARGET = 1.3
BASE = "127.20.0.1"

# The floor: a bare asyncio probe of every address, in a child process (stdlib only).
FLOOR = r'''
import asyncio, hashlib, ipaddress, json, ssl, sys
net, port, conc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
found = 0
async def one(a):
    global found
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(a, port, ssl=ctx), 3)
    except OSError:
        return
    except asyncio.TimeoutError:
        return
    try:
        hashlib.sha256(w.get_extra_info("ssl_object").getpeercert(True)).hexdigest()
        w.write(f"GET /redfish/v1 HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n\r\n".encode())
        data = await asyncio.wait_for(r.read(), 10)
        head, _, body = data.partition(b"\r\n\r\n")
        if b"chunked" in head.lower():
            out, rest = b"", body
            while rest:
                size, _, rest = rest.partition(b"\r\n"); n = int(size, 16)
                if not n: break
                out, rest = out + rest[:n], rest[n + 2:]
            body = out
        if "RedfishVersion" in json.loads(body):
            found += 1
    except Exception:
        pass
    finally:
        w.close()
async def main():
    it = iter(str(a) for a in ipaddress.ip_network(net).hosts())
    async def worker():
        for a in it:
            await one(a)
    await asyncio.gather(*(worker() for _ in range(conc)))
asyncio.run(main())
print(json.dumps({"found": found}))
'''

# The placement alone, in a child process on the plan's database (FLEETCTL_DB): the MACs on stdin, one a line.
PLACE = r'''
import json, resource, sys, time
from fleetctl.cli.common import conn
from fleetctl.discovery.placement import Placement, place, read_sightings
macs = [m.strip() for m in sys.stdin if m.strip()]
t0, c0 = time.perf_counter(), time.process_time()
with conn() as c:
    sightings, errors = read_sightings(c, ["role=management"], deadline_s=600)
    placed = place(c, sightings, macs)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
out = {m: [p.site, p.rack, p.position, p.server] if isinstance(p, Placement) else str(p) for m, p in placed.items()}
print(json.dumps({"wall": wall, "cpu": cpu, "sightings": len(sightings), "errors": errors, "placed": out}))
'''


def say(msg: str) -> None:
    print(msg, flush=True)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def proc_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def measured(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a child: wall, CPU (user+sys) and peak RSS from os.wait4, and its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, cwd=REPO)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "rc": os.waitstatus_to_exitcode(status),
                "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace")}  # fmt: skip


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETCTL_")}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env.update(extra)
    return env


def placement_site(servers: int, out: Path) -> dict[str, tuple[str, str, int]]:
    """Write sitegen's fleet of N servers with only its management switches; returns server -> (site, rack, unit)."""
    from fleetctl_lab.sitegen import fleet

    from fleetctl.inventory.render import dump_yaml

    doc = fleet(servers)
    truth: dict[str, tuple[str, str, int]] = {}
    for site in doc["sites"]:
        racks = [r for r in site["racks"] if r.get("servers")]  # rack-net holds only the spines
        for r in racks:
            r["switches"] = [sw for sw in r.get("switches", []) if sw.get("role") == "management"]
            truth.update({s["name"]: (site["name"], r["name"], s["position"]) for s in r["servers"]})
        site["racks"] = racks
        site["cabling"] = [c for c in site["cabling"] if c.get("nic") == "bmc"]
    out.write_text(dump_yaml(doc))
    return truth


def delivery_plan(exported: str) -> str:
    """The lab's fleet as a delivery's plan: every server at its unit and cabled, nothing else known of its BMC."""
    import yaml

    from fleetctl.inventory.edits import placeholder_serial

    doc = yaml.safe_load(exported)
    for site in doc["sites"]:
        for r in site["racks"]:
            for s in r.get("servers", []):
                for key in ("bmc", "fingerprint", "credential", "bmc_system_id"):
                    s.pop(key, None)
                s["serial"] = placeholder_serial(s["name"])
                s["nics"] = [{"name": n["name"]} if n["name"] == "bmc" else n for n in s.get("nics", [])]
    return str(yaml.safe_dump(doc, sort_keys=False))


def bench_placement(n: int, port: int, concurrency: int, tmp: Path) -> list[str]:
    """Steps 4-7 of the module's docstring; returns the lines to print."""
    import ipaddress

    site = tmp / "place-site.yaml"
    truth = placement_site(n, site)
    sd = tmp / "place-lab"
    env = child_env(FLEETCTL_LAB_DIR=str(sd), FLEETCTL_DB=str(tmp / "place-source.db"), FLEETCTL_DATA_DIR=str(tmp / "data"))
    t0 = time.perf_counter()
    up = subprocess.run([*FLEETCTL, "lab", "up", "--site", str(site), "--no-hosts", "-o", "json"], env=env, capture_output=True,
                        text=True, check=False, cwd=REPO)  # fmt: skip
    if up.returncode != 0:
        return [f"placement: lab up failed ({up.returncode}): {up.stderr[-2000:]}"]
    try:
        lab = json.loads((sd / "lab.json").read_text())
        say(f"placement: lab up --site ({n} servers, {len(lab.get('switches') or {})} management switches) in "
            f"{time.perf_counter() - t0:.1f} s; load {load()}")  # fmt: skip
        if not lab.get("switches"):
            return ["placement: the lab serves no switches here (asyncssh or snmpsim missing): skipped"]
        by_addr = {s["url"].split("//", 1)[1].rsplit(":", 1)[0]: name for name, s in lab["servers"].items()}
        lab_port = next(iter(lab["servers"].values()))["url"].rsplit(":", 1)[1]
        lab_env = {**env, "FLEETCTL_DB": str(sd / "fleet.db")}
        exported = subprocess.run([*FLEETCTL, "inventory", "export"], env=lab_env, capture_output=True, text=True, check=True, cwd=REPO)
        plan_file = tmp / "plan.yaml"
        plan_file.write_text(delivery_plan(exported.stdout))
        plan_env = {**env, "FLEETCTL_DB": str(tmp / "plan.db")}
        subprocess.run([*FLEETCTL, "inventory", "import", str(plan_file)], env=plan_env, capture_output=True, text=True, check=True,
                       cwd=REPO)  # fmt: skip
        # One range covering the BMCs' addresses, each a host of it (a range's network and broadcast addresses are not probed).
        addrs = sorted(ipaddress.IPv4Address(a) for a in by_addr)
        net = next(net for bits in range(32, 7, -1) if (net := ipaddress.IPv4Network(f"{addrs[0]}/{bits}", strict=False))
                   and net.network_address < addrs[0] and addrs[-1] < net.broadcast_address)  # fmt: skip
        ranges = ["--range", str(net)]
        lab_pid = int(lab["pid"])
        lab0 = proc_cpu(lab_pid)
        r = measured([*FLEETCTL, "discover", *ranges, "--port", lab_port, "--credential", f"file:{sd / 'credential'}",
                      "--switches", "role=management", "-o", "json", "--concurrency", str(concurrency), "--per-subnet",
                      str(concurrency), "--rate", "1000000"], plan_env)  # fmt: skip
        lab_cpu = proc_cpu(lab_pid) - lab0
        if not r["stdout"].strip():
            return [f"placement: fleetctl discover failed (exit {r['rc']}): {r['stderr'][-2000:]}"]
        doc = json.loads(r["stdout"])
        right = wrong = 0
        unplaced: list[str] = []
        macs: list[str] = []
        for p in doc["proposals"]:
            name = by_addr.get(p["address"])
            if name is None:
                continue
            if p.get("mac"):
                macs.append(p["mac"])
            by_switch = str(p.get("sources", {}).get("position", "")).startswith("switch ")
            if p["kind"] == "adopt" and by_switch and (p["site"], p["rack"], p["position"]) == truth[name] and p["server"] == name:
                right += 1
            elif p["kind"] in ("adopt", "unchanged", "moved"):
                wrong += 1
            else:
                unplaced.append(f"{name}: {p['kind']} {p.get('detail') or ''}".strip())
        lines = [f"placement, end to end: fleetctl discover (probe, login, {len(lab['switches'])} switches' MAC tables, the plan) "
                 f"{r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, {r['rss_mb']:.0f} MB peak RSS (exit {r['rc']}); lab CPU {lab_cpu:.2f} s",
                 f"placed right: {right} of {n} (placed wrong: {wrong}; not placed: {len(unplaced)}; "
                 f"switch errors: {len(doc.get('switch_errors', []))}) -> {'met' if right == n else 'MISSED'}"]  # fmt: skip
        seen = {p["address"] for p in doc["proposals"]}
        lines.append(f"found by the probe: {len(seen & set(by_addr))} of {n}; answers {doc['answers']}")
        lines += [f"  not placed: {u}" for u in unplaced[:10]] + [f"  switch error: {e}" for e in doc.get("switch_errors", [])[:10]]
        failures = doc.get("failures", {})
        lines += [f"  not found: {by_addr[a]} at {a}: {failures.get(a, 'no answer')}" for a in sorted(set(by_addr) - seen)[:10]]
        with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout:
            fin.write("\n".join(macs).encode())
            fin.seek(0)
            done = subprocess.run([sys.executable, "-c", PLACE], env=plan_env, stdin=fin, stdout=fout, stderr=subprocess.PIPE, cwd=REPO,
                                  check=False)  # fmt: skip
            fout.seek(0)
            out = fout.read().decode()
        if done.returncode == 0:
            pl = json.loads(out)
            ok = sum(1 for m, v in pl["placed"].items() if isinstance(v, list)
                     and (v[0], v[1], v[2]) == truth.get(v[3] or "", ("", "", -1)))  # fmt: skip
            lines.append(f"placement alone (read_sightings + place, {len(macs)} MACs): {pl['wall']:.2f} s wall, "
                         f"{pl['cpu']:.2f} s CPU; {pl['sightings']} sightings, {ok} placed at the planned rack and unit, "
                         f"{len(pl['errors'])} switch errors")  # fmt: skip
        else:
            lines.append(f"placement alone failed: {done.stderr.decode()[-2000:]}")
        return lines
    finally:
        subprocess.run([*FLEETCTL, "lab", "down"], env=env, capture_output=True, check=False, cwd=REPO)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bmcs", type=int, default=1000)
    p.add_argument("--prefix", type=int, default=16, help="the range probed: 127.20.0.0/PREFIX")
    p.add_argument("--port", type=int, default=443)
    p.add_argument("--concurrency", type=int, default=512)
    p.add_argument("--place", type=int, default=1000, help="servers in the placement part (0: skip it)")
    p.add_argument("--no-probe", action="store_true", help="skip the /16 probe (steps 1-3): placement only")
    args = p.parse_args()
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sys.path.insert(0, str(REPO))
    rc = 0 if args.no_probe else bench_probe(args)
    if args.place > 0:
        say(f"\nplacement: {args.place} servers; {os.cpu_count()} CPUs, load {load()}")
        tmp = Path(tempfile.mkdtemp(prefix="fleetctl-bench-place-"))
        try:
            for line in bench_placement(args.place, args.port, args.concurrency, tmp):
                say(line)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        say(f"load {load()}")
    return rc


def bench_probe(args: argparse.Namespace) -> int:
    """Steps 1-3 of the module's docstring."""
    from fleetctl_lab.bmc.spec import generate_specs
    from fleetctl_lab.daemon import lab_down, lab_up

    net = f"127.20.0.0/{args.prefix}"
    say(f"bench/discover.py: {args.bmcs} lab BMCs on {BASE}.. port {args.port} (TLS), probing {net}; "
        f"concurrency {args.concurrency}; {os.cpu_count()} CPUs, load {load()}")  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="fleetctl-bench-discover-"))
    rows: list[tuple[str, str, str, str, str, str]] = []
    try:
        t0 = time.perf_counter()
        st = lab_up(generate_specs(args.bmcs), tmp / "lab",
                    config={"tls": True, "address_mode": "address", "base_address": BASE, "port": args.port}, timeout=900)  # fmt: skip
        lab_pid = int(st["pid"])
        say(f"lab up in {time.perf_counter() - t0:.1f} s (pid {lab_pid}); load {load()}")
        env = child_env(FLEETCTL_DB=str(tmp / "fleet.db"), FLEETCTL_DATA_DIR=str(tmp / "data"))
        subprocess.run([*FLEETCTL, "db", "upgrade"], env=env, check=True, capture_output=True)

        lab0 = proc_cpu(lab_pid)
        r = measured([*FLEETCTL, "discover", "--range", net, "--port", str(args.port), "--no-switches", "-o", "json",
                      "--concurrency", str(args.concurrency), "--per-subnet", str(args.concurrency), "--rate", "1000000"], env)  # fmt: skip
        lab_f = proc_cpu(lab_pid) - lab0
        if r["rc"] != 0:
            say(f"fleetctl discover failed (exit {r['rc']}): {r['stderr'][-2000:]}")
            return 1
        doc = json.loads(r["stdout"])
        found_f = doc["answers"].get("redfish", 0)
        rows.append(("fleetctl discover", f"{r['wall']:.2f}", f"{r['cpu']:.2f}", f"{r['rss_mb']:.0f}", f"{found_f}", f"{lab_f:.2f}"))
        say(f"fleetctl: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, {r['rss_mb']:.0f} MB; answers {doc['answers']}; load {load()}")

        lab0 = proc_cpu(lab_pid)
        b = measured([sys.executable, "-c", FLOOR, net, str(args.port), str(args.concurrency)], env)
        lab_b = proc_cpu(lab_pid) - lab0
        found_b = json.loads(b["stdout"])["found"] if b["rc"] == 0 else -1
        rows.append(("bare asyncio (floor)", f"{b['wall']:.2f}", f"{b['cpu']:.2f}", f"{b['rss_mb']:.0f}", f"{found_b}", f"{lab_b:.2f}"))
        say(f"floor: {b['wall']:.2f} s wall, {b['cpu']:.2f} s CPU, {b['rss_mb']:.0f} MB; found {found_b}; load {load()}")

        nmap = shutil.which("nmap")
        if nmap:
            lab0 = proc_cpu(lab_pid)
            n = measured([nmap, "-p", str(args.port), "--open", "-n", "-Pn", "-T4", "-oG", "-", net], env)
            lab_n = proc_cpu(lab_pid) - lab0
            open_ports = sum(1 for line in n["stdout"].splitlines() if "/open/" in line)
            rows.append((f"nmap -p {args.port} --open", f"{n['wall']:.2f}", f"{n['cpu']:.2f}", f"{n['rss_mb']:.0f}", f"{open_ports} open",
                         f"{lab_n:.2f}"))  # fmt: skip
        else:
            say("nmap: skipped (not installed; Debian package nmap)")
    finally:
        lab_down(tmp / "lab")
        shutil.rmtree(tmp, ignore_errors=True)

    say("")
    head = ("client", "wall s", "CPU s", "peak RSS MB", "found", "lab CPU s")
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        say("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    ratio = float(rows[0][1]) / float(rows[1][1])
    cpu_ratio = float(rows[0][2]) / float(rows[1][2])
    verdict = "met" if ratio <= FLOOR_TARGET else "MISSED"
    say(f"\nfleetctl / floor: wall {ratio:.2f}x, CPU {cpu_ratio:.2f}x (target: within {FLOOR_TARGET}x) -> {verdict}; "
        f"found {found_f} of {args.bmcs} -> {'met' if found_f == args.bmcs else 'MISSED'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
