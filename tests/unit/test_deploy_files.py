"""deploy/: the systemd units pass `systemd-analyze verify`; the Kubernetes manifests are what docs/deploy.md says.

``systemd-analyze verify`` refuses a unit whose ExecStart binary is missing,
so it checks copies with /usr/local/bin/fleetctl pointed at this checkout's
fleetctl. It only warns (exit 0) on an unknown key or a bad value, so any
line it prints fails the test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
UNITS = ["fleetctl-sweep.service", "fleetctl-sweep.timer", "fleetctl-exporter.service"]
INSTALLED = "/usr/local/bin/fleetctl"


def _unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A unit file as {section: {key: [values]}} (comments dropped; a key may repeat)."""
    out: dict[str, dict[str, list[str]]] = {}
    section = ""
    for raw in (DEPLOY / "systemd" / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            out.setdefault(section, {})
            continue
        key, _, value = line.partition("=")
        out[section].setdefault(key.strip(), []).append(value.strip())
    return out


def _fleetctl() -> str:
    found = Path(sys.executable).parent / "fleetctl"
    return str(found) if found.exists() else (shutil.which("fleetctl") or "")


def _verify_skip_reason() -> str | None:
    exe = shutil.which("systemd-analyze")
    if exe is None:
        return "systemd-analyze not installed (Debian package systemd)"
    if not _fleetctl():
        return "no fleetctl executable to point the units' ExecStart at"
    probe = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"systemd-analyze cannot run here: {probe.stderr.strip()[:200]}"
    return None


@pytest.mark.parametrize("name", UNITS)
def test_unit_passes_systemd_analyze_verify(name: str, tmp_path: Path) -> None:
    reason = _verify_skip_reason()
    if reason:
        pytest.skip(reason)
    for unit in UNITS:  # the timer is verified with the service it starts beside it
        text = (DEPLOY / "systemd" / unit).read_text()
        (tmp_path / unit).write_text(text.replace(INSTALLED, _fleetctl()))
    p = subprocess.run(["systemd-analyze", "verify", str(tmp_path / name)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (p.stdout + p.stderr).strip() == "", p.stdout + p.stderr  # a warning is a mistake in the unit


def test_sweep_service() -> None:
    from fleetctl.cli.sweep import EXIT_BY_STATUS

    u = _unit("fleetctl-sweep.service")["Service"]
    assert u["Type"] == ["oneshot"]
    cmd = u["ExecStart"][0].split()
    assert cmd[:3] == [INSTALLED, "sweep", "all"]
    assert cmd[cmd.index("--textfile") + 1] == "/var/lib/prometheus/node-exporter"
    # The findings' exit codes are a successful run; 2 (usage) and 3 (a bug) are not.
    assert sorted(int(x) for x in u["SuccessExitStatus"][0].split()) == sorted(v for v in EXIT_BY_STATUS.values() if v)
    assert u["EnvironmentFile"] == ["/etc/fleetctl/sweep.env"]
    assert "/var/lib/prometheus/node-exporter" in u["ReadWritePaths"][0]
    assert u["User"] and u["User"] != ["root"]


def test_timer() -> None:
    t = _unit("fleetctl-sweep.timer")
    assert t["Timer"]["OnCalendar"] == ["daily"]
    assert t["Timer"]["Persistent"] == ["true"]
    assert t["Timer"]["RandomizedDelaySec"]
    assert t["Install"]["WantedBy"] == ["timers.target"]


def test_exporter_service() -> None:
    u = _unit("fleetctl-exporter.service")["Service"]
    assert u["ExecStart"][0].split()[:4] == [INSTALLED, "exporter", "--listen", "127.0.0.1:9877"]
    assert u["Restart"] == ["on-failure"]


_SECRETISH = re.compile(r"(?<![a-z])(password|passwd|secret|token)\s*[=:]\s*\S", re.I)
_URL_WITH_PASSWORD = re.compile(r"://[^/\s:@]+:[^@\s]+@")


MANIFESTS = sorted(p.relative_to(DEPLOY).as_posix() for d in ("systemd", "kubernetes") for p in (DEPLOY / d).iterdir())


@pytest.mark.parametrize("path", MANIFESTS)
def test_no_secret_in_any_deploy_file(path: str) -> None:
    for n, line in enumerate((DEPLOY / path).read_text().splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue  # comments may show the form of a URL (PASSWORD), never a value
        assert not _SECRETISH.search(line), f"{path}:{n}: {line}"
        assert not _URL_WITH_PASSWORD.search(line), f"{path}:{n}: {line}"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()) if d]


def _walk(node: Any) -> Any:
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_cronjob() -> None:
    (cj,) = _docs("sweep-cronjob.yaml")
    assert cj["apiVersion"] == "batch/v1" and cj["kind"] == "CronJob"
    spec = cj["spec"]
    fields = spec["schedule"].split()
    assert len(fields) == 5 and fields[2:] == ["*", "*", "*"]  # daily
    assert spec["concurrencyPolicy"] == "Forbid"
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] in ("Never", "OnFailure")
    (c,) = pod["containers"]
    script = " ".join([*c.get("command", []), *c.get("args", [])])
    assert "fleetctl sweep all" in script
    assert re.search(r"0\|1\|4\|5\)\s*exit 0", script)  # findings are not a failed Job
    env = {e["name"]: e for e in c["env"]}
    assert env["FLEETCTL_DB"]["valueFrom"]["secretKeyRef"] == {"name": "fleetctl-db", "key": "FLEETCTL_DB"}
    assert {"secretRef": {"name": "fleetctl-devices"}} in c["envFrom"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert {"/tmp", env["FLEETCTL_DATA_DIR"]["value"]} <= mounts  # writable where fleetctl writes


def test_exporter_deployment_and_service() -> None:
    dep, svc = _docs("exporter.yaml")
    assert dep["kind"] == "Deployment" and svc["kind"] == "Service"
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    (c,) = pod["containers"]
    assert c["args"][:2] == ["fleetctl", "exporter"]
    port = int(c["args"][c["args"].index("--listen") + 1].rpartition(":")[2])
    assert c["ports"][0]["containerPort"] == port
    assert svc["spec"]["ports"][0]["targetPort"] in (port, c["ports"][0]["name"])
    # The exporter gets the database and nothing else: no device credentials.
    assert "envFrom" not in c
    assert [e["valueFrom"]["secretKeyRef"]["name"] for e in c["env"] if "valueFrom" in e] == ["fleetctl-db"]


def test_manifests_hold_no_literal_secret() -> None:
    for name in ("sweep-cronjob.yaml", "exporter.yaml"):
        for doc in _docs(name):
            assert doc["kind"] != "Secret", f"{name}: a Secret's data belongs in the cluster, not in the repository"
            for node in _walk(doc):
                if isinstance(node, dict) and "name" in node and "value" in node:
                    assert not re.search(r"PASSWORD|SECRET|TOKEN|FLEETCTL_DB", str(node["name"]), re.I), f"{name}: {node}"
