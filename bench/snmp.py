"""Benchmark: poll 500 snmpsim switch agents (64 ports each) for IF-MIB counters.

The agents: ``--processes`` snmpsim-command-responder processes, each serving
its share of the ``--switches`` agents, one UDP endpoint (127.0.0.1, a port
each) per agent, all answering from one generated 64-port switch data file
(IF-MIB ifTable + ifXTable, 64-bit octet counters that grow). They run in
their own processes; this process is only the client.

``--agent snmpd`` (root) polls Debian's snmpd instead: a few snmpd processes
in a network namespace of their own with ``--ports`` interfaces, one UDP port
per "switch", reached over a veth pair. snmpd is C and costs a few
microseconds per varbind where snmpsim costs about 120, so on a small machine
this run shows the client's speed rather than the agents' CPU.

In this process, one after the other:

1. fleetctl's ``poll_many(what=("counters",))`` over every agent: the IF-MIB
   counters (ifName, ifOperStatus, ifHCIn/OutOctets, ifIn/OutErrors,
   ifIn/OutDiscards: 8 columns), ``--concurrency`` agents at once, the
   columns walked in parallel with GETBULK, SNMPv2c on fleetctl's own BER
   codec over one shared UDP socket (``--v2c pysnmp`` for the pysnmp path;
   with ``--snmp-version 3``, authPriv on the same codec, ``--v3 pysnmp``).
2. A sequential pysnmp loop over ``--subset`` agents, written the way the
   pysnmp docs show it: per agent a GET of sysUpTime, then ``bulk_walk_cmd``
   per column (max-repetitions 25) for the same 8 columns. One switch is
   polled untimed first (pysnmp loads MIB modules on its first request).

``--cabled K`` (issue 24) runs instead three fleetctl polls of the same
agents, each with a fresh poller, and prints them side by side: every port
at 64 varbinds a request (the poller before issue 24), every port with the
request sizes learned per agent, and only K ports' counters (the ports a
cabling plan cables: K names spread over the switch, ``SnmpTarget.ports``;
every port still listed with its name and oper status). Per switch:
requests, varbinds answered, wall, client CPU, agent CPU.

Prints wall time, CPU (client and agents), peak memory, requests, time per
switch and the speed-up per switch; the agents' CPU floor (their CPU spread
over every core: no client can poll a switch faster here, so it caps the
speed-up this machine can show) and each side's client CPU per switch; and
a table with issue 4's targets (all 500 in <= 30 s; >= 10x faster per
switch than the loop). Asserts nothing; always stops the agents.

    .venv/bin/python bench/snmp.py [--agent snmpsim|snmpd] [--switches 500] [--ports 64] [--processes 2] [--concurrency 100] [--subset 10]
    .venv/bin/python bench/snmp.py --cabled 8 [--what if|counters] [--agent snmpd] [--switches 100]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from fleetctl_drivers.snmp import SnmpPoller
from fleetctl_drivers.snmp import parse as P

from fleetctl.interfaces.snmp import SnmpTarget

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("snmp_agents", REPO / "tests" / "unit" / "snmp" / "snmp_agents.py")
assert _spec and _spec.loader
A = importlib.util.module_from_spec(_spec)
sys.modules["snmp_agents"] = A
_spec.loader.exec_module(A)


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


WHAT = ("counters",)
V3_USER, V3_KEY = "bench", "bench-auth-priv-key"


async def run_fleetctl(targets: list[SnmpTarget], concurrency: int, v2c: str, v3: str) -> tuple[float, list, int, int]:
    async with SnmpPoller(v2c=v2c, v3=v3) as p:
        t0 = time.perf_counter()
        results = await p.poll_many(targets, what=WHAT, concurrency=concurrency)
        return time.perf_counter() - t0, results, p.requests, p.stray


async def run_variant(
    targets: list[SnmpTarget], args: argparse.Namespace, what: tuple[str, ...], **poller: int
) -> tuple[float, list, int, int]:
    """One poll of every target with a fresh poller: wall, results, requests, varbinds answered."""
    async with SnmpPoller(v2c=args.v2c, v3=args.v3, **poller) as p:
        t0 = time.perf_counter()
        results = await p.poll_many(targets, what=what, concurrency=args.concurrency)
        return time.perf_counter() - t0, results, p.requests, p.varbinds


def run_cabled(agents: Agents, targets: list[SnmpTarget], args: argparse.Namespace) -> None:
    """``--cabled K``: every port at 64 varbinds a request, every port learned, K ports' counters; side by side."""
    what = (args.what,)
    rows: list[tuple[str, float, list, int, int, float, float]] = []

    def measure(label: str, ts: list[SnmpTarget], **poller: int) -> list:
        sim0, cpu0 = agents.cpu(), self_cpu()
        wall, results, requests, varbinds = asyncio.run(run_variant(ts, args, what, **poller))
        rows.append((label, wall, results, requests, varbinds, self_cpu() - cpu0, agents.cpu() - sim0))
        return results

    every = measure("every port, 64 varbinds/request", targets, max_bulk_varbinds=64)
    names = next((r.interfaces for r in every if r.ok and r.interfaces), [])
    labels = [i.label for i in names]
    if not labels:
        sys.exit("no switch answered with interfaces: nothing to choose cabled ports from")
    k = min(args.cabled, len(labels))
    chosen = tuple(labels[int(j * len(labels) / k)] for j in range(k)) if k else ()
    measure("every port, sizes learned", targets)
    measure(f"{k} cabled ports, sizes learned", [t.model_copy(update={"ports": chosen}) for t in targets])
    n = len(targets)
    print(f"\n{agents.label}, {n} switches x {args.ports} ports, what={args.what}, concurrency {args.concurrency}")
    print(f"cabled: {', '.join(chosen)}")
    print(f"{'poll':36} {'complete':>8} {'req/switch':>10} {'vb/switch':>10} {'wall ms/sw':>10} {'CPU ms/sw':>10} {'agent ms/sw':>11}")
    for label, wall, results, requests, varbinds, cpu, sim in rows:
        ok = sum(1 for r in results if r.ok and len(r.interfaces) == len(labels))
        per = (requests / n, varbinds / n, wall / n * 1000, cpu / n * 1000, sim / n * 1000)
        print(f"{label:36} {ok:>8} {per[0]:>10.1f} {per[1]:>10.0f} {per[2]:>10.2f} {per[3]:>10.2f} {per[4]:>11.2f}")
    base = rows[0]
    last = rows[-1]
    print(f"cabled vs every port at 64: requests {base[3] / max(1, last[3]):.1f}x fewer, varbinds {base[4] / max(1, last[4]):.1f}x fewer, "
          f"client CPU {base[5] / max(1e-9, last[5]):.1f}x less, agent CPU {base[6] / max(1e-9, last[6]):.1f}x less, "
          f"wall {base[1] / last[1]:.1f}x")


