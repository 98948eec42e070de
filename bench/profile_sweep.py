#!/usr/bin/env python3
"""Where a sweep's time goes: the sweep's BMC part over N lab BMCs of one dialect, measured and profiled (issue 24).

For each ``--flavours`` dialect (``ami``: MegaRAC, offers ``$expand``, ``$select`` and ETags in the lab;
``openbmc``: bmcweb, no ``$expand``), a lab of ``--bmcs`` BMCs of that dialect is started in a process of
its own (TLS on, ``--latency-ms`` injected), and in this process, one after the other:

1. the sweep's read of every BMC (``collect.bmc_operation`` through ``run_many`` with ``read_once`` and
   ``expand``, as ``engine.sweep_targets`` does) and the checks on each reading (``engine._evaluate``):
   this process's CPU per BMC, the requests per BMC (counted by the lab, and recorded by
   bench/bmc.py's ``install_recorder``), optionally profiled (``--profile DIR``: pyinstrument, a text
   summary per dialect, with the self time summed by library). ``--mode full`` reads the old way (every part, plain GETs);
   ``--mode lean`` (the default) what the enabled checks need, with what the BMC offers;
   ``--repeat 2`` sweeps the same lab twice (the second is the daily steady state: ETags known);
2. the floor: bench/bmc.py's bare aiohttp client replaying exactly the requests recorded in 1 (the
   conditional ones with their ``If-None-Match``), under the same bounds and the same garbage collector
   thresholds as the sweep (``run_many``'s ``sweep_gc``), in this process.

``--loop uvloop`` runs both on uvloop. ``--counts`` prints, for each sweep and the floor, what they cost the
event loop and the collector per BMC, counted rather than timed (asyncio loop only): tasks created (and by
which coroutine), futures, ``call_soon`` and timers (``call_at``), executor hops (threads), garbage
collections and their time, and the main thread's CPU beside the process's. The load average is printed beside every figure: the machine's
2 cores are shared (the lab itself takes a large part). Asserts nothing.

    .venv/bin/python bench/profile_sweep.py [--bmcs 1000] [--flavours ami,openbmc] [--mode lean|full]
        [--repeat 2] [--loop asyncio|uvloop] [--auth session|basic] [--per-bmc 2] [--profile bench/profiles] [--latency-ms 0]
        [--expand-levels 1|2|3] [--counts]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _bench_bmc() -> Any:
    """bench/bmc.py as a module: its recorder, bare client and lab helpers."""
    spec = importlib.util.spec_from_file_location("bench_bmc", REPO / "bench" / "bmc.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_bmc"] = mod
    spec.loader.exec_module(mod)
    return mod


def profile_version() -> str:
    from importlib.metadata import version

    return version("pyinstrument")


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def expectation(spec: Any) -> Any:
    from fleetctl.sweep.collect import BoardExpect, ServerExpect

    boards = [BoardExpect(b.slot, b.kind, b.serial) for b in spec.boards]
    return ServerExpect(spec.name, spec.serial, spec.model, "lab", "rack-1", 1, boards[0].kind if boards else None,
                        len(boards), boards, baseline=dict(spec.firmware))  # fmt: skip


#: Where a frame's self time is charged in the summary: the first pattern its file path matches.
CATEGORIES = (
    ("fleetctl: Redfish client", "fleetctl_drivers/redfish/client.py"),
    ("fleetctl: Redfish capabilities and parsing", "fleetctl_drivers/redfish/"),
    ("fleetctl: checks and collect", "fleetctl/sweep/"),
    ("fleetctl: other", "fleetctl"),
    ("bench recorder", "bench/"),
    ("TLS (ssl)", "/ssl.py"),
    ("aiohttp", "aiohttp/"),
    ("yarl, multidict (URLs, headers)", "yarl/"),
    ("yarl, multidict (URLs, headers)", "multidict/"),
    ("asyncio event loop", "asyncio/"),
    ("uvloop event loop", "uvloop/"),
    ("JSON (orjson)", "orjson"),
)


#: Built-in (C) functions, by name: the first pattern the function's name holds.
BUILTINS = (
    ("waiting in select/epoll", "poll"),
    ("waiting in select/epoll", "select"),
    ("TLS (ssl)", "SSL"),
    ("TLS (ssl)", "ssl"),
    ("socket system calls", "socket"),
    ("JSON (orjson)", "orjson"),
    ("JSON (orjson)", "loads"),
    ("yarl, multidict (URLs, headers)", "multidict"),
    ("yarl, multidict (URLs, headers)", "URL"),
)


def by_category(session: Any) -> list[tuple[str, float]]:
    """Self time of a pyinstrument session, summed by where it is spent (:data:`CATEGORIES`), largest first."""
    totals: Counter[str] = Counter()

    def walk(frame: Any, parent_path: str, parent_fn: str) -> None:
        # A synthetic "[self]" frame (time in the parent's own code) has no file: it is its parent's.
        path = frame.file_path or parent_path
        fn = frame.function if frame.file_path else parent_fn
        if not frame.children:
            name = ""
            if "built-in" in path:  # C code: named by what it is (the SSL object's read, a socket's send ...)
                name = next((label for label, pat in BUILTINS if pat in fn), "")
            name = name or next((label for label, pat in CATEGORIES if pat in path), "")
            if not name:
                name = "waiting in select/epoll" if "select" in fn or "poll" in fn else f"other ({Path(path).name or fn})"
            totals[name] += frame.time
        for child in frame.children:
            walk(child, path, fn)

    root = session.root_frame()
    if root is not None:
        walk(root, "", "")
    return totals.most_common()


def floor_gc() -> Any:
    """The process-wide settings of a sweep (bench/bmc.py's ``sweep_process_settings``: the collector's thresholds, the
    TLS read buffers), where this checkout has them."""
    return sys.modules["bench_bmc"].sweep_process_settings()


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class CountingLoop(asyncio.SelectorEventLoop):
    """asyncio's loop counting what a run asks of it (``--counts``): deterministic where CPU times are noisy."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def create_future(self) -> asyncio.Future[Any]:
        self.counts["futures"] += 1
        return super().create_future()

    def create_task(self, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        self.counts["tasks"] += 1
        self.counts["task " + getattr(coro, "__qualname__", "?")] += 1
        return super().create_task(coro, **kw)

    def call_soon(self, callback: Any, *args: Any, **kw: Any) -> asyncio.Handle:  # type: ignore[override]
        self.counts["call_soon"] += 1
        return super().call_soon(callback, *args, **kw)

    def call_at(self, when: float, callback: Any, *args: Any, **kw: Any) -> asyncio.TimerHandle:  # type: ignore[override]
        self.counts["timers"] += 1
        return super().call_at(when, callback, *args, **kw)

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:  # type: ignore[override]
        self.counts["executor hops"] += 1
        return super().run_in_executor(executor, func, *args)


@contextlib.contextmanager
def gc_counted(counts: Counter[str]) -> Any:
    """Count the collector's runs and sum their time into ``counts`` (``gc collections``, ``gc ms``)."""
    started = [0.0]

    def cb(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            counts["gc collections"] += 1
            started[0] = time.perf_counter()
        else:
            counts["gc ms"] += round((time.perf_counter() - started[0]) * 1000)

    gc.callbacks.append(cb)
    try:
        yield
    finally:
        gc.callbacks.remove(cb)


def print_counts(label: str, counts: Counter[str], bmcs: int, main_cpu: float) -> None:
    per = {k: v / bmcs for k, v in counts.items()}
    tasks = sorted(((v, k[5:]) for k, v in per.items() if k.startswith("task ") and v >= 0.5), reverse=True)
    print(f"    {label} per BMC (counted): {per.get('tasks', 0):.1f} tasks, {per.get('futures', 0):.1f} futures, "
          f"{per.get('call_soon', 0):.0f} call_soon, {per.get('timers', 0):.1f} timers, "
          f"{per.get('executor hops', 0):.1f} executor hops, {per.get('gc collections', 0):.3f} collections "
          f"({per.get('gc ms', 0):.2f} ms); main thread {main_cpu / bmcs * 1000:.2f} ms CPU")  # fmt: skip
    if tasks:
        print("      tasks by coroutine: " + ", ".join(f"{name} {v:.1f}" for v, name in tasks[:8]))


def run_on(kind: str, coro: Any, counts: Counter[str] | None = None) -> Any:
    loop = CountingLoop() if counts is not None and kind == "asyncio" else new_loop(kind)
    try:
        with gc_counted(counts) if counts is not None else contextlib.nullcontext():
            return loop.run_until_complete(coro)
    finally:
        if isinstance(loop, CountingLoop) and counts is not None:
            counts.update(loop.counts)
        loop.close()


async def sweep_once(targets: list[Any], specs: dict[str, Any], mode: str, concurrency: int,
                     cache: Any, auth: str = "session") -> tuple[list[Any], int]:  # fmt: skip
    """The sweep's BMC part: read and judge each BMC; returns (results, findings)."""
    from fleetctl_drivers.redfish import run_many

    from fleetctl.sweep import collect, server_checks
    from fleetctl.sweep.engine import _evaluate

    kw: dict[str, Any] = {}
    if mode == "full" and "plan" in collect.bmc_operation.__code__.co_varnames:
        kw["plan"] = collect.ReadPlan.full()
    elif cache is not None:
        kw["cache"] = cache
    op = collect.bmc_operation({}, **kw)
    findings = 0

    def judged(_d: int, _t: int, r: Any) -> None:
        nonlocal findings
        if r.ok:
            findings += len(server_checks.explained(_evaluate("server", r.target, r.value, specs[r.target], "bmc")))
            r.value = None

    results = await run_many(targets, op, concurrency=concurrency, progress=judged, read_once=True, expand=True,
                             auth=auth)  # fmt: skip
    return results, findings


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bmcs", type=int, default=1000)
    p.add_argument("--flavours", default="ami,openbmc")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--concurrency", type=int, default=250)
    p.add_argument("--per-bmc", type=int, default=2)
    p.add_argument("--mode", choices=("lean", "full"), default="lean")
    p.add_argument("--repeat", type=int, default=1, help="sweeps of the same lab; the floor replays the last")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    p.add_argument("--auth", choices=("session", "basic"), default="session",
                   help="how the driver authenticates (FLEETCTL_BMC_AUTH): a session per BMC, or HTTP Basic on each request")
    p.add_argument("--expand-levels", type=int, default=None,
                   help="the $levels the driver's collection reads ask for where MaxLevels allows "
                        "(capabilities.SWEEP_EXPAND_LEVELS; 1: today's one level); default: the driver's")
    p.add_argument("--no-floor", action="store_true")
    p.add_argument("--counts", action="store_true",
                   help="count per BMC the tasks, futures, callbacks, timers, executor hops and collections (asyncio)")
    p.add_argument("--profile", metavar="DIR", help="pyinstrument the (last) sweep into DIR/sweep-N-FLAVOUR-MODE.txt")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    bb = _bench_bmc()
    bb.raise_nofile()

    from fleetctl_lab.bmc.spec import generate_specs
    from fleetctl_lab.daemon import lab_down, lab_up

    from fleetctl.interfaces.bmc import BMCTarget

    if args.expand_levels is not None:
        from fleetctl_drivers.redfish import capabilities

        capabilities.SWEEP_EXPAND_LEVELS = args.expand_levels
    levels = f", $expand levels {args.expand_levels}" if args.expand_levels is not None else ""
    print(f"bench/profile_sweep.py: {args.bmcs} lab BMCs per dialect, mode {args.mode}, loop {args.loop}, auth {args.auth}, "
          f"{args.latency_ms:g} ms latency, concurrency {args.concurrency}{levels}; {os.cpu_count()} CPUs, {load()}")  # fmt: skip
    plans = bb.install_recorder()
    table: list[tuple[str, ...]] = []
    for flavour in args.flavours.split(","):
        state_dir = tempfile.mkdtemp(prefix="fleetctl-bench-prof-")
        cache_dir = Path(tempfile.mkdtemp(prefix="fleetctl-bench-cache-"))
        try:
            specs = generate_specs(args.bmcs, flavours=(flavour,), mix=("mncore",))
            st = lab_up(specs, state_dir, config={"tls": True, "address_mode": "port"}, timeout=600)
            control, lab_pid, servers = st["control_url"], int(st["pid"]), st["servers"]
            names = [s.name for s in specs]
            if args.latency_ms:
                bb.set_latency(control, args.latency_ms)
            targets = [BMCTarget(name=n, url=servers[n]["url"], username=bb.USER, password=bb.PASSWORD,
                                 fingerprint=servers[n]["fingerprint"], max_in_flight=args.per_bmc) for n in names]  # fmt: skip
            by_name = {s.name: expectation(s) for s in specs}
            cache = None
            if args.mode == "lean":
                try:
                    from fleetctl_drivers.redfish.cache import ReadingCache
                except ImportError:
                    pass
                else:
                    cache = ReadingCache(cache_dir / "redfish-cache.sqlite")
            for rep in range(1, args.repeat + 1):
                plans.clear()
                bb.CONDITIONAL.clear()
                c0 = bb.lab_counts(control, names)
                lab0 = bb.proc_cpu(lab_pid)
                profiler = None
                if args.profile and rep == args.repeat:
                    from pyinstrument import Profiler

                    profiler = Profiler(interval=0.002, async_mode="disabled")
                    profiler.start()
                counts: Counter[str] | None = Counter() if args.counts else None
                cpu0, t0, th0 = bb.cpu_seconds(), time.perf_counter(), time.thread_time()
                results, findings = run_on(args.loop, sweep_once(targets, by_name, args.mode, args.concurrency, cache, args.auth),
                                           counts)  # fmt: skip
                wall, cpu, th = time.perf_counter() - t0, bb.cpu_seconds() - cpu0, time.thread_time() - th0
                if profiler is not None:
                    profiler.stop()
                    out = Path(args.profile)
                    out.mkdir(parents=True, exist_ok=True)
                    stem = out / f"sweep-{args.bmcs}-{flavour}-{args.mode}"
                    session = profiler.last_session
                    cats = by_category(session)
                    total = sum(t for _, t in cats) or 1.0
                    head = [f"# bench/profile_sweep.py --bmcs {args.bmcs} --flavours {flavour} --mode {args.mode} --loop {args.loop}",
                            f"# pyinstrument {profile_version()}, wall {wall:.2f} s, CPU {cpu:.2f} s under the profiler; {load()}",
                            "# self time by where it is spent (seconds, share of the sampled wall time):"]  # fmt: skip
                    head += [f"#   {t:7.2f} s {t / total:6.1%}  {name}" for name, t in cats[:14]]
                    text = profiler.output_text(unicode=False, color=False, show_all=False)
                    stem.with_suffix(".txt").write_text("\n".join(head) + "\n" + text)
                    print("\n".join(head[2:]))
                    print(f"    profile: {stem}.txt")
                lab_cpu = bb.proc_cpu(lab_pid) - lab0
                c1 = bb.lab_counts(control, names)
                req = sum(c1[n] - c0[n] for n in names)
                failed = [r for r in results if not r.ok]
                conditional = sum(len(v) for v in bb.CONDITIONAL.values())
                print(f"[{flavour} sweep {rep}] wall {wall:.2f} s, CPU {cpu:.2f} s = {cpu / args.bmcs * 1000:.2f} ms per BMC "
                      f"({cpu / max(req, 1) * 1e6:.0f} us per request), {req / args.bmcs:.1f} requests per BMC "
                      f"({conditional} conditional), lab CPU {lab_cpu:.2f} s, {len(failed)} failed, {findings} findings; "
                      f"{load()}")  # fmt: skip
                if failed:
                    print(f"    e.g. {failed[0].target}: {failed[0].error}")
                if counts is not None:
                    print_counts("sweep", counts, args.bmcs, th)
                per = Counter(len(v) for v in plans.values())
                print("    requests per BMC (recorded): " + ", ".join(f"{k} x{v}" for k, v in sorted(per.items())))
            table.append((flavour, f"{cpu / args.bmcs * 1000:.2f}", f"{req / args.bmcs:.1f}", f"{wall:.2f}", "", "",
                          load()))  # fmt: skip
            if not args.no_floor:
                # the conditional GETs are replayed with the same If-None-Match (bench/bmc.py's CONDITIONAL)
                replay = {n: list(plans[n]) for n in names}
                fcounts: Counter[str] | None = Counter() if args.counts else None
                cpu0, t0, th0 = bb.cpu_seconds(), time.perf_counter(), time.thread_time()
                # under the garbage collector's settings of the sweep (run_many's sweep_gc), so that the two compare
                with floor_gc():
                    sent, _el, errors = run_on(args.loop, bb.run_bare(targets, replay, args.concurrency, args.per_bmc), fcounts)
                bwall, bcpu, bth = time.perf_counter() - t0, bb.cpu_seconds() - cpu0, time.thread_time() - th0
                print(f"[{flavour} floor] bare aiohttp replaying the last sweep's requests: wall {bwall:.2f} s, "
                      f"CPU {bcpu:.2f} s = {bcpu / args.bmcs * 1000:.2f} ms per BMC, {sent} sent, "
                      f"{len(errors)} errors; fleetctl/floor wall {wall / bwall:.2f}x, CPU {cpu / bcpu:.2f}x; {load()}")  # fmt: skip
                if errors:
                    print(f"    e.g. {errors[0]}")
                if fcounts is not None:
                    print_counts("floor", fcounts, args.bmcs, bth)
                table[-1] = (*table[-1][:4], f"{wall / bwall:.2f}x", f"{cpu / bcpu:.2f}x", load())
        finally:
            lab_down(state_dir)
            shutil.rmtree(state_dir, ignore_errors=True)
            shutil.rmtree(cache_dir, ignore_errors=True)
    print(f"\n{'dialect':<8} {'ms CPU/BMC':>10} {'req/BMC':>8} {'wall s':>7} {'vs floor':>9} {'CPU vs floor':>12}  load")
    for row in table:
        print(f"{row[0]:<8} {row[1]:>10} {row[2]:>8} {row[3]:>7} {row[4]:>9} {row[5]:>12}  {row[6]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
