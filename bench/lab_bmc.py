#!/usr/bin/env python3
"""The lab's BMC daemon alone: its CPU per Redfish request, and where it goes.

The lab (``fleetctl_lab.bmc.server.BMCLab``, HTTPS, ``--bmcs`` generated
BMCs of every flavour) runs in this process's main thread; a client in a
process of its own reads every BMC the way a sweep does: the service root,
a login, every document reachable from the root by ``@odata.id`` links (at
most ``--depth`` deep, collections expanded where the flavour offers
``$expand``), a logout; ``--passes`` times over the fleet, the later passes
with ``If-None-Match`` (a daily sweep's conditional GETs). This process's
CPU (``time.process_time``: the lab is the only thing it runs) over the
requests the lab counted gives the daemon's CPU per request, per pass.

``--profile FILE`` writes a pyinstrument profile of the lab over the whole
run (HTML if FILE ends in .html, else text).

    .venv/bin/python bench/lab_bmc.py [--bmcs 200] [--passes 3] [--concurrency 50] [--profile out.html]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


# --- the client (a process of its own) ------------------------------------------------------


async def _client(targets_file: str, passes: int, concurrency: int, depth: int) -> None:
    import aiohttp

    t = json.loads(Path(targets_file).read_text())
    user, password = t["username"], t["password"]
    conn = aiohttp.TCPConnector(ssl=False, limit=0)
    etags: dict[tuple[str, str], tuple[str, Any]] = {}  # (BMC, path) -> (ETag, document): a 304 is read as the kept one
    async with aiohttp.ClientSession(connector=conn) as http:

        async def get(base: str, path: str, token: str, conditional: bool) -> Any:
            hdrs = {"X-Auth-Token": token}
            kept = etags.get((base, path))
            if conditional and kept:
                hdrs["If-None-Match"] = kept[0]
            async with http.get(base + path, headers=hdrs) as r:
                body = await r.read()
                if r.status == 304 and kept:
                    return kept[1]
                doc = json.loads(body) if r.status == 200 and body else None
                if r.status == 200 and "ETag" in r.headers:
                    etags[(base, path)] = (r.headers["ETag"], doc)
                return doc

        async def one(base: str, conditional: bool) -> None:
            async with http.get(base + "/redfish/v1") as r:
                await r.read()
            async with http.post(base + "/redfish/v1/SessionService/Sessions", json={"UserName": user, "Password": password}) as r:
                await r.read()
                token, loc = r.headers["X-Auth-Token"], r.headers["Location"]
            seen: set[str] = set()
            level = ["/redfish/v1"]
            gate = asyncio.Semaphore(2)  # 2 in flight per BMC, as the sweep

            async def fetch(path: str) -> Any:
                async with gate:
                    return await get(base, path, token, conditional)

            for _ in range(depth):
                docs = await asyncio.gather(*(fetch(p) for p in level))
                nxt: list[str] = []
                for doc in docs:
                    for link in _links(doc):
                        if link not in seen:
                            seen.add(link)
                            nxt.append(link)
                level = nxt
            async with http.delete(base + loc, headers={"X-Auth-Token": token}) as r:
                await r.read()

        gate = asyncio.Semaphore(concurrency)

        async def bounded(base: str, conditional: bool) -> None:
            async with gate:
                await one(base, conditional)

        for k in range(passes):
            t0 = time.perf_counter()
            await asyncio.gather(*(bounded(s["url"], k > 0) for s in t["servers"].values()))
            print(json.dumps({"pass": k, "wall": time.perf_counter() - t0}), flush=True)
            sys.stdin.readline()  # the lab reads its counters between passes


def _links(doc: Any) -> list[str]:
    """Every ``@odata.id`` under a document, without fragments (#/Temperatures/0) nor actions."""
    out: list[str] = []
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "@odata.id" and isinstance(v, str) and "#" not in v and "/Actions/" not in v:
                    out.append(v.rstrip("/"))
                elif k not in ("Actions", "Links", "@odata.id"):
                    stack.append(v)
        elif isinstance(x, list):
            stack.extend(x)
    return out


# --- the lab (this process) -------------------------------------------------------------------


async def _run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from fleetctl_lab.bmc.server import BMCLab
    from fleetctl_lab.bmc.spec import LabConfig, generate_specs

    specs = generate_specs(args.bmcs)
    with tempfile.TemporaryDirectory(prefix="fleetctl-bench-lab-") as tmp:
        cfg = LabConfig(state_dir=Path(tmp) / "lab", initial_power="On", render_cache_mb=0 if args.no_cache else 256)
        lab = BMCLab(specs, cfg)
        await lab.start()
        try:
            tfile = Path(tmp) / "targets.json"
            tfile.write_text(json.dumps({"username": specs[0].username, "password": specs[0].password, "servers": lab.status()["servers"]}))
            proc = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--_client", str(tfile), str(args.passes), str(args.concurrency), str(args.depth),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            )  # fmt: skip
            assert proc.stdout is not None and proc.stdin is not None
            rows = []
            for _ in range(args.passes):
                c0, n0, h0 = time.process_time(), lab.requests, lab.render_hits
                line = await proc.stdout.readline()
                if not line:
                    break
                cpu, n, hits = time.process_time() - c0, lab.requests - n0, lab.render_hits - h0
                rows.append({**json.loads(line), "cpu": cpu, "requests": n, "hits": hits})
                proc.stdin.write(b"\n")
                await proc.stdin.drain()
            await proc.wait()
            return rows
        finally:
            await lab.stop()


def _loop_run(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.loop == "uvloop":
        import uvloop

        return uvloop.run(_run(args))
    return asyncio.run(_run(args))


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--_client":
        asyncio.run(_client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
        return 0
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--bmcs", type=int, default=200)
    p.add_argument("--passes", type=int, default=3, help="reads of the whole fleet; the later ones conditional (If-None-Match)")
    p.add_argument("--concurrency", type=int, default=50, help="BMCs at once")
    p.add_argument("--depth", type=int, default=4, help="link levels followed from the service root")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the lab's event loop")
    p.add_argument("--no-cache", action="store_true", help="render every answer (LabConfig.render_cache_mb=0)")
    p.add_argument("--profile", default="", help="write a pyinstrument profile of the lab here (.html or text)")
    args = p.parse_args()
    print(f"bench/lab_bmc.py: {args.bmcs} lab BMCs over HTTPS, {args.passes} passes, {args.concurrency} BMCs at once, "
          f"depth {args.depth}, {args.loop}, {'no render cache' if args.no_cache else 'render cache'}; "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    if args.profile:
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0005)
        prof.start()
        rows = _loop_run(args)
        prof.stop()
        out = Path(args.profile)
        out.write_text(prof.output_html() if out.suffix == ".html" else prof.output_text(unicode=False, color=False, show_all=False))
        print(f"profile written to {out}")
    else:
        rows = _loop_run(args)
    for r in rows:
        kind = "plain GETs" if r["pass"] == 0 else "conditional GETs"
        print(f"pass {r['pass']} ({kind}): {r['requests']:,} requests in {r['wall']:.1f} s; lab CPU {r['cpu']:.2f} s = "
              f"{r['cpu'] / max(r['requests'], 1) * 1000:.3f} ms per request; {r['hits']:,} answered pre-rendered")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
