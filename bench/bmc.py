#!/usr/bin/env python3
"""BMC benchmark: inspect + power state of 1,000 lab BMCs over HTTPS (issue 3).

The lab runs in its own process (``lab_up`` on a temporary state dir, TLS on,
``latency_ms`` injected on every BMC through ``POST /lab/v1/faults``); every
client runs in this process, one after the other, against the same lab:

1. fleetctl: ``run_many`` over every BMC doing ``inventory.facts()`` then
   ``power.state()`` (certificates pinned as the inventory would have them
   after a first inspect). The (method, path) of every request the driver
   sends is recorded by a thin wrapper around ``RedfishClient._send`` (one
   list append per request).
2. the floor: bare aiohttp replaying exactly those requests per BMC (GET of
   the service root, session login, the recorded GETs, logout) under the same
   bounds: at most ``max_in_flight`` (2) requests in flight per BMC and
   ``--concurrency`` BMCs at once, the recorded GETs issued as soon as the
   per-BMC bound allows (no discovery: the URIs are known in advance).
3. the user's script: the DMTF ``redfish`` library, sequentially, on a subset
   (``redfish_client`` + ``login(auth="session")`` + the same GETs +
   ``logout()``).

Requests are counted by the lab (per-BMC ``requests`` counters read from the
control endpoint before and after each phase). Prints a table of figures with
the issue's targets and "met"/"MISSED"; asserts nothing.

    python bench/bmc.py [--bmcs 1000] [--latency-ms 50] [--subset 50] [--concurrency 200]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Self

REPO = Path(__file__).resolve().parents[1]

SPEEDUP_TARGET = 50.0  # fleetctl per-BMC speed-up over the sequential redfish loop
FLOOR_TARGET = 1.5  # fleetctl wall time / bare aiohttp wall time
ROOT = "/redfish/v1"
SESSIONS = "/redfish/v1/SessionService/Sessions"
USER, PASSWORD = "admin", "labpass"


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class RssSampler:
    """Peak resident memory of this process during one phase (ru_maxrss is a lifetime peak)."""

    def __init__(self, interval: float = 0.05) -> None:
        import threading

        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20


def proc_cpu(pid: int) -> float:
    """user+sys CPU seconds of another process (the lab daemon)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# --- the lab's control endpoint -------------------------------------------------------


async def _lab_counts(control: str, names: list[str]) -> dict[str, int]:
    import aiohttp

    gate = asyncio.Semaphore(16)
    out: dict[str, int] = {}
    async with aiohttp.ClientSession() as http:

        async def one(name: str) -> None:
            async with gate, http.get(f"{control}/lab/v1/bmcs/{name}/counters") as r:
                out[name] = int((await r.json())["requests"])

        await asyncio.gather(*(one(n) for n in names))
    return out


def lab_counts(control: str, names: list[str]) -> dict[str, int]:
    """Per-BMC request counters of the lab (the lab's own count, not ours)."""
    return asyncio.run(_lab_counts(control, names))