async def run_loop(
    targets: list[SnmpTarget], agents: Agents, warmup: SnmpTarget | None = None
) -> tuple[float, int, list[float], float, float]:
    """The plain pysnmp way: one agent after the other, one bulk walk per column.

    ``warmup`` is polled first, untimed: pysnmp loads its MIB modules on the
    first request, a one-off cost that is not the loop's per-switch time.
    Returns the wall time, the varbinds read, each switch's time, and the
    client's and the agents' CPU seconds, all without the warm-up.
    """
    from pysnmp.hlapi.v3arch.asyncio import (
        USM_AUTH_HMAC96_SHA,
        USM_PRIV_CFB128_AES,
        CommunityData,
        ContextData,
        ObjectIdentity,
        ObjectType,
        SnmpEngine,
        UdpTransportTarget,
        UsmUserData,
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
            cpu0, agent_cpu0 = self_cpu(), agents.cpu()
            t0 = time.perf_counter()
        t1 = time.perf_counter()
        transport = await UdpTransportTarget.create((t.host, t.port), timeout=t.timeout, retries=t.retries)
        if t.version == "3":
            auth = UsmUserData(t.user, t.auth_text(), t.priv_text(), authProtocol=USM_AUTH_HMAC96_SHA, privProtocol=USM_PRIV_CFB128_AES)
        else:
            auth = CommunityData(t.community_text())
        err, status, _, vbs = await get_cmd(
            engine,
            auth,
            transport,
            ContextData(),
            ObjectType(ObjectIdentity("1.3.6.1.2.1.1.3.0")),
        )
        assert not err and not status, err
        for col in columns:
            async for err, status, _, vbs in bulk_walk_cmd(
                engine,
                auth,
                transport,
                ContextData(),
                0,
                25,
                ObjectType(ObjectIdentity(col)),
                lexicographicMode=False,
            ):
                assert not err and not status, err
                varbinds += len(vbs)
        times.append(time.perf_counter() - t1)
    wall = time.perf_counter() - t0
    cpu, agent_cpu = self_cpu() - cpu0, agents.cpu() - agent_cpu0
    engine.close_dispatcher()
    return wall, varbinds, times[1:] if warmup else times, cpu, agent_cpu


class Agents:
    """The switch agents the benchmark polls: started, measured, stopped."""

    label = ""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="fleetctl-bench-snmp-"))
        self.pids: list[int] = []
        self.host = "127.0.0.1"
        self.ports: list[int] = []

    def missing(self) -> str | None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def targets(self, timeout: float) -> list[SnmpTarget]:
        """One target per agent port: v2c community ``public``, or with
        ``--snmp-version 3`` the v3 user ``bench`` (authPriv, SHA and AES)."""
        auth: dict[str, str] = {"community": "public"}
        if self.args.snmp_version == "3":
            auth = {"version": "3", "user": V3_USER, "auth_key": V3_KEY, "priv_key": V3_KEY, "auth_protocol": "SHA", "priv_protocol": "AES"}
        return [
            SnmpTarget(name=f"sw{i:04d}", host=self.host, port=p, timeout=timeout, retries=1, **auth)  # type: ignore[arg-type]
            for i, p in enumerate(self.ports)
        ]

    def cpu(self) -> float:
        return sum(proc_cpu(p) for p in self.pids)

    def stop(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


class SnmpsimAgents(Agents):
    """``--processes`` snmpsim processes sharing the agents, a UDP port each on 127.0.0.1."""

    label = "snmpsim"

    def missing(self) -> str | None:
        return A.snmpsim_missing()

    def start(self) -> None:
        args = self.args
        data = self.tmp / "data"
        spec = A.SwitchSpec(name="leaf", ports=args.ports)
        A.write_snmprec(data / "public.snmprec", A.switch_records(spec, what=("if",)))
        A.readiness_file(data)
        self.ports = A.free_udp_ports(args.switches)
        shares = [self.ports[i :: args.processes] for i in range(args.processes)]
        self.sims = [
            A.Snmpsim(
                data,
                [("127.0.0.1", p) for p in share],
                cache_dir=self.tmp / f"cache{k}",
                log_path=self.tmp / f"snmpsim{k}.log",
                start_timeout=180,
            )
            for k, share in enumerate(shares)
            if share
        ]
        print(
            f"agents: {args.switches} x {args.ports} ports on {len(self.sims)} snmpsim process(es); data in {self.tmp}",
            flush=True,
        )
        for s in self.sims:
            s.start()
        self.pids = [s.pid for s in self.sims if s.pid]

    def stop(self) -> None:
        for s in getattr(self, "sims", []):
            s.stop()
        super().stop()


class SnmpdAgents(Agents):
    """Debian's snmpd (net-snmp, C) answering on ``--switches`` UDP ports.

    It runs in a network namespace of its own that has exactly ``--ports``
    interfaces (lo, one end of a veth pair, dummies), reached over the veth
    pair from here, so every port is a "switch" of that many interfaces with
    real IF-MIB counters (veth pairs inside the namespace; an odd count leaves one
    spare end, down, beyond ``--ports``). Unlike snmpsim, the agent costs little CPU, so the
    figures show the client. Needs root, iproute2 and snmpd.
    """

    label = "snmpd"
    PER_PROCESS = 100
    SNMPD = shutil.which("snmpd") or "/usr/sbin/snmpd"

    def missing(self) -> str | None:
        if os.geteuid() != 0:
            return "--agent snmpd needs root (a network namespace)"
        if not shutil.which("ip"):
            return "--agent snmpd needs iproute2 (ip netns)"
        if not Path(self.SNMPD).exists():
            return "--agent snmpd needs Debian's snmpd (apt-get install snmpd)"
        if self.args.ports < 2:
            return "--agent snmpd needs --ports >= 2 (lo and the veth are two of them)"
        return None

    def _sh(self, *argv: str) -> None:
        r = subprocess.run(list(argv), check=False, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {r.stderr.strip()}")

    def start(self) -> None:
        args = self.args
        tag = uuid.uuid4().hex[:6]
        self.ns, self.veth = f"fbsnmp{tag}", f"fbh{tag}"
        inner = f"fbn{tag}"
        net = random.randrange(1, 254)
        self.here, self.there = f"169.254.{net}.1", f"169.254.{net}.2"
        self.host = self.there
        self._sh("ip", "netns", "add", self.ns)
        self._sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", inner)
        self._sh("ip", "link", "set", inner, "netns", self.ns)
        self._sh("ip", "addr", "add", f"{self.here}/30", "dev", self.veth)
        self._sh("ip", "link", "set", self.veth, "up")
        batch = [
            f"addr add {self.there}/30 dev {inner}",
            f"link set {inner} up",
            "link set lo up",
        ]
        # lo and the veth end make two; the rest are veth pairs inside the
        # namespace (kernels without the dummy module have veth everywhere)
        names = [f"Ethernet{i}" for i in range(1, args.ports - 1)]
        for a, b in zip(names[0::2], names[1::2], strict=False):  # an odd one out is handled below
            batch += [
                f"link add {a} type veth peer name {b}",
                f"link set {a} up",
                f"link set {b} up",
            ]
        if len(names) % 2:
            batch += [
                f"link add {names[-1]} type veth peer name Spare1",
                f"link set {names[-1]} up",
            ]
        script = self.tmp / "ip.batch"
        script.write_text("\n".join(batch) + "\n")
        self._sh("ip", "-n", self.ns, "-batch", str(script))
        base = random.randrange(20000, 60000 - args.switches)
        self.ports = list(range(base, base + args.switches))
        env = dict(os.environ, SNMP_PERSISTENT_DIR=str(self.tmp / "persist"), MIBS="")
        # snmpd joins its agentAddress lines into one bounded string (about
        # 150 endpoints fit), so each process serves at most PER_PROCESS ports
        self.procs: list[subprocess.Popen[bytes]] = []
        for k in range(0, len(self.ports), self.PER_PROCESS):
            conf = self.tmp / f"snmpd{k}.conf"
            conf.write_text(
                "".join(f"agentAddress udp:{self.host}:{p}\n" for p in self.ports[k : k + self.PER_PROCESS])
                + f"rocommunity public {self.here}\nsysName fleetctl-bench-snmpd\n"
                + f'createUser {V3_USER} SHA "{V3_KEY}" AES "{V3_KEY}"\nrouser {V3_USER} priv\n'
            )
            out = self.tmp / f"snmpd{k}.out"
            # `ip netns exec` execs snmpd, so the pid (and its CPU) is snmpd's own
            self.procs.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        self.ns,
                        self.SNMPD,
                        "-f",
                        "-C",
                        "-c",
                        str(conf),
                        "-Lf",
                        str(out),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        self.pids = [p.pid for p in self.procs]
        print(
            f"agents: {args.switches} UDP ports of {len(self.procs)} snmpd process(es) in namespace {self.ns}, "
            f"{args.ports} interfaces; files in {self.tmp}",
            flush=True,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Every port answers a GET (snmpd binds them one by one)."""
        from fleetctl_drivers.snmp import poll_many_sync

        deadline = time.monotonic() + 60
        pending = self.targets(0.5)
        while pending:
            results = poll_many_sync(pending, what=())
            pending = [t for t, r in zip(pending, results, strict=True) if not r.ok]
            if pending and (any(p.poll() is not None for p in self.procs) or time.monotonic() > deadline):
                out = " | ".join(f.read_text(errors="replace")[-300:] for f in sorted(self.tmp.glob("snmpd*.out")))
                raise RuntimeError(f"snmpd: {len(pending)} ports not answering ({results[0].error}); {out}")

    def stop(self) -> None:
        for proc in getattr(self, "procs", []):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in getattr(self, "procs", []):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if getattr(self, "ns", None):
            subprocess.run(["ip", "link", "del", self.veth], check=False, capture_output=True)
            subprocess.run(["ip", "netns", "del", self.ns], check=False, capture_output=True)
        super().stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--switches", type=int, default=500)
    ap.add_argument("--ports", type=int, default=64)
    ap.add_argument("--processes", type=int, default=2, help="snmpsim processes serving the agents")
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument(
        "--subset",
        type=int,
        default=10,
        help="agents for the sequential pysnmp loop (0 skips it)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="per-request timeout of the poller (s)",
    )
    ap.add_argument(
        "--v2c",
        choices=["ber", "pysnmp"],
        default="ber",
        help="the poller's SNMPv2c path",
    )
    ap.add_argument(
        "--agent",
        choices=["snmpsim", "snmpd"],
        default="snmpsim",
        help="snmpsim processes (the issue's peer), or one Debian snmpd in a network namespace of --ports interfaces (root)",
    )
    ap.add_argument("--snmp-version", choices=["2c", "3"], default="2c", help="3: authPriv (SHA, AES); snmpd agents only")
    ap.add_argument("--v3", choices=["ber", "pysnmp"], default="ber", help="the poller's SNMPv3 path")
    ap.add_argument("--cabled", type=int, default=None, metavar="K",
                    help="compare every port's counters with K cabled ports' (issue 24), side by side; skips the loop")
    ap.add_argument("--what", choices=["counters", "if"], default="counters", help="the IF-MIB part polled with --cabled")
    args = ap.parse_args()
    if args.snmp_version == "3" and args.agent != "snmpd":
        ap.error("--snmp-version 3 needs --agent snmpd")

    agents: Agents = SnmpdAgents(args) if args.agent == "snmpd" else SnmpsimAgents(args)
    missing = agents.missing()
    if missing:
        sys.exit(f"cannot run: {missing}")
    try:
        t0 = time.perf_counter()
        agents.start()
        print(
            f"{agents.label} up in {time.perf_counter() - t0:.1f}s (pids {agents.pids})",
            flush=True,
        )
        targets = agents.targets(args.timeout)
        if args.cabled is not None:
            run_cabled(agents, targets, args)
            return
        load0 = os.getloadavg()
        print(
            f"load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} ({os.cpu_count()} CPUs)",
            flush=True,
        )
        sim_cpu0 = agents.cpu()
        cpu0 = self_cpu()
        wall, results, requests, stray = asyncio.run(run_fleetctl(targets, args.concurrency, args.v2c, args.v3))
        cpu = self_cpu() - cpu0
        sim_cpu = agents.cpu() - sim_cpu0
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ok = [r for r in results if r.ok and len(r.interfaces) == args.ports]
        failed = [r for r in results if not r.ok]
        varbinds = sum(len(r.interfaces) for r in ok) * len(P.COLUMNS[WHAT[0]])
        per_switch = wall / len(results)
        print(
            f"fleetctl poll_many IF-MIB counters ({len(P.COLUMNS[WHAT[0]])} columns, "
            + (f"v3 authPriv via {args.v3}" if args.snmp_version == "3" else f"v2c via {args.v2c}")
            + "): "
            f"{len(results)} switches in {wall:.2f}s wall "
            f"({per_switch * 1000:.1f} ms/switch), client CPU {cpu:.1f}s, agent CPU {sim_cpu:.1f}s, "
            f"peak RSS {peak_mib:.0f} MiB; complete {len(ok)}, failed {len(failed)}"
            + (f" (first: {failed[0].error})" if failed else "")
            + f"; ~{varbinds / wall:,.0f} varbinds/s"
            + (f", {requests} requests ({requests / max(1, len(results)):.1f}/switch), {stray} stray answers" if requests else "")
            + f"; client CPU {cpu / max(1, varbinds) * 1e6:.1f} us/varbind, agent CPU {sim_cpu / max(1, varbinds) * 1e6:.1f} us/varbind",
            flush=True,
        )

        loop_per_switch = None
        if args.subset:
            # the subset is the last agents (polled by fleetctl long ago); the first agent warms pysnmp up
            subset = targets[-args.subset :]
            loop_wall, loop_vbs, loop_times, loop_cpu, loop_sim_cpu = asyncio.run(run_loop(subset, agents, warmup=targets[0]))
            loop_per_switch = loop_wall / args.subset
            print(
                f"sequential pysnmp loop, IF-MIB counters: {args.subset} switches in {loop_wall:.2f}s "
                f"({loop_per_switch * 1000:.1f} ms/switch), client CPU {loop_cpu:.1f}s, agent CPU {loop_sim_cpu:.1f}s, "
                f"{loop_vbs} varbinds; per switch min {min(loop_times) * 1000:.1f} / median "
                f"{sorted(loop_times)[len(loop_times) // 2] * 1000:.1f} / max {max(loop_times) * 1000:.1f} ms "
                "(after an untimed warm-up switch)",
                flush=True,
            )

        speedup = loop_per_switch / per_switch if loop_per_switch else None
        # The agents run on this machine's CPUs too: with their CPU spread over
        # every core and a client that cost nothing, a switch still takes
        # agent CPU / cores / switches. That caps the speed-up any client can
        # show here; a real switch's agent runs on the switch.
        cpus = os.cpu_count() or 1
        floor_per_switch = sim_cpu / cpus / len(results)
        cap = loop_per_switch / floor_per_switch if loop_per_switch and floor_per_switch else None
        print(
            f"agents' CPU floor: {sim_cpu:.1f} s over {cpus} CPUs = {floor_per_switch * 1000:.1f} ms/switch for a client that costs nothing"
            + (f"; best speed-up possible here {cap:.1f}x" if cap else "")
            + (
                f"; client CPU per switch: fleetctl {cpu / len(results) * 1000:.1f} ms, loop {loop_cpu / args.subset * 1000:.1f} ms"
                f" ({loop_cpu / args.subset / (cpu / len(results)):.0f}x)"
                if loop_per_switch and cpu
                else ""
            ),
            flush=True,
        )
        rows = [
            (
                f"all {args.switches} switches",
                "<= 30 s",
                f"{wall:.1f} s",
                wall <= 30 and len(ok) == len(results),
            ),
            (
                "speed-up per switch vs loop",
                ">= 10x",
                f"{speedup:.1f}x" if speedup else "n/a",
                None if speedup is None else speedup >= 10,
            ),
        ]
        load1 = os.getloadavg()
        print(
            f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}",
            flush=True,
        )
        print()
        print(f"{'target (IF-MIB counters)':32} {'goal':>10} {'measured':>12}  verdict")
        for name, goal, got, met in rows:
            verdict = "n/a" if met is None else ("met" if met else "MISSED")
            print(f"{name:32} {goal:>10} {got:>12}  {verdict}")
    finally:
        agents.stop()


if __name__ == "__main__":
    main()
