"""`fleetctl k8s status` end to end: the CLI, the inventory, the lightkube driver and the lab's API stand-in.

The stand-in (fleetctl_lab.k8s, its fidelity checked by the real kubectl in
test_lab_k8s_kubectl.py) serves the nodes; a node whose device plugin
advertises fewer boards than the inventory holds is seeded with fewer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.k8s.objects import NodeSeed
from fleetctl_lab.k8s.server import K8sLabConfig, K8sLabHandle, serve_k8s
from tests_helpers_bmc import lab_up  # (path set in conftest)

# The inventory: four GPU servers of 8 boards; one more not in any node of the cluster.
SERVERS = ("gpu-ok", "gpu-cordoned", "gpu-short", "gpu-down", "gpu-absent")


def site(kubeconfig: Path, *, context: str = "fleetctl-lab", declared: dict[str, str] | None = None) -> str:
    declared = declared or {}
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
    for i, name in enumerate(SERVERS):
        lines += [f"    - name: {name}", f"      serial: S-{i}", "      model: gpu8", f"      position: {i + 1}"]
        if name in declared:
            lines.append(f"      node: {declared[name]}")
        lines.append("      boards:")
        lines += [f"      - {{serial: B-{i}-{s}, slot: {s}}}" for s in range(8)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def k8s() -> Iterator[K8sLabHandle]:
    seeds = [NodeSeed("gpu-ok", boards=(("gpu", 8),)), NodeSeed("gpu-cordoned", boards=(("gpu", 8),)),
             # its device plugin advertises 6 of the 8 boards the inventory holds
             NodeSeed("gpu-short", boards=(("gpu", 6),)), NodeSeed("gpu-down", boards=(("gpu", 8),))]  # fmt: skip
    with serve_k8s(seeds, K8sLabConfig(pods_per_node=1, gang_size=2)) as handle:
        handle.set_fault(node="gpu-down", ready=False)
        _cordon(handle, "gpu-cordoned")
        yield handle


def _cordon(handle: K8sLabHandle, node: str) -> None:
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import Node

    with Client(KubeConfig.from_file(handle.kubeconfig).get(), trust_env=False) as c:  # type: ignore[attr-defined]
        # cordoned by an operator who also said why, in a taint of their own
        taint = {"key": "example.com/repair", "value": "psu", "effect": "NoSchedule"}
        c.patch(Node, node, {"spec": {"unschedulable": True, "taints": [taint]}})


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any, k8s: K8sLabHandle) -> Path:
    monkeypatch.setenv("FLEETCTL_DB", f"sqlite:///{tmp_path / 'inv.db'}")
    path = tmp_path / "site.yaml"
    path.write_text(site(k8s.kubeconfig))
    r = cli("inventory", "import", str(path))
    assert r.code == 0, r.err
    return path


def _status(cli: Any, *targets: str) -> dict[str, dict[str, Any]]:
    r = cli("k8s", "status", *targets, "-o", "json")
    assert r.code == 0, r.err
    return {row["server"]: row for row in json.loads(r.out)}


def test_status_of_healthy_cordoned_short_and_notready_nodes(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    rows = _status(cli, "r1")
    assert set(rows) == set(SERVERS)
    ok = rows["gpu-ok"]
    assert (ok["node"], ok["node_from"], ok["ready"], ok["cordoned"], ok["taints"]) == ("gpu-ok", "server name", "True", False, [])
    assert ok["accelerators"] == [{"kind": "gpu", "resource": "nvidia.com/gpu", "inventory": 8, "advertised": 8}]
    # its pods, highest priority first (the DaemonSet pods of kube-system), each with the budgets covering it
    prios = [p["priority"] for p in ok["pods"]]
    assert prios == sorted(prios, reverse=True) and len(ok["pods"]) == 3
    training = [p for p in ok["pods"] if p["namespace"] == "training"]
    assert len(training) == 1 and training[0]["budgets"] == ["training/gang-000"] and training[0]["owner"] == "Job"
    assert all(p["budgets"] == [] and p["owner"] == "DaemonSet" for p in ok["pods"] if p["namespace"] == "kube-system")

    cordoned = rows["gpu-cordoned"]
    assert cordoned["cordoned"] is True and cordoned["ready"] == "True"
    assert cordoned["taints"] == [{"key": "example.com/repair", "value": "psu", "effect": "NoSchedule"}]

    short = rows["gpu-short"]
    assert short["accelerators"][0]["advertised"] == 6 and short["accelerators"][0]["inventory"] == 8

    down = rows["gpu-down"]
    assert (down["ready"], down["ready_reason"]) == ("Unknown", "NodeStatusUnknown")

    absent = rows["gpu-absent"]  # in the cluster's site, but no node of its name: shown, not an error
    assert absent["node"] is None and absent["pods"] == []

    table = cli("k8s", "status", "r1")
    assert table.code == 0, table.err
    assert "gpu 6/8 fewer" in table.out and "gpu 8/8" in table.out and "training/gang-000" in table.out
    assert "(no node)" in table.out and "example.com/repair=psu:NoSchedule" in table.out


def test_the_token_is_nowhere(cli: Any, fleet: Path, k8s: K8sLabHandle, tmp_path: Path) -> None:
    token = json.loads(k8s.kubeconfig.read_text())["users"][0]["user"]["token"]
    outs = [cli("k8s", "status", "all", "-o", fmt) for fmt in ("json", "table", "yaml")]
    outs.append(cli("inventory", "export", "--output", "yaml"))
    assert all(r.code == 0 for r in outs)
    assert not any(token in r.out or token in r.err for r in outs)
    assert token.encode() not in (tmp_path / "inv.db").read_bytes()


def test_a_declared_node_is_used_and_an_unknown_one_refused(cli: Any, fleet: Path, k8s: K8sLabHandle, tmp_path: Path) -> None:
    fleet.write_text(site(k8s.kubeconfig, declared={"gpu-absent": "gpu-ok"}))
    assert cli("inventory", "import", str(fleet)).code == 0
    assert _status(cli, "gpu-absent")["gpu-absent"]["node_from"] == "declared"
    fleet.write_text(site(k8s.kubeconfig, declared={"gpu-absent": "no-such-node"}))
    assert cli("inventory", "import", str(fleet)).code == 0
    r = cli("k8s", "status", "gpu-absent")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "gpu-absent: node 'no-such-node' is not in cluster train" in r.err


@pytest.mark.parametrize("case", ["no-node", "no-context", "no-kubeconfig", "no-answer", "not-in-a-cluster", "bad-target"])
def test_bad_input_is_one_line_exit_2(cli: Any, fleet: Path, k8s: K8sLabHandle, tmp_path: Path, case: str) -> None:
    target = "gpu-absent" if case == "no-node" else "gpu-ok"
    if case == "no-context":
        fleet.write_text(site(k8s.kubeconfig, context="elsewhere"))
    elif case == "no-kubeconfig":
        fleet.write_text(site(tmp_path / "nothing-here"))
    elif case == "no-answer":
        # the same kubeconfig, its server a loopback port nothing listens on
        cfg = json.loads(k8s.kubeconfig.read_text())
        cfg["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"
        dead = tmp_path / "dead-kubeconfig"
        dead.write_text(json.dumps(cfg))
        fleet.write_text(site(dead))
    elif case == "not-in-a-cluster":
        declared = f"  clusters:\n  - {{name: train, kubeconfig: {k8s.kubeconfig}, context: fleetctl-lab}}\n"
        fleet.write_text(site(k8s.kubeconfig).replace(declared, ""))
    elif case == "bad-target":
        target = "nosuch"
    if fleet.read_text() != site(k8s.kubeconfig):
        r = cli("inventory", "import", str(fleet))
        assert r.code == 0, r.err
    before = k8s.counters()
    r = cli("k8s", "status", target)
    assert r.code == 2, (r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    expected = {
        "no-node": "no node in the cluster for gpu-absent (looked for gpu-absent)",
        "no-context": "the kubeconfig has no context 'elsewhere' (it has: fleetctl-lab)",
        "no-kubeconfig": "no kubeconfig file at",
        "no-answer": "cluster train (",
        "not-in-a-cluster": "gpu-ok: not in a Kubernetes cluster",
        "bad-target": "no server, rack or site named 'nosuch'",
    }[case]
    assert expected in err, err
    if case == "no-answer":
        assert "does not answer" in err
    assert k8s.counters() == before  # nothing evicted, nothing changed


def test_a_new_users_lab_lab_k8s_and_status(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleetctl lab up` + `fleetctl lab k8s up` + `fleetctl k8s status`: the lab's site file declares its cluster."""
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, "--generate", "2")
    assert r.code == 0, r.err
    try:
        assert cli("lab", "k8s", "up").code == 0
        try:
            st = cli("k8s", "status", "all", "-o", "json")
            assert st.code == 0, st.err
            rows = json.loads(st.out)
            assert len(rows) == 2 and all(x["ready"] == "True" and x["node"] == x["server"] for x in rows), rows
            assert {x["cluster"] for x in rows} == {"lab"}
        finally:
            assert cli("lab", "k8s", "down").code == 0
    finally:
        assert cli("lab", "down").code == 0