def lab_summary(control: str) -> dict[str, Any]:
    """``GET /lab/v1``: the lab's count of Redfish requests served, its render cache; {} if unreadable."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"{control}/lab/v1", timeout=30) as r:
            doc = json.loads(r.read())
            return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def lab_requests(control: str) -> int:
    """Redfish requests the lab's BMCs have served in all (the lab's own count); -1 if unreadable."""
    return int(lab_summary(control).get("requests", -1))


def set_latency(control: str, ms: float) -> None:
    import json
    import urllib.request

    body = json.dumps({"names": "*", "faults": {"latency_ms": ms or None}}).encode()
    req = urllib.request.Request(
        f"{control}/lab/v1/faults",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()


# --- 1. fleetctl ------------------------------------------------------------------------


#: {BMC: {path: the If-None-Match the driver sent}}, filled by install_recorder's wrapper; run_bare sends the same.
CONDITIONAL: dict[str, dict[str, str]] = {}


def install_recorder() -> dict[str, list[tuple[str, str]]]:
    """Record (method, path) of every request the driver sends, per BMC."""
    from fleetctl_drivers.redfish.client import RedfishClient

    seen: dict[str, list[tuple[str, str]]] = defaultdict(list)
    orig = RedfishClient._send

    def _send(
        self: Any, method: str, url: str, headers: dict, data: bytes | None
    ) -> Any:
        # A plain function handing back the driver's own coroutine, not a coroutine awaiting it: the recorder
        # must not add a coroutine (a frame, a GC-tracked object) to every request the sweep is measured on.
        # the driver builds url as self.base + path: cheaper than urlsplit
        path = url.removeprefix(self.base)
        seen[self.target.name].append((method, path))
        if "If-None-Match" in headers:  # a conditional GET: the floor sends the same header
            CONDITIONAL.setdefault(self.target.name, {})[path] = headers["If-None-Match"]
        return orig(self, method, url, headers, data)

    RedfishClient._send = _send  # type: ignore[method-assign]
    return seen


async def run_fleetctl(
    targets: list[Any], concurrency: int
) -> tuple[list[Any], dict[str, int]]:
    from fleetctl_drivers.redfish import run_many

    in_flight: dict[str, int] = {}

    async def op(bmc: Any) -> Any:
        facts = await bmc.inventory.facts()
        state = await bmc.power.state()
        in_flight[bmc.target.name] = bmc.client.max_seen_in_flight
        return facts, state

    results = await run_many(targets, op, concurrency=concurrency)
    return results, in_flight


# --- 2. the floor: bare aiohttp -----------------------------------------------------------


def sweep_process_settings() -> contextlib.ExitStack:
    """The process-wide settings a sweep runs under (``fleetctl_drivers.redfish.sweep``: the collector's
    thresholds, the TLS connections' read buffers), so that a floor is measured as the sweep is, in CPU and in
    memory; none where this checkout's driver has them not."""
    stack = contextlib.ExitStack()
    try:
        from fleetctl_drivers.redfish import sweep
    except ImportError:
        return stack
    for name in ("sweep_gc", "sweep_tls_buffers"):
        if (setting := getattr(sweep, name, None)) is not None:
            stack.enter_context(setting())
    return stack


async def run_bare(
    targets: list[Any],
    plans: dict[str, list[tuple[str, str]]],
    concurrency: int,
    per_bmc: int,
) -> tuple[int, list[float], list[str]]:
    """Replay each BMC's recorded requests; returns (requests sent, per-BMC seconds, errors)."""
    import aiohttp
    import orjson

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    gate = asyncio.Semaphore(concurrency)
    sent = 0
    elapsed: list[float] = []
    errors: list[str] = []
    base_hdrs = {"Accept": "application/json", "OData-Version": "4.0"}
    login_body = orjson.dumps({"UserName": USER, "Password": PASSWORD})
    basic_auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    async with aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar()
    ) as http:

        async def one(t: Any) -> None:
            nonlocal sent
            fp = t.fingerprint.split(":", 1)[-1]
            ssl = aiohttp.Fingerprint(bytes.fromhex(fp))
            sem = asyncio.Semaphore(per_bmc)

            async def req(
                method: str, path: str, hdrs: dict, data: bytes | None = None
            ) -> tuple[int, Any, Any]:
                nonlocal sent
                async with sem:
                    sent += 1
                    async with http.request(
                        method,
                        t.url + path,
                        headers=hdrs,
                        data=data,
                        ssl=ssl,
                        allow_redirects=False,
                    ) as r:
                        raw = await r.read()
                        return r.status, r.headers, (orjson.loads(raw) if raw else None)

            async with gate:
                t0 = time.perf_counter()
                plan = plans[t.name]
                try:
                    gets = [p for m, p in plan if m == "GET"]
                    # the service root before login, as the driver does (it is open)
                    if gets and gets[0].rstrip("/") == ROOT:
                        await req("GET", gets.pop(0), base_hdrs)
                    if any(m == "POST" for m, _ in plan):
                        st, h, _ = await req(
                            "POST",
                            SESSIONS,
                            {**base_hdrs, "Content-Type": "application/json"},
                            login_body,
                        )
                        if st != 201:
                            raise RuntimeError(f"login: HTTP {st}")
                        auth = {**base_hdrs, "X-Auth-Token": h["X-Auth-Token"]}
                        location = h["Location"]
                    else:  # the driver used HTTP Basic (FLEETCTL_BMC_AUTH=basic): no session
                        auth = {**base_hdrs, "Authorization": basic_auth}
                    cond = CONDITIONAL.get(t.name, {})
                    codes = await asyncio.gather(
                        *(req("GET", p, {**auth, "If-None-Match": cond[p]} if p in cond else auth) for p in gets)
                    )
                    bad = [c[0] for c in codes if c[0] >= 400]
                    if bad:
                        errors.append(f"{t.name}: {len(bad)} GETs failed ({bad[0]})")
                    if any(m == "DELETE" for m, _ in plan):
                        # As the driver's logout: the last request lets its connection go (an idle connection kept
                        # per BMC made the lab hold 20,000 of them at 10,000 BMCs, and spend 64 % more CPU per request)
                        await req("DELETE", location, {**auth, "Connection": "close"})
                except Exception as e:  # noqa: BLE001 - record and keep going, as run_many does
                    errors.append(f"{t.name}: {type(e).__name__}: {e}")
                elapsed.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(t) for t in targets))
    return sent, elapsed, errors


