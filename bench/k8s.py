"""Drain and uncordon of a lab cluster's nodes in waves: fleetctl's maintenance against a bare client's floor.

Issue 22's Measure: 1,000 lab nodes with 20 pods each, in waves under
``--max-unavailable 5%`` of each rack (``fleetctl.k8s.waves.plan_waves``);
per node: cordon with the taint naming the job, drain through the Eviction
API (DaemonSet pods left, the emptyDir training pods evicted, budgets
honoured: a 429 asked again after ``--retry``), uncordon; journaled in the
store. The stand-in runs as its own daemon (``fleetctl_lab.k8s.daemon``,
HTTPS, the token in its kubeconfig), counting the requests it serves.

Then the floor: a fresh stand-in, and a bare httpx client sending the same
requests (cordon patch, the node's pods, an eviction per pod with the uid and
the same retry, the pods again until gone, uncordon patch) in the same waves
and threads, with no store, no models, no checks.

Prints per run: wall time, this process's CPU per node (the stand-in's is its
own process), API requests per node; asserts nothing. The stand-in answers
from one Python process, so the wall times are mostly its own; the CPU per
node is fleetctl's.

    .venv/bin/python bench/k8s.py [--nodes 1000] [--pods 20] [--max-unavailable 5%] [--rack-size 40] [--threads 8]
        [--retry 0.05] [--gang-size 4] [--skip-bare]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def site_yaml(names: list[str], kubeconfig: Path, rack_size: int) -> str:
    lines = ["models:", "- {name: lab, kind: server, vendor: Acme, model: Lab, height: 1}", "sites:", "- name: bench", "  clusters:",
             f"  - {{name: lab, kubeconfig: {kubeconfig}, context: fleetctl-lab}}", "  racks:"]  # fmt: skip
    for r in range(0, len(names), rack_size):
        lines += [f"  - name: r{r // rack_size:03d}", f"    height: {rack_size}", "    servers:"]
        for i, n in enumerate(names[r : r + rack_size]):
            lines += [f"    - {{name: {n}, serial: S-{n}, model: lab, position: {i + 1}}}"]
    return "\n".join(lines) + "\n"


def lab_up(state: Path, args: argparse.Namespace) -> dict[str, Any]:
    from fleetctl_lab.k8s.daemon import k8s_up

    return k8s_up(state, ["--generate", str(args.nodes), "--pods-per-node", str(args.pods), "--gang-size", str(args.gang_size),
                          "--reschedule-s", "0"], timeout=600)  # fmt: skip


def lab_requests(state: Path) -> tuple[int, dict[str, int]]:
    from fleetctl_lab.k8s.daemon import k8s_status

    st = k8s_status(state)
    return int(st.get("requests", 0)), dict(st.get("counters") or {})


def in_waves(waves: list[list[str]], threads: int, step: Callable[[str], None]) -> None:
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for wave in waves:
            list(pool.map(step, wave))


def run_fleetctl(state: Path, names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from fleetctl.k8s import maintenance as m
    from fleetctl.k8s.nodes import node_refs
    from fleetctl.k8s.waves import parse_max_unavailable, plan_waves
    from fleetctl.store import get_engine
    from fleetctl.workflows.journal import JobState, Journal

    engine = get_engine()
    options = m.DrainOptions(timeout_s=600, delete_emptydir_data=True, retry_s=args.retry, poll_s=args.retry)
    req0, _ = lab_requests(state)
    cpu0, t0 = _cpu(), time.perf_counter()
    with engine.connect() as c:
        live = m.check(c, names, options=options)  # everything checked first: the cluster, the nodes, the pods' verdicts
        racks = {r.server: r.rack for r in node_refs(c, names)}
    sizes: dict[str, int] = {}
    for rack in racks.values():
        sizes[f"rack {rack}"] = sizes.get(f"rack {rack}", 0) + 1
    plan = plan_waves({n: [f"rack {racks[n]}"] for n in live}, sizes, parse_max_unavailable(args.max_unavailable))
    job = Journal.open(engine, kind="bench.k8s", target="bench", args={}, actor="bench").job_id
    t_plan = time.perf_counter() - t0

    def enter(n: str) -> None:
        with engine.connect() as c:
            m.enter(c, n, job=job, why="bench", options=options)

    def leave(n: str) -> None:
        with engine.connect() as c:
            m.leave(c, n, job=job, ok=True)

    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        for wave in plan.waves:
            list(pool.map(enter, wave))  # the wave's action would run here
            list(pool.map(leave, wave))
    Journal(engine, job, "bench", kind="bench.k8s").finish(JobState.SUCCEEDED, None)
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    req1, counters = lab_requests(state)
    with engine.connect() as c:
        assert not m.held(c), "a node left held"
    return {"wall_s": wall, "plan_s": t_plan, "cpu_s": cpu, "requests": req1 - req0, "waves": len(plan.waves), "counters": counters}


def run_bare(state: Path, kubeconfig: Path, waves: list[list[str]], args: argparse.Namespace) -> dict[str, Any]:
    """The same requests through httpx alone: the floor of what the API costs."""
    import ssl

    import httpx

    cfg = json.loads(kubeconfig.read_text())
    server = cfg["clusters"][0]["cluster"]["server"]
    ca = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    token = cfg["users"][0]["user"]["token"]
    ctx = ssl.create_default_context(cadata=ca)
    headers = {"Authorization": f"Bearer {token}"}
    merge = {"Content-Type": "application/merge-patch+json"}
    req0, _ = lab_requests(state)
    cpu0, t0 = _cpu(), time.perf_counter()

    def one(n: str) -> None:
        with httpx.Client(base_url=server, verify=ctx, headers=headers, timeout=30) as h:
            node = h.get(f"/api/v1/nodes/{n}").json()
            taint = {"key": "fleetctl.io/maintenance", "value": "job-0", "effect": "NoSchedule"}
            h.patch(f"/api/v1/nodes/{n}", content=json.dumps({"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                    "spec": {"unschedulable": True, "taints": [taint]}}), headers=merge).raise_for_status()  # fmt: skip
            pods = h.get("/api/v1/pods", params={"fieldSelector": f"spec.nodeName={n}", "limit": 500}).json()["items"]
            go = [p for p in pods if not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or [])]
            h.get("/apis/policy/v1/poddisruptionbudgets", params={"limit": 500})
            for p in go:
                md = p["metadata"]
                body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": md["name"], "namespace": md["namespace"]},
                        "deleteOptions": {"preconditions": {"uid": md["uid"]}}}  # fmt: skip
                while h.post(f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}/eviction", json=body).status_code == 429:
                    time.sleep(args.retry)
            while True:
                left = h.get("/api/v1/pods", params={"fieldSelector": f"spec.nodeName={n}", "limit": 500}).json()["items"]
                uids = {p["metadata"]["uid"] for p in go}
                if not any(p["metadata"]["uid"] in uids for p in left):
                    break
                time.sleep(args.retry)
            node = h.get(f"/api/v1/nodes/{n}").json()
            h.patch(f"/api/v1/nodes/{n}", content=json.dumps({"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                    "spec": {"unschedulable": None, "taints": None}}), headers=merge).raise_for_status()  # fmt: skip

    in_waves(waves, args.threads, one)
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    req1, counters = lab_requests(state)
    return {"wall_s": wall, "cpu_s": cpu, "requests": req1 - req0, "counters": counters}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=20)
    p.add_argument("--gang-size", type=int, default=4)
    p.add_argument("--max-unavailable", default="5%")
    p.add_argument("--rack-size", type=int, default=40)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--retry", type=float, default=0.05, help="seconds before a refused eviction is asked again (kubectl: 5)")
    p.add_argument("--skip-bare", action="store_true")
    args = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="fleetctl-bench-k8s-"))
    os.environ.update({"FLEETCTL_DB": f"sqlite:///{tmp / 'fleet.db'}", "FLEETCTL_DATA_DIR": str(tmp / "data"),
                       "FLEETCTL_LAB_DIR": str(tmp / "lab"), "FLEETCTL_ACTOR": "bench"})  # fmt: skip
    from fleetctl_lab.bmc.spec import generate_specs
    from fleetctl_lab.k8s.daemon import k8s_down

    state = tmp / "lab" / "k8s"
    names = [s.name for s in generate_specs(args.nodes)]
    t = time.perf_counter()
    st = lab_up(state, args)
    print(f"stand-in: {args.nodes} nodes, {st.get('pods')} pods, up in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    kubeconfig = Path(st["kubeconfig"])
    (tmp / "site.yaml").write_text(site_yaml(names, kubeconfig, args.rack_size))
    from fleetctl.inventory.service import import_path

    import_path(tmp / "site.yaml")
    try:
        ours = run_fleetctl(state, names, args)
    finally:
        k8s_down(state)
    bare = None
    if not args.skip_bare:
        from fleetctl.k8s.waves import parse_max_unavailable, plan_waves

        racks = {n: f"rack {i // args.rack_size}" for i, n in enumerate(names)}
        sizes: dict[str, int] = {}
        for r in racks.values():
            sizes[r] = sizes.get(r, 0) + 1
        waves = plan_waves({n: [racks[n]] for n in names}, sizes, parse_max_unavailable(args.max_unavailable)).waves
        st = lab_up(state, args)
        try:
            bare = run_bare(state, Path(st["kubeconfig"]), waves, args)
        finally:
            k8s_down(state)

    n = args.nodes
    rows = [("fleetctl", ours)] + ([("bare httpx", bare)] if bare else [])
    print(f"\n{n} nodes x {args.pods} pods, {ours['waves']} waves (max-unavailable {args.max_unavailable} of racks of {args.rack_size}), "
          f"{args.threads} threads, retry {args.retry} s")  # fmt: skip
    print(f"{'run':<12} {'wall s':>8} {'CPU ms/node':>12} {'requests/node':>14} {'evictions':>10} {'refused (429)':>14}")
    for label, r in rows:
        c = r["counters"]
        print(f"{label:<12} {r['wall_s']:>8.1f} {1000 * r['cpu_s'] / n:>12.1f} {r['requests'] / n:>14.1f} {c.get('evictions', 0):>10} "
              f"{c.get('evictions_refused', 0):>14}")  # fmt: skip
    print(f"fleetctl's checks and plan before the first node: {ours['plan_s']:.1f} s")
    if bare:
        print(f"fleetctl / bare: wall {ours['wall_s'] / bare['wall_s']:.2f}x, requests {ours['requests'] / max(bare['requests'], 1):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
