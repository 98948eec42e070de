"""`fleetctl k8s cordon|drain|uncordon` and the journaled maintenance end to end: the CLI, the store, the lightkube
driver and the lab's Kubernetes API stand-in (its fidelity checked by the real kubectl, test_lab_k8s_kubectl.py).

The stand-in seeds every node with two DaemonSet pods (kube-proxy, the device plugin) and training pods of a Job,
with an emptyDir scratch volume and a PodDisruptionBudget per gang (maxUnavailable 1): a drain needs
--delete-emptydir-data, and a budget fault (``pdb=NS/NAME refuse=N|seconds=T``) makes it wait.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.k8s.objects import NodeSeed, make_pod
from fleetctl_lab.k8s.server import K8sLabConfig, K8sLabHandle, serve_k8s
from fleetctl_lab.k8s.store import StoreConfig
from sqlalchemy import create_engine, text

NODES = ("gpu-a", "gpu-b", "gpu-c", "gpu-d")
TAINT = "fleetctl.io/maintenance"
FAST = ["--drain-timeout", "20", "--eviction-retry", "0.1"]


def site(kubeconfig: Path, *, context: str = "fleetctl-lab", extra: tuple[str, ...] = ()) -> str:
    lines = [
        "models:",
        "- {name: gpu8, kind: server, vendor: Acme, model: G8, height: 1, boards: {kind: gpu, count: 8}}",
        "sites:",
        "- name: lab",
        "  clusters:",
        f"  - {{name: train, kubeconfig: {kubeconfig}, context: {context}}}",
        "  racks:",
        "  - name: r1",
        "    servers:",
    ]
    for i, name in enumerate((*NODES, *extra)):
        lines += [f"    - name: {name}", f"      serial: S-{i}", "      model: gpu8", f"      position: {i + 1}"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def k8s() -> Iterator[K8sLabHandle]:
    # Two nodes per gang: gang-000 on gpu-a and gpu-b, gang-001 on gpu-c and gpu-d; replacements ready after 0.1 s.
    seeds = [NodeSeed(n, boards=(("gpu", 8),)) for n in NODES]
    with serve_k8s(seeds, K8sLabConfig(pods_per_node=2, gang_size=2, store=StoreConfig(reschedule_s=0.1))) as handle:
        yield handle


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any, k8s: K8sLabHandle) -> Path:
    monkeypatch.setenv("FLEETCTL_DB", f"sqlite:///{tmp_path / 'inv.db'}")
    path = tmp_path / "site.yaml"
    path.write_text(site(k8s.kubeconfig, extra=("not-a-node",)))
    r = cli("inventory", "import", str(path))
    assert r.code == 0, r.err
    return path


def node(k: K8sLabHandle, name: str) -> dict[str, Any]:
    obj = k.obj("Node", name)
    assert obj is not None
    return obj


def taints(k: K8sLabHandle, name: str) -> dict[str, str | None]:
    return {t["key"]: t.get("value") for t in node(k, name)["spec"].get("taints") or []}


def cordoned(k: K8sLabHandle, name: str) -> bool:
    return bool(node(k, name)["spec"].get("unschedulable"))


def training(k: K8sLabHandle, name: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in k.pods_on(name) if p["metadata"]["namespace"] == "training")


def maintenance_rows() -> list[dict[str, Any]]:
    engine = create_engine(os.environ["FLEETCTL_DB"])
    with engine.connect() as c:
        rows = [dict(r._mapping) for r in c.execute(text("SELECT * FROM k8s_maintenance ORDER BY id"))]
    engine.dispose()
    return rows


def status_of(cli: Any, *targets: str) -> dict[str, dict[str, Any]]:
    r = cli("k8s", "status", *targets, "-o", "json")
    assert r.code == 0, r.err
    return {row["server"]: row for row in json.loads(r.out)}


def test_a_drain_waits_on_a_budget_then_finishes_and_uncordon_releases(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    k8s.set_fault(pdb="training/gang-000", refuse=3)  # the budget refuses three evictions, then lets them through
    before = k8s.counters().get("evictions_refused", 0)
    r = cli("k8s", "drain", "gpu-a", "--delete-emptydir-data", *FAST, "-o", "json")
    assert r.code == 0, r.err
    [row] = json.loads(r.out)
    assert row["ok"] and row["node"] == "gpu-a" and row["action"] == "drained: 2 pod(s) evicted"
    assert k8s.counters()["evictions_refused"] - before >= 3  # it did wait on the budget
    assert cordoned(k8s, "gpu-a") and taints(k8s, "gpu-a") == {TAINT: f"job-{row['job']}"}
    assert training(k8s, "gpu-a") == []
    # The DaemonSet pods stay (kubectl's --ignore-daemonsets): their controller would put them back at once.
    assert sorted(p["metadata"]["namespace"] for p in k8s.pods_on("gpu-a")) == ["kube-system", "kube-system"]
    [m] = maintenance_rows()
    assert (m["server"], m["node"], m["state"], m["job_id"], m["evicted"], bool(m["was_cordoned"])) == ("gpu-a", "gpu-a", "drained",
                                                                                                         row["job"], 2, False)
    st = status_of(cli, "gpu-a")["gpu-a"]
    assert st["maintenance"]["state"] == "drained" and st["maintenance"]["job"] == row["job"]
    table = cli("k8s", "status", "gpu-a")
    assert "Held by fleetctl" in table.out and f"{TAINT}=job-{row['job']}:NoSchedule" in table.out

    r = cli("k8s", "uncordon", "gpu-a", "-o", "json")
    assert r.code == 0, r.err
    assert not cordoned(k8s, "gpu-a") and TAINT not in taints(k8s, "gpu-a")
    assert [m["state"] for m in maintenance_rows()] == ["released"]
    assert status_of(cli, "gpu-a")["gpu-a"]["maintenance"] is None


def test_a_budget_held_past_the_timeout_leaves_the_node_cordoned_and_held(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    k8s.set_fault(pdb="training/gang-000", seconds=600)
    r = cli("k8s", "drain", "gpu-b", "--delete-emptydir-data", "--drain-timeout", "1", "-o", "json")
    assert r.code == 1, r.out + r.err
    [row] = json.loads(r.out)
    assert not row["ok"] and "not drained within 1 s" in row["error"] and "training/gang-000" in row["error"]
    assert cordoned(k8s, "gpu-b") and taints(k8s, "gpu-b") == {TAINT: f"job-{row['job']}"}
    [m] = maintenance_rows()
    assert m["state"] == "held" and "training/gang-000" in m["reason"]
    held = status_of(cli, "gpu-b")["gpu-b"]["maintenance"]
    assert held["state"] == "held" and held["job"] == row["job"] and held["since"]
    jobs = json.loads(cli("jobs", "list", "-o", "json").out)
    assert next(j for j in jobs if j["id"] == row["job"])["state"] == "failed"
    shown = json.loads(cli("jobs", "show", str(row["job"]), "-o", "json").out)
    assert [(x["server"], x["state"], x["job"]) for x in shown["maintenance"]] == [("gpu-b", "held", row["job"])]
    assert "Kubernetes maintenance" in cli("jobs", "show", str(row["job"])).out


def test_emptydir_pods_refuse_the_drain_without_the_flag_and_nothing_is_cordoned(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    r = cli("k8s", "drain", "gpu-c", *FAST)
    assert r.code == 2
    assert "Pods with local storage (use --delete-emptydir-data to override)" in r.err and "training/gang-001-gpu-c-0" in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not cordoned(k8s, "gpu-c") and len(training(k8s, "gpu-c")) == 2
    assert maintenance_rows() == []
    r = cli("k8s", "drain", "gpu-c", "--delete-emptydir-data", *FAST)
    assert r.code == 0, r.err
    assert cordoned(k8s, "gpu-c") and training(k8s, "gpu-c") == []


def test_mirror_and_unmanaged_pods(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    # A static pod's mirror (the kubelet's own) and a bare pod no controller manages, on gpu-d.
    base = dict(namespace="default", node="gpu-d", labels={"app": "x"}, host_ip="127.0.0.1", pod_ip="127.0.0.1")
    mirror = make_pod(name="etcd-gpu-d", owner={"apiVersion": "v1", "kind": "Node", "name": "gpu-d", "uid": "n", "controller": True},
                      **base)  # type: ignore[arg-type]
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    bare = make_pod(name="debug-shell", owner={}, **base)  # type: ignore[arg-type]
    bare["metadata"]["ownerReferences"] = []
    k8s.call(lambda: k8s.lab.store.load([mirror, bare]))
    r = cli("k8s", "drain", "gpu-d", "--delete-emptydir-data", *FAST)
    assert r.code == 2 and "Pods that declare no controller (use --force-drain to override): default/debug-shell" in r.err
    assert not cordoned(k8s, "gpu-d")
    r = cli("k8s", "drain", "gpu-d", "--delete-emptydir-data", "--force-drain", *FAST)
    assert r.code == 0, r.err
    left = sorted(p["metadata"]["name"] for p in k8s.pods_on("gpu-d"))
    assert "etcd-gpu-d" in left and "debug-shell" not in left  # the mirror pod is left, the bare one evicted
    assert training(k8s, "gpu-d") == []


def test_a_node_cordoned_before_we_came_stays_cordoned(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    r = cli("k8s", "cordon", "gpu-c")  # an operator's cordon through fleetctl ...
    assert r.code == 0
    assert cli("k8s", "uncordon", "gpu-c").code == 0
    # ... and one by someone else, with their own taint, before fleetctl comes
    k8s.call(lambda: k8s.lab.store.patch(_node_rt(), "", "gpu-c", _cordon_with({"key": "example.com/repair", "effect": "NoSchedule"})))
    r = cli("k8s", "drain", "gpu-c", "--delete-emptydir-data", *FAST)
    assert r.code == 0, r.err
    assert set(taints(k8s, "gpu-c")) == {"example.com/repair", TAINT}
    r = cli("k8s", "uncordon", "gpu-c", "-o", "json")
    assert r.code == 0 and "left cordoned" in json.loads(r.out)[0]["action"]
    assert cordoned(k8s, "gpu-c") and taints(k8s, "gpu-c") == {"example.com/repair": None}  # only our taint went


def _node_rt() -> Any:
    from fleetctl_lab.k8s.store import BY_KIND

    return BY_KIND["Node"]


def _cordon_with(taint: dict[str, str]) -> Any:
    def patched(cur: dict[str, Any]) -> dict[str, Any]:
        new = json.loads(json.dumps(cur))
        new["spec"]["unschedulable"] = True
        new["spec"]["taints"] = [*(new["spec"].get("taints") or []), taint]
        return new

    return patched


def test_bad_input_is_one_line_exit_2_and_nothing_cordoned(cli: Any, fleet: Path, k8s: K8sLabHandle, tmp_path: Path) -> None:
    r = cli("k8s", "drain", "not-a-node", "--delete-emptydir-data")
    assert r.code == 2 and "not-a-node: no node of a declared cluster" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("k8s", "drain", "no-such-server")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    for bad in ("5x", "0", "101%", "\u0665", ""):  # refused where it enters, whatever the servers' states
        r = cli("power", "cycle", "not-a-node", "--max-unavailable", bad)
        assert r.code == 2 and "--max-unavailable" in r.err, (bad, r.err)
    # A declared node its cluster lacks.
    doc = site(k8s.kubeconfig).replace("    - name: gpu-a\n", "    - name: gpu-a\n      node: gpu-zz\n")
    (tmp_path / "declared.yaml").write_text(doc)
    assert cli("inventory", "import", str(tmp_path / "declared.yaml")).code == 0
    r = cli("k8s", "drain", "gpu-a", "gpu-b", "--delete-emptydir-data")
    assert r.code == 2 and "gpu-zz" in r.err and len(r.err.strip().splitlines()) == 1
    assert not cordoned(k8s, "gpu-b")
    # A kubeconfig without the context.
    (tmp_path / "noctx.yaml").write_text(site(k8s.kubeconfig, context="nope"))
    assert cli("inventory", "import", str(tmp_path / "noctx.yaml")).code == 0
    r = cli("k8s", "cordon", "gpu-b")
    assert r.code == 2 and "nope" in r.err and len(r.err.strip().splitlines()) == 1
    assert not cordoned(k8s, "gpu-b")
    # A server in service is drained before a disruptive command: its cluster's failure is one line, exit 2, with the way out.
    assert cli("server", "set-state", "gpu-b", "in-service", "--force", "--reason", "test: serving").code == 0
    for verb in ("off", "cycle", "restart"):
        r = cli("power", verb, "gpu-b")
        assert r.code == 2 and "nope" in r.err, (verb, r.err)
    # A cluster that does not answer: a kubeconfig naming a closed port.
    cfg = json.loads(k8s.kubeconfig.read_text())
    cfg["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(json.dumps(cfg))
    (tmp_path / "dead.yaml").write_text(site(dead))
    assert cli("inventory", "import", str(tmp_path / "dead.yaml")).code == 0
    r = cli("k8s", "drain", "gpu-b", "--delete-emptydir-data")
    assert r.code == 2 and "does not answer" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("power", "cycle", "gpu-b", "--allow-in-service")
    assert r.code == 2 and "does not answer" in r.err and "--no-drain --allow-in-service" in r.err
    assert not any(cordoned(k8s, n) for n in NODES) and maintenance_rows() == []


def test_killed_mid_drain_the_next_run_resumes_and_nothing_is_forgotten(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    k8s.set_fault(pdb="training/gang-000", seconds=600)  # the drain blocks on the budget
    proc = subprocess.Popen([sys.executable, "-m", "fleetctl", "k8s", "drain", "gpu-a", "--delete-emptydir-data", "--drain-timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (cordoned(k8s, "gpu-a") and k8s.counters().get("evictions_refused", 0) > 0):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the drain never reached the budget"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    [m] = maintenance_rows()
    assert m["state"] == "draining" and cordoned(k8s, "gpu-a")
    first_job = m["job_id"]
    # Listed by k8s status: the cordon is not forgotten.
    assert status_of(cli, "gpu-a")["gpu-a"]["maintenance"]["state"] == "draining"
    k8s.set_fault(pdb="training/gang-000", clear=True)
    r = cli("k8s", "drain", "gpu-a", "--delete-emptydir-data", *FAST, "-o", "json")
    assert r.code == 0, r.err
    [row] = json.loads(r.out)
    assert row["job"] != first_job
    [m] = maintenance_rows()  # the same row, taken over by the new job
    assert m["state"] == "drained" and m["job_id"] == row["job"] and not m["was_cordoned"]
    assert training(k8s, "gpu-a") == [] and taints(k8s, "gpu-a") == {TAINT: f"job-{row['job']}"}
    jobs = {j["id"]: j for j in json.loads(cli("jobs", "list", "-o", "json").out)}
    assert jobs[first_job]["state"] == "interrupted"
    assert cli("k8s", "uncordon", "gpu-a").code == 0
    assert not cordoned(k8s, "gpu-a") and [m["state"] for m in maintenance_rows()] == ["released"]


def test_a_job_that_still_runs_holds_its_node(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    from fleetctl.k8s import maintenance as m
    from fleetctl.store import get_engine
    from fleetctl.workflows.journal import Journal

    journal = Journal.open(get_engine(), kind="burnin", target="gpu-b", args={}, actor="tester")  # this process: alive
    with get_engine().connect() as c:
        assert set(m.live_nodes(c, ["gpu-a", "gpu-b", "not-a-node"])) == {"gpu-a", "gpu-b"}
        assert m.enter(c, "not-a-node", job=journal.job_id, why="burnin") is None  # no node: nothing done
        m.leave(c, "not-a-node", job=journal.job_id, ok=True)
        entered = m.enter(c, "gpu-b", job=journal.job_id, why="burnin", options=m.DrainOptions(delete_emptydir_data=True, timeout_s=20))
    assert entered is not None and entered.evicted == 2
    r = cli("k8s", "uncordon", "gpu-b")
    assert r.code == 2 and f"held by job {journal.job_id} (burnin, drained), which still runs" in r.err
    assert cli("server", "set-state", "gpu-b", "in-service", "--force", "--reason", "test: serving").code == 0
    r = cli("power", "cycle", "gpu-b", "--delete-emptydir-data")
    assert r.code == 2 and f"held by job {journal.job_id}" in r.err
    assert cordoned(k8s, "gpu-b")
    with get_engine().connect() as c:
        m.leave(c, "gpu-b", job=journal.job_id, ok=False, reason="burn-in found a failing board")
        m.leave(c, "gpu-b", job=journal.job_id, ok=False, reason="burn-in found a failing board")  # idempotent
        [row] = m.held(c)
    assert row.state == "held" and row.reason == "burn-in found a failing board"
    assert cordoned(k8s, "gpu-b") and taints(k8s, "gpu-b") == {TAINT: f"job-{journal.job_id}"}


def test_the_token_is_nowhere(cli: Any, fleet: Path, k8s: K8sLabHandle, tmp_path: Path) -> None:
    token = json.loads(k8s.kubeconfig.read_text())["users"][0]["user"]["token"]
    k8s.set_fault(pdb="training/gang-000", seconds=600)
    outs = [cli("k8s", "drain", "gpu-a", "--delete-emptydir-data", "--drain-timeout", "1"), cli("k8s", "status", "all", "-o", "json"),
            cli("k8s", "uncordon", "gpu-a"), cli("jobs", "list", "-o", "json")]  # fmt: skip
    assert [r.code for r in outs] == [1, 0, 0, 0]
    assert not any(token in r.out or token in r.err for r in outs)
    db = Path(os.environ["FLEETCTL_DB"].removeprefix("sqlite:///"))
    for f in (db, Path(f"{db}-wal")):
        assert not f.exists() or token.encode() not in f.read_bytes()