# --- 3. the user's script: DMTF redfish, sequential -------------------------------------


def run_redfish_lib(
    targets: list[Any], plans: dict[str, list[tuple[str, str]]]
) -> tuple[list[float], list[str]]:
    import redfish

    per: list[float] = []
    errors: list[str] = []
    with warnings.catch_warnings():
        # the lab's certificates are self-signed; the redfish library does not verify
        # TLS by default (requests verify=False), so urllib3 warns on every request
        warnings.simplefilter("ignore")
        for t in targets:
            t0 = time.perf_counter()
            try:
                c = redfish.redfish_client(
                    base_url=t.url, username=USER, password=PASSWORD
                )
                c.login(auth="session")
                try:
                    gets = [p for m, p in plans[t.name] if m == "GET"]
                    if gets and gets[0].rstrip("/") == ROOT:
                        gets.pop(0)  # redfish_client() already read the service root
                    for p in gets:
                        r = c.get(p)
                        if r.status >= 400:
                            errors.append(f"{t.name}: GET {p}: HTTP {r.status}")
                finally:
                    c.logout()
            except Exception as e:  # noqa: BLE001 - record and keep going
                errors.append(f"{t.name}: {type(e).__name__}: {e}")
            per.append(time.perf_counter() - t0)
    return per, errors


# --- main --------------------------------------------------------------------------------


