"""`fleetctl lab k8s up|status|fault|down`: the stand-in as a daemon, its nodes the lab's servers, checked with kubectl."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.bmc.spec import generate_specs

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (Debian package kubectl): nothing checks the stand-in")


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    return subprocess.run([KUBECTL or "kubectl", *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_up_from_the_labs_servers_fault_and_down(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = tmp_path / "lab"
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(lab))
    r = cli("lab", "k8s", "up")
    assert r.code == 2 and "fleetctl lab up first, or give --generate N" in r.err  # no lab, no --generate: one line, exit 2
    # The running lab's spec.json (as `lab up` writes it) names the servers that become nodes.
    specs = generate_specs(3, prefix="k8slab")
    lab.mkdir()
    (lab / "spec.json").write_text(json.dumps({"servers": [s.model_dump(mode="json") for s in specs], "config": {}}))
    r = cli("lab", "k8s", "up", "--pods-per-node", "2")
    try:
        assert r.code == 0, r.err
        export = r.out.strip().splitlines()[-1]
        assert export.startswith("export KUBECONFIG=")
        kubeconfig = Path(export.split("=", 1)[1])
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        token = json.loads(kubeconfig.read_text())["users"][0]["user"]["token"]
        st = cli("lab", "k8s", "status", "-o", "json")
        assert st.code == 0 and json.loads(st.out)["nodes"] == 3 and json.loads(st.out)["pods"] == 3 * 2 + 3 * 2
        assert token not in st.out and token not in r.out and token not in (lab / "k8s" / "k8s.json").read_text()
        assert token not in (lab / "k8s" / "k8s.log").read_text()
        nodes = json.loads(kubectl(kubeconfig, "get", "nodes", "-o", "json").stdout)["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == sorted(s.name for s in specs)
        gpu = next(n for n in nodes if "gpu" in n["metadata"]["name"])
        assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        name = specs[0].name
        assert cli("lab", "k8s", "fault", "--node", name).code == 0
        ready = kubectl(kubeconfig, "get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}")
        assert ready.stdout == "Unknown"
        assert "NotReady" in kubectl(kubeconfig, "get", "node", name).stdout
        bad = cli("lab", "k8s", "fault", "--pdb", "training/nope", "--refuse", "1")
        assert bad.code == 2 and "not found" in bad.err
        assert cli("lab", "k8s", "fault", "--pdb", "training/gang-000", "--refuse", "1").code == 0
        again = cli("lab", "k8s", "up", "--generate", "1")
        assert again.code != 0 and "already runs" in again.err
    finally:
        down = cli("lab", "k8s", "down")
    assert down.code == 0 and "stopped" in down.out
    assert cli("lab", "k8s", "status").code == 1
    assert not (lab / "k8s" / "k8s.json").exists()
