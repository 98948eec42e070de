"""Benchmark: poll 500 snmpsim switch agents (64 ports each) for IF-MIB counters.

The agents: ``--processes`` snmpsim-command-responder processes, each serving
its share of the ``--switches`` agents, one UDP endpoint (127.0.0.1, a port
each) per agent, all answering from one generated 64-port switch data file
(IF-MIB ifTable + ifXTable, 64-bit octet counters that grow). They run in
their own processes; this process is only the client.

In this process, one after the other:

1. fleetctl's ``poll_many(what=("counters",))`` over every agent: the IF-MIB
   counters (ifName, ifOperStatus, ifHCIn/OutOctets, ifIn/OutErrors,
   ifIn/OutDiscards: 8 columns), ``--concurrency`` agents at once, the
   columns walked in parallel with GETBULK, SNMPv2c on fleetctl's own BER
   codec over one shared UDP socket (``--v2c pysnmp`` for the pysnmp path).
2. A sequential pysnmp loop over ``--subset`` agents, written the way the
   pysnmp docs show it: per agent a GET of sysUpTime, then ``bulk_walk_cmd``
   per column (max-repetitions 25) for the same 8 columns. One switch is
   polled untimed first (pysnmp loads MIB modules on its first request).

Prints wall time, CPU (client and agents), peak memory, requests, time per
switch and the speed-up per switch, and a table with issue 4's targets
(all 500 in <= 30 s; >= 10x faster per switch than the loop). Asserts
nothing; always stops snmpsim.

    .venv/bin/python bench/snmp.py [--switches 500] [--ports 64] [--processes 2] [--concurrency 100] [--subset 10]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("snmp_agents", REPO / "tests" / "unit" / "snmp" / "snmp_agents.py")
assert _spec and _spec.loader
A = importlib.util.module_from_spec(_spec)
sys.modules["snmp_agents"] = A
_spec.loader.exec_module(A)

from fleetctl.interfaces.snmp import SnmpTarget  # noqa: E402
from fleetctl_drivers.snmp import SnmpPoller  # noqa: E402
from fleetctl_drivers.snmp import parse as P  # noqa: E402


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


WHAT = ("counters",)


async def run_fleetctl(targets: list[SnmpTarget], concurrency: int, v2c: str) -> tuple[float, list, int]:
    async with SnmpPoller(v2c=v2c) as p:
        t0 = time.perf_counter()
        results = await p.poll_many(targets, what=WHAT, concurrency=concurrency)
        return time.perf_counter() - t0, results, p.requests


async def run_loop(targets: list[SnmpTarget], warmup: SnmpTarget | None = None) -> tuple[float, int, list[float]]:
    """The plain pysnmp way: one agent after the other, one bulk walk per column.

    ``warmup`` is polled first, untimed: pysnmp loads its MIB modules on the
    first request, a one-off cost that is not the loop's per-switch time.
    Returns the wall time, the varbinds read and each switch's time.
    """
    from pysnmp.hlapi.v3arch.asyncio import (
        CommunityData,
        ContextData,
        ObjectIdentity,
        ObjectType,
        SnmpEngine,
        UdpTransportTarget,
        bulk_walk_cmd,
        get_cmd,
    )

    engine = SnmpEngine()
    columns = [".".join(map(str, c)) for c in P.COLUMNS[WHAT[0]]]
    varbinds = 0
    times: list[float] = []
    for k, t in enumerate(([warmup] if warmup else []) + targets):
        if k == (1 if warmup else 0):
            varbinds = 0
            t0 = time.perf_counter()
        t1 = time.perf_counter()
        transport = await UdpTransportTarget.create((t.host, t.port), timeout=t.timeout, retries=t.retries)
        auth = CommunityData(t.community_text())
        err, status, _, vbs = await get_cmd(engine, auth, transport, ContextData(), ObjectType(ObjectIdentity("1.3.6.1.2.1.1.3.0")))
        assert not err and not status, err
        for col in columns:
            async for err, status, _, vbs in bulk_walk_cmd(
                engine, auth, transport, ContextData(), 0, 25, ObjectType(ObjectIdentity(col)), lexicographicMode=False
            ):
                assert not err and not status, err
                varbinds += len(vbs)
        times.append(time.perf_counter() - t1)
    wall = time.perf_counter() - t0
    engine.close_dispatcher()
    return wall, varbinds, times[1:] if warmup else times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--switches", type=int, default=500)
    ap.add_argument("--ports", type=int, default=64)
    ap.add_argument("--processes", type=int, default=2, help="snmpsim processes serving the agents")
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--subset", type=int, default=10, help="agents for the sequential pysnmp loop (0 skips it)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-request timeout of the poller (s)")
    ap.add_argument("--v2c", choices=["ber", "pysnmp"], default="ber", help="the poller's SNMPv2c path")
    args = ap.parse_args()

    missing = A.snmpsim_missing()
    if missing:
        sys.exit(f"cannot run: {missing}")

    tmp = Path(tempfile.mkdtemp(prefix="fleetctl-bench-snmp-"))
    data = tmp / "data"
    spec = A.SwitchSpec(name="leaf", ports=args.ports)
    A.write_snmprec(data / "public.snmprec", A.switch_records(spec, what=("if",)))
    A.readiness_file(data)
    ports = A.free_udp_ports(args.switches)
    shares = [ports[i :: args.processes] for i in range(args.processes)]
    sims = [
        A.Snmpsim(data, [("127.0.0.1", p) for p in share], cache_dir=tmp / f"cache{k}", log_path=tmp / f"snmpsim{k}.log", start_timeout=180)
        for k, share in enumerate(shares)
        if share
    ]
    print(f"agents: {args.switches} x {args.ports} ports on {len(sims)} snmpsim process(es); data in {tmp}", flush=True)
    try:
        t0 = time.perf_counter()
        for s in sims:
            s.start()
        print(f"snmpsim up in {time.perf_counter() - t0:.1f}s (pids {[s.pid for s in sims]})", flush=True)

        targets = [
            SnmpTarget(name=f"sw{i:04d}", host="127.0.0.1", port=p, community="public", timeout=args.timeout, retries=1)
            for i, p in enumerate(ports)
        ]
        load0 = os.getloadavg()
        print(f"load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} ({os.cpu_count()} CPUs)", flush=True)
        sim_cpu0 = sum(proc_cpu(s.pid) for s in sims if s.pid)
        cpu0 = self_cpu()
        wall, results, requests = asyncio.run(run_fleetctl(targets, args.concurrency, args.v2c))
        cpu = self_cpu() - cpu0
        sim_cpu = sum(proc_cpu(s.pid) for s in sims if s.pid) - sim_cpu0
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ok = [r for r in results if r.ok and len(r.interfaces) == args.ports]
        failed = [r for r in results if not r.ok]
        varbinds = sum(len(r.interfaces) for r in ok) * len(P.COLUMNS[WHAT[0]])
        per_switch = wall / len(results)
        print(
            f"fleetctl poll_many IF-MIB counters ({len(P.COLUMNS[WHAT[0]])} columns, v2c via {args.v2c}): "
            f"{len(results)} switches in {wall:.2f}s wall "
            f"({per_switch * 1000:.1f} ms/switch), client CPU {cpu:.1f}s, snmpsim CPU {sim_cpu:.1f}s, "
            f"peak RSS {peak_mib:.0f} MiB; complete {len(ok)}, failed {len(failed)}"
            + (f" (first: {failed[0].error})" if failed else "")
            + f"; ~{varbinds / wall:,.0f} varbinds/s"
            + (f", {requests} requests ({requests / max(1, len(results)):.1f}/switch)" if requests else "")
            + f"; client CPU {cpu / max(1, varbinds) * 1e6:.1f} us/varbind, snmpsim CPU {sim_cpu / max(1, varbinds) * 1e6:.1f} us/varbind",
            flush=True,
        )

        loop_per_switch = None
        if args.subset:
            sim_cpu0 = sum(proc_cpu(s.pid) for s in sims if s.pid)
            cpu0 = self_cpu()
            # the subset is the last agents (polled by fleetctl long ago); the first agent warms pysnmp up
            subset = targets[-args.subset :]
            loop_wall, loop_vbs, loop_times = asyncio.run(run_loop(subset, warmup=targets[0]))
            loop_cpu = self_cpu() - cpu0
            loop_sim_cpu = sum(proc_cpu(s.pid) for s in sims if s.pid) - sim_cpu0
            loop_per_switch = loop_wall / args.subset
            print(
                f"sequential pysnmp loop, IF-MIB counters: {args.subset} switches in {loop_wall:.2f}s "
                f"({loop_per_switch * 1000:.1f} ms/switch), client CPU {loop_cpu:.1f}s, snmpsim CPU {loop_sim_cpu:.1f}s, "
                f"{loop_vbs} varbinds; per switch min {min(loop_times) * 1000:.1f} / median "
                f"{sorted(loop_times)[len(loop_times) // 2] * 1000:.1f} / max {max(loop_times) * 1000:.1f} ms (after an untimed warm-up switch)",
                flush=True,
            )

        speedup = loop_per_switch / per_switch if loop_per_switch else None
        rows = [
            (f"all {args.switches} switches", "<= 30 s", f"{wall:.1f} s", wall <= 30 and len(ok) == len(results)),
            (
                "speed-up per switch vs loop",
                ">= 10x",
                f"{speedup:.1f}x" if speedup else "n/a",
                None if speedup is None else speedup >= 10,
            ),
        ]
        load1 = os.getloadavg()
        print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}", flush=True)
        print()
        print(f"{'target (IF-MIB counters)':32} {'goal':>10} {'measured':>12}  verdict")
        for name, goal, got, met in rows:
            verdict = "n/a" if met is None else ("met" if met else "MISSED")
            print(f"{name:32} {goal:>10} {got:>12}  {verdict}")
    finally:
        for s in sims:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