def test_sweep_at_the_k8s_level_finds_a_node_advertising_fewer(cli: Any, fleet: Path, k8s: K8sLabHandle) -> None:
    r = cli("sweep", "run", "r1", "--level", "k8s", "--output", "json")
    assert r.code == 5, r.err  # a new critical finding
    found = [f for f in json.loads(r.out)["new"] if f["check"] == "k8s.accelerators"]
    assert [(f["target"], f["status"], f["subject"]) for f in found] == [("gpu-short", "critical", "gpu")], found
    assert "advertises 6 nvidia.com/gpu of the 8 gpu boards the inventory holds" in found[0]["message"]
    listed = {(c["kind"], c["name"]): c["level"] for c in json.loads(cli("sweep", "checks", "-o", "json").out)}
    assert listed[("server", "k8s.accelerators")] == "k8s"  # `sweep checks` lists every level's
    # at the bmc level the check does not run
    bmc = cli("sweep", "run", "r1", "--output", "json")
    assert not [f for f in json.loads(bmc.out)["new"] if f["check"] == "k8s.accelerators"]


def test_sweep_of_a_cluster_that_does_not_answer_is_unknown_not_the_end(cli: Any, fleet: Path, k8s: K8sLabHandle, tmp_path: Path) -> None:
    cfg = json.loads(k8s.kubeconfig.read_text())
    cfg["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(json.dumps(cfg))
    fleet.write_text(site(dead))
    assert cli("inventory", "import", str(fleet)).code == 0
    r = cli("sweep", "run", "r1", "--level", "k8s", "--output", "json")
    assert r.code == 4, r.err  # a new unknown: the targets are still judged, the sweep is stored
    found = [f for f in json.loads(r.out)["new"] if f["check"] == "k8s.accelerators"]
    assert sorted(f["target"] for f in found) == sorted(SERVERS) and {f["status"] for f in found} == {"unknown"}
    assert "does not answer" in found[0]["message"]
