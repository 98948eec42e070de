"""deploy/: the worker's systemd template unit passes `systemd-analyze verify`; its Deployment is what docs/scale-out.md says."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
INSTALLED = "/usr/local/bin/fleetctl"


def test_worker_unit_verifies(tmp_path: Path) -> None:
    exe = shutil.which("systemd-analyze")
    fleetctl = Path(sys.executable).parent / "fleetctl"
    if exe is None or not fleetctl.exists():
        pytest.skip("systemd-analyze (Debian package systemd) or this checkout's fleetctl is missing")
    text = (DEPLOY / "systemd" / "fleetctl-worker@.service").read_text()
    assert f"ExecStart={INSTALLED} worker --site %i" in text
    assert "EnvironmentFile=/etc/fleetctl/worker.env" in text and "Restart=always" in text
    unit = tmp_path / "fleetctl-worker@tyo1.service"  # an instance: %i is the site
    unit.write_text(text.replace(INSTALLED, str(fleetctl)))
    p = subprocess.run([exe, "verify", str(unit)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    if p.returncode != 0 and "Failed to" in p.stderr and "bus" in p.stderr.lower():
        pytest.skip(f"systemd-analyze cannot run here: {p.stderr.strip()[:200]}")
    assert p.returncode == 0 and (p.stdout + p.stderr).strip() == "", p.stdout + p.stderr


def test_worker_deployment() -> None:
    (dep,) = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "worker.yaml").read_text()) if d]
    assert dep["kind"] == "Deployment" and dep["spec"]["replicas"] >= 2  # a lost pod's work goes on in the other
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["terminationGracePeriodSeconds"] >= 60
    (c,) = pod["containers"]
    assert c["args"][:4] == ["fleetctl", "worker", "--site", labels["fleetctl.example.com/site"]]
    env = {e["name"]: e for e in c["env"]}
    assert env["FLEETCTL_DB"]["valueFrom"]["secretKeyRef"] == {"name": "fleetctl-db", "key": "FLEETCTL_DB"}
    assert env["FLEETCTL_TEMPORAL"]["value"].endswith(":7233") and env["FLEETCTL_TEMPORAL_NAMESPACE"]["value"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for var in ("FLEETCTL_TEMPORAL_TLS_CERT", "FLEETCTL_TEMPORAL_TLS_KEY", "FLEETCTL_TEMPORAL_TLS_CA"):
        assert str(Path(env[var]["value"]).parent) in mounts  # mTLS files mounted from a Secret
    assert {"secretRef": {"name": "fleetctl-devices"}} in c["envFrom"]  # device credentials resolved on the worker
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"/tmp", env["FLEETCTL_DATA_DIR"]["value"]} <= set(mounts)
