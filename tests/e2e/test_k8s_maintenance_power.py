"""`power off|cycle` and `board set --state rma` on in-service live nodes: drain, act, uncordon (or hold), end to end.

The lab serves the BMCs (`fleetctl lab up --site`, its own daemon), the Kubernetes stand-in the nodes (in-process);
the site file declares the cluster. The real kubectl reads the node as fleetctl left it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabConfig, K8sLabHandle, serve_k8s
from fleetctl_lab.k8s.store import StoreConfig
from tests_helpers_bmc import counters, lab_doc, lab_up, selected_engine  # (path set in conftest)

pytestmark = [pytest.mark.slow]

KUBECTL = shutil.which("kubectl")
NODES = ("pw-01", "pw-02")  # live nodes; pw-03 is in service but no node
TAINT = "fleetctl.io/maintenance"
DRAIN = ["--delete-emptydir-data", "--drain-timeout", "30"]


def site(kubeconfig: Path) -> str:
    lines = [
        "models:",
        "- {name: g8, kind: server, vendor: Supermicro, model: SYS-821GE-TNHR, height: 2, boards: {kind: gpu, count: 8}}",
        "sites:",
        "- name: pw",
        "  clusters:",
        f"  - {{name: train, kubeconfig: {kubeconfig}, context: fleetctl-lab}}",
        "  racks:",
        "  - name: r1",
        "    height: 10",
        "    servers:",
    ]
    for i, name in enumerate((*NODES, "pw-03")):
        lines += [f"    - name: {name}", f"      serial: SYS-PW-{i}", "      model: g8", f"      position: {2 * i + 1}",
                  f"      bmc: https://{name}-bmc.pw.example", "      credential: env:BMC_PW", "      boards:"]  # fmt: skip
        lines += [f"      - {{serial: PW-{i}-{s}, slot: {s}}}" for s in range(8)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def k8s(tmp_path: Path) -> Iterator[K8sLabHandle]:
    # Where `fleetctl lab k8s up` keeps its kubeconfig: the lab's fleet names the lab's cluster by it.
    seeds = [NodeSeed(n, boards=(("gpu", 8),)) for n in NODES]
    cfg = K8sLabConfig(state_dir=tmp_path / "lab" / "k8s", pods_per_node=1, gang_size=2, store=StoreConfig(reschedule_s=0.1))
    with serve_k8s(seeds, cfg) as handle:
        yield handle


@pytest.fixture
def lab(db_url: str, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_db_args: list[str],
        k8s: K8sLabHandle) -> Iterator[dict[str, Any]]:  # fmt: skip
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    path = tmp_path / "pw.yaml"
    path.write_text(site(k8s.kubeconfig))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--site", str(path), "--no-hosts", "--power-transition", "0.1")
    assert r.code == 0, r.err
    assert cli("power", "on", *NODES, "pw-03", "--stagger", "0").code == 0
    for n in (*NODES, "pw-03"):
        assert cli("server", "set-state", n, "in-service", "--force", "--reason", "test: serving").code == 0
    doc = lab_doc(tmp_path / "lab")
    deadline = time.monotonic() + 30
    while any(counters(doc, n)["power_state"] != "On" for n in NODES):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield doc
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


def node(k: K8sLabHandle, name: str) -> dict[str, Any]:
    obj = k.obj("Node", name)
    assert obj is not None
    return obj


def training(k: K8sLabHandle, name: str) -> list[str]:
    return [p["metadata"]["name"] for p in k.pods_on(name) if p["metadata"]["namespace"] == "training"]


def kubectl_node(k: K8sLabHandle, name: str, tmp: Path) -> dict[str, Any]:
    env = {**os.environ, "KUBECONFIG": str(k.kubeconfig), "HOME": str(tmp)}
    r = subprocess.run([KUBECTL or "kubectl", "get", "node", name, "-o", "json"], env=env, capture_output=True, text=True, timeout=60,
                       check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_power_cycle_of_an_in_service_live_node_drains_cycles_uncordons(cli: Any, lab: dict[str, Any], k8s: K8sLabHandle,
                                                                         tmp_path: Path) -> None:  # fmt: skip
    # Without the flag the emptyDir pods refuse, before anything is touched (the BMC never asked).
    r = cli("power", "cycle", "pw-01")
    assert r.code == 2 and "--delete-emptydir-data" in r.err and len(r.err.strip().splitlines()) == 1
    assert counters(lab, "pw-01")["power_cycle"] == 0 and not node(k8s, "pw-01")["spec"].get("unschedulable")
    # A server in service that is no node is refused as before, without --allow-in-service (the node is not touched).
    r = cli("power", "cycle", "pw-01", "pw-03", *DRAIN)
    assert r.code == 2 and "pw-03" in r.err and "--allow-in-service" in r.err
    assert counters(lab, "pw-01")["power_cycle"] == 0 and not node(k8s, "pw-01")["spec"].get("unschedulable")
    assert cli("power", "cycle", "pw-01", "--dry-run", *DRAIN).code == 0
    assert training(k8s, "pw-01") != [] and not node(k8s, "pw-01")["spec"].get("unschedulable")

    # The drain makes the action safe: an in-service live node needs no --allow-in-service.
    k8s.set_fault(pdb="training/gang-000", refuse=1)
    r = cli("power", "cycle", "pw-01", *DRAIN, "-o", "json")
    assert r.code == 0, r.err
    [row] = json.loads(r.out)
    assert row["ok"] and row["action"] == "cycled" and row["node"] == "uncordoned"
    assert counters(lab, "pw-01")["power_cycle"] == 1
    assert training(k8s, "pw-01") == []  # evicted before the cycle (their replacements run on pw-02)
    n = node(k8s, "pw-01")
    assert not n["spec"].get("unschedulable") and not n["spec"].get("taints")
    if KUBECTL:  # the third party sees what fleetctl left
        seen = kubectl_node(k8s, "pw-01", tmp_path)
        assert not seen["spec"].get("unschedulable") and not seen["spec"].get("taints")
    rows = json.loads(cli("jobs", "list", "-o", "json").out)
    maint = [j for j in rows if j["kind"] == "k8s.maintenance"]
    assert len(maint) == 1 and maint[0]["state"] == "succeeded"
    assert json.loads(cli("k8s", "status", "pw-01", "-o", "json").out)[0]["maintenance"] is None


def test_power_cycle_of_a_rack_goes_in_waves(cli: Any, lab: dict[str, Any], k8s: K8sLabHandle) -> None:
    """--max-unavailable 1 (the default) of a rack of two live nodes: the second is cordoned only once the first is back."""
    r = cli("power", "cycle", *NODES, *DRAIN, "-o", "json")
    assert r.code == 0, r.err
    assert all(row["ok"] and row["node"] == "uncordoned" for row in json.loads(r.out))
    assert [counters(lab, n)["power_cycle"] for n in NODES] == [1, 1]
    first, second = sorted(_rows(), key=lambda m: m["started_at"])
    assert first["released_at"] <= second["started_at"]  # never both out at once
    assert not any(node(k8s, n)["spec"].get("unschedulable") for n in NODES)
    # A rack at its bound is refused before anything is touched: a node out already leaves no room under a bound of 1.
    assert cli("k8s", "cordon", "pw-02").code == 0
    r = cli("power", "cycle", "pw-01", *DRAIN)
    assert r.code == 2 and "--max-unavailable" in r.err and len(r.err.strip().splitlines()) == 1
    assert counters(lab, "pw-01")["power_cycle"] == 1 and not node(k8s, "pw-01")["spec"].get("unschedulable")


def _rows() -> list[dict[str, Any]]:
    from sqlalchemy import text

    engine = selected_engine()
    with engine.connect() as c:
        rows = [dict(r._mapping) for r in c.execute(text("SELECT * FROM k8s_maintenance ORDER BY id"))]
    engine.dispose()
    return rows


def test_power_off_keeps_the_node_cordoned_and_kubectl_sees_it(cli: Any, lab: dict[str, Any], k8s: K8sLabHandle,
                                                                 tmp_path: Path) -> None:  # fmt: skip
    r = cli("power", "off", "pw-02", "--force", *DRAIN, "-o", "json")
    assert r.code == 0, r.err
    [row] = json.loads(r.out)
    assert row["ok"] and row["node"].startswith("cordoned, held by job")
    job = int(row["node"].rsplit(" ", 1)[1])
    n = node(k8s, "pw-02")
    assert n["spec"]["unschedulable"] is True and n["spec"]["taints"] == [{"key": TAINT, "value": f"job-{job}", "effect": "NoSchedule"}]
    if KUBECTL:
        seen = kubectl_node(k8s, "pw-02", tmp_path)
        assert seen["spec"]["unschedulable"] is True and seen["spec"]["taints"][0]["value"] == f"job-{job}"
    [held] = [s["maintenance"] for s in json.loads(cli("k8s", "status", "pw-02", "-o", "json").out)]
    assert held["state"] == "held" and "powered off" in held["reason"] and held["job"] == job
    assert cli("k8s", "uncordon", "pw-02").code == 0
    assert not node(k8s, "pw-02")["spec"].get("unschedulable")


def test_board_rma_on_a_live_node_drains_and_holds_it(cli: Any, lab: dict[str, Any], k8s: K8sLabHandle) -> None:
    r = cli("board", "set", "PW-0-3", "--state", "rma", "--reason", "test: xid 79")
    assert r.code == 2 and "--delete-emptydir-data" in r.err
    assert json.loads(cli("board", "show", "PW-0-3", "-o", "json").out)["state"] != "rma"  # refused before the board moved
    r = cli("board", "set", "PW-0-3", "--state", "rma", "--reason", "test: xid 79", *DRAIN)
    assert r.code == 0, r.err
    assert "-> rma" in r.out and "cordoned, held by job" in r.out
    assert json.loads(cli("board", "show", "PW-0-3", "-o", "json").out)["state"] == "rma"
    assert node(k8s, "pw-01")["spec"]["unschedulable"] is True and training(k8s, "pw-01") == []
    [held] = [s["maintenance"] for s in json.loads(cli("k8s", "status", "pw-01", "-o", "json").out)]
    assert held["state"] == "held" and "PW-0-3 sent for RMA" in held["reason"]


def test_a_server_not_in_service_is_not_drained(cli: Any, lab: dict[str, Any], k8s: K8sLabHandle) -> None:
    """Only servers in service run users' pods (the lifecycle's rule): the cluster of any other is not asked."""
    assert cli("server", "set-state", "pw-02", "maintenance", "--force", "--reason", "test: out of service").code == 0
    r = cli("power", "cycle", "pw-02", "-o", "json")  # no drain option needed: nothing is drained
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["ok"] and counters(lab, "pw-02")["power_cycle"] == 1
    assert not node(k8s, "pw-02")["spec"].get("unschedulable") and training(k8s, "pw-02") != []
    assert not [j for j in json.loads(cli("jobs", "list", "-o", "json").out) if j["kind"] == "k8s.maintenance"]