def fmt_load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bmcs", type=int, default=1000)
    p.add_argument("--latency-ms", type=float, default=50.0)
    p.add_argument(
        "--subset",
        type=int,
        default=50,
        help="BMCs for the sequential redfish-library loop (0: skip)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=200,
        help="BMCs worked on at once (fleetctl and bare)",
    )
    p.add_argument(
        "--per-bmc",
        type=int,
        default=2,
        help="requests in flight per BMC (BMCTarget.max_in_flight)",
    )
    p.add_argument("--address-mode", choices=("port", "address"), default="port")
    p.add_argument(
        "--profile",
        metavar="FILE",
        help="cProfile the fleetctl phase into FILE (pstats)",
    )
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    raise_nofile()

    from fleetctl_lab.bmc.spec import generate_specs
    from fleetctl_lab.daemon import lab_down, lab_up

    from fleetctl.interfaces.bmc import BMCTarget

    print(
        f"bench/bmc.py: {args.bmcs} lab BMCs, HTTPS, {args.latency_ms:g} ms injected latency per request, "
        f"concurrency {args.concurrency}, {args.per_bmc} in flight per BMC"
    )
    print(f"machine: {os.cpu_count()} CPUs, load average at start {fmt_load()}")
    state_dir = tempfile.mkdtemp(prefix="fleetctl-bench-bmc-")
    rows: list[tuple[str, str, str, str]] = []
    try:
        t0 = time.perf_counter()
        specs = generate_specs(args.bmcs)
        st = lab_up(
            specs,
            state_dir,
            config={"tls": True, "address_mode": args.address_mode},
            timeout=600,
        )
        print(
            f"lab up in {time.perf_counter() - t0:.1f} s (pid {st['pid']}, {st['count']} BMCs, control {st['control_url']})"
        )
        control = st["control_url"]
        lab_pid = int(st["pid"])
        servers = st["servers"]
        names = [s.name for s in specs]
        set_latency(control, args.latency_ms)
        targets = [
            BMCTarget(
                name=n,
                url=servers[n]["url"],
                username=USER,
                password=PASSWORD,
                fingerprint=servers[n]["fingerprint"],
                max_in_flight=args.per_bmc,
            )
            for n in names
        ]

        # 1. fleetctl
        plans = install_recorder()
        c0 = lab_counts(control, names)
        rss0 = maxrss_mb()
        cpu0 = cpu_seconds()
        prof = None
        if args.profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        lab0 = proc_cpu(lab_pid)
        t0 = time.perf_counter()
        with RssSampler() as fl_mem:
            results, in_flight = asyncio.run(run_fleetctl(targets, args.concurrency))
        fl_wall = time.perf_counter() - t0
        fl_lab_cpu = proc_cpu(lab_pid) - lab0
        if prof is not None:
            prof.disable()
            prof.dump_stats(args.profile)
        fl_cpu = cpu_seconds() - cpu0
        fl_rss = maxrss_mb()
        c1 = lab_counts(control, names)
        fl_lab = {n: c1[n] - c0[n] for n in names}
        fl_req = sum(fl_lab.values())
        failed = [r for r in results if not r.ok]
        recorded = {n: len(plans.get(n, ())) for n in names}
        mismatch = [n for n in names if recorded[n] != fl_lab[n]]
        fl_elapsed = sorted(r.elapsed for r in results)

        print("\n[1] fleetctl: run_many(facts + power.state)")
        print(
            f"    wall {fl_wall:.2f} s, {fl_req} requests (lab count) = {fl_req / fl_wall:,.0f} req/s, "
            f"{len(results) - len(failed)}/{len(results)} BMCs ok"
        )
        print(
            f"    CPU {fl_cpu:.2f} s = {fl_cpu / args.bmcs * 1000:.2f} ms per BMC "
            f"({fl_cpu / max(fl_req, 1) * 1e6:.0f} us per request); lab process CPU {fl_lab_cpu:.2f} s"
        )
        print(
            f"    peak RSS {fl_rss:.0f} MB (ru_maxrss; {rss0:.0f} MB before the phase; "
            f"sampled peak during the phase {fl_mem.peak_mb:.0f} MB)"
        )
        print(
            f"    per BMC: median {statistics.median(fl_elapsed):.2f} s, max {fl_elapsed[-1]:.2f} s "
            f"login to logout; max in flight seen {max(in_flight.values(), default=0)}"
        )
        if failed:
            print(f"    FAILED {len(failed)}: {failed[0].target}: {failed[0].error}")
        if mismatch:
            n = mismatch[0]
            print(
                f"    NOTE: recorded != lab count on {len(mismatch)} BMCs (e.g. {n}: {recorded[n]} vs {fl_lab[n]})"
            )
        by_count = Counter(fl_lab.values())
        print(
            "    requests per BMC (lab count): "
            + ", ".join(f"{k} x{v}" for k, v in sorted(by_count.items()))
        )
        flav = defaultdict(set)
        for s in specs:
            flav[s.flavour].add(len(plans.get(s.name, ())))
        print(
            "    by flavour: "
            + ", ".join(f"{f} {'/'.join(map(str, sorted(v)))}" for f, v in flav.items())
        )
        methods = Counter(m for n in names for m, _ in plans.get(n, ()))
        print("    methods: " + ", ".join(f"{m} {c}" for m, c in methods.most_common()))

        # 2. bare aiohttp, the same requests
        c0 = lab_counts(control, names)
        cpu0 = cpu_seconds()
        lab0 = proc_cpu(lab_pid)
        t0 = time.perf_counter()
        with RssSampler() as bare_mem:
            bare_sent, bare_elapsed, bare_err = asyncio.run(
                run_bare(targets, plans, args.concurrency, args.per_bmc)
            )
        bare_wall = time.perf_counter() - t0
        bare_lab_cpu = proc_cpu(lab_pid) - lab0
        bare_cpu = cpu_seconds() - cpu0
        c1 = lab_counts(control, names)
        bare_lab = {n: c1[n] - c0[n] for n in names}
        bare_req = sum(bare_lab.values())
        same = sum(1 for n in names if bare_lab[n] == fl_lab[n])
        bare_elapsed.sort()
        print(
            "\n[2] floor: bare aiohttp, the recorded requests replayed under the same bounds"
        )
        print(
            f"    wall {bare_wall:.2f} s, {bare_req} requests (lab count; sent {bare_sent}) = "
            f"{bare_req / bare_wall:,.0f} req/s; CPU {bare_cpu:.2f} s = {bare_cpu / args.bmcs * 1000:.2f} ms per BMC "
            f"({bare_cpu / max(bare_req, 1) * 1e6:.0f} us per request)"
        )
        print(
            f"    lab process CPU {bare_lab_cpu:.2f} s; sampled peak RSS during the phase {bare_mem.peak_mb:.0f} MB"
        )
        print(
            f"    per BMC: median {statistics.median(bare_elapsed):.2f} s, max {bare_elapsed[-1]:.2f} s; "
            f"same request count as fleetctl on {same}/{len(names)} BMCs"
        )
        print(
            "    requests per BMC (lab count): "
            + ", ".join(
                f"{k} x{v}" for k, v in sorted(Counter(bare_lab.values()).items())
            )
        )
        if bare_err:
            print(f"    ERRORS {len(bare_err)}: {bare_err[0]}")

        # 3. the DMTF redfish library, sequential, on a subset
        rf_per_bmc = None
        if args.subset > 0:
            subset = targets[: args.subset]
            sub_names = [t.name for t in subset]
            c0 = lab_counts(control, sub_names)
            t0 = time.perf_counter()
            per, rf_err = run_redfish_lib(subset, plans)
            rf_wall = time.perf_counter() - t0
            c1 = lab_counts(control, sub_names)
            rf_lab = {n: c1[n] - c0[n] for n in sub_names}
            rf_per_bmc = rf_wall / len(subset)
            print(
                f"\n[3] DMTF redfish library {_redfish_version()}, sequential loop over {len(subset)} BMCs "
                "(TLS NOT verified: the library passes verify=False unless given a cafile; "
                "lab certificates are self-signed)"
            )
            print(
                f"    wall {rf_wall:.2f} s = {rf_per_bmc:.3f} s per BMC (median {statistics.median(per):.3f} s), "
                f"{sum(rf_lab.values())} requests (lab count)"
            )
            print(
                "    requests per BMC (lab count): "
                + ", ".join(
                    f"{k} x{v}" for k, v in sorted(Counter(rf_lab.values()).items())
                )
                + "; fleetctl on the same BMCs: "
                + ", ".join(
                    f"{k} x{v}"
                    for k, v in sorted(Counter(fl_lab[n] for n in sub_names).items())
                )
            )
            if rf_err:
                print(f"    ERRORS {len(rf_err)}: {rf_err[0]}")

        # the table
        fl_per_bmc = fl_wall / args.bmcs
        ratio = fl_wall / bare_wall
        rows.append(("fleetctl wall time", f"{fl_wall:.2f} s", "", ""))
        rows.append(
            ("fleetctl requests/s (lab count)", f"{fl_req / fl_wall:,.0f}", "", "")
        )
        rows.append(
            ("fleetctl CPU per BMC", f"{fl_cpu / args.bmcs * 1000:.2f} ms", "", "")
        )
        rows.append(("fleetctl peak RSS", f"{fl_rss:.0f} MB", "", ""))
        rows.append(
            (
                "requests per BMC fleetctl / bare",
                f"{fl_req / args.bmcs:.1f} / {bare_req / args.bmcs:.1f}",
                "equal",
                "met" if same == len(names) else "MISSED",
            )
        )
        if rf_per_bmc is not None:
            speed = rf_per_bmc / fl_per_bmc
            rows.append(("redfish lib time per BMC", f"{rf_per_bmc:.3f} s", "", ""))
            rows.append(
                ("fleetctl time per BMC", f"{fl_per_bmc * 1000:.1f} ms", "", "")
            )
            rows.append(
                (
                    "speed-up per BMC vs redfish loop",
                    f"{speed:.0f}x",
                    f">= {SPEEDUP_TARGET:.0f}x",
                    "met" if speed >= SPEEDUP_TARGET else "MISSED",
                )
            )
        rows.append(("bare aiohttp wall time", f"{bare_wall:.2f} s", "", ""))
        rows.append(
            (
                "fleetctl / bare wall time",
                f"{ratio:.2f}x",
                f"<= {FLOOR_TARGET:g}x",
                "met" if ratio <= FLOOR_TARGET else "MISSED",
            )
        )
        rows.append(("fleetctl / bare CPU", f"{fl_cpu / bare_cpu:.2f}x", "", ""))
        rows.append(
            (
                "peak RSS during phase fleetctl / bare",
                f"{fl_mem.peak_mb:.0f} / {bare_mem.peak_mb:.0f} MB",
                "",
                "",
            )
        )
        print(f"\nload average at end {fmt_load()}")
        w = max(len(r[0]) for r in rows)
        print(f"\n{'figure':<{w}}  {'value':>14}  {'target':>8}  verdict")
        for name, val, target, verdict in rows:
            print(f"{name:<{w}}  {val:>14}  {target:>8}  {verdict}")
    finally:
        down = lab_down(state_dir)
        print(f"\nlab stopped: {down}")
        import shutil

        shutil.rmtree(state_dir, ignore_errors=True)
    return 0


def _redfish_version() -> str:
    try:
        from importlib.metadata import version

        return version("redfish")
    except Exception:  # noqa: BLE001 - only a label
        return "?"


if __name__ == "__main__":
    sys.exit(main())
