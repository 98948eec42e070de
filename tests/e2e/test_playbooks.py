"""The provisioning playbooks (playbooks/): syntax, lint, and a real run.

1. `ansible-playbook --syntax-check` of each playbook;
2. `ansible-lint` with the production profile over playbooks/;
3. site.yml really run through ansible-runner, as fleetctl's provisioning
   workflow will run it: one run, three hosts on `ansible_connection=local`,
   every file the playbooks write inside a per-host sandbox
   (`fleetctl_root`), and every package-manager and device interaction
   pointed at stand-ins in tmp_path, through the variables the playbooks
   expose for a lab: a package tool that records what it was asked to
   install, `/dev/mnc2p*` device nodes (4 on one host, 3 on the other) and
   a `gpfn3-smi` that lists the boards whose node exists, an `nvidia-smi`
   that lists 8 GPUs, a `kubeadm` that "joins" by writing kubelet.conf.
   The stand-ins are the lab hosts' own (`fleetctl_lab.host_standins`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fleetctl_lab import host_standins as standins

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
VENV_BIN = Path(sys.executable).parent
ANSIBLE_PLAYBOOK = VENV_BIN / "ansible-playbook"
ANSIBLE_LINT = VENV_BIN / "ansible-lint"
PLAYBOOK_FILES = ["site.yml", "base.yml", "mncore.yml", "gpu.yml", "k8s-join.yml"]

GPFN3 = ["gpfn3-dkms", "libgpfn3-0", "gpfn3-smi", "gpfn3-loader"]
GOOD, BAD, GPU = "mn-lab-r12-01", "mn-lab-r12-02", "gpu-lab-r12-03"

needs_ansible = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK.exists(), reason=f"ansible-playbook not installed beside {sys.executable} (ansible-core)"
)


@pytest.fixture
def ansible_cfg(tmp_path: Path) -> str:
    """An empty ansible.cfg, so that no operator's configuration is in the way."""
    path = tmp_path / "ansible.cfg"
    path.write_text("[defaults]\n")
    return str(path)


def _env(cfg: str) -> dict[str, str]:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", NO_COLOR="1", ANSIBLE_CONFIG=cfg)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"  # the venv's tools first
    return env


@needs_ansible
@pytest.mark.parametrize("playbook", PLAYBOOK_FILES)
def test_syntax_check(playbook: str, ansible_cfg: str) -> None:
    done = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--syntax-check", "-i", "localhost,", str(PLAYBOOKS / playbook)],
        capture_output=True, text=True, env=_env(ansible_cfg), timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(not ANSIBLE_LINT.exists(), reason=f"ansible-lint not installed beside {sys.executable}")
def test_ansible_lint_production_profile(tmp_path: Path, ansible_cfg: str) -> None:
    # Linted from a copy: ansible-lint leaves a .ansible/ cache in its project folder.
    shutil.copytree(PLAYBOOKS, tmp_path / "playbooks")
    done = subprocess.run(
        [str(ANSIBLE_LINT), "--offline", "--profile", "production", "--nocolor", "--project-dir", str(tmp_path), "playbooks/"],
        cwd=tmp_path, capture_output=True, text=True, env=_env(ansible_cfg), timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout + done.stderr


# --- the real run -------------------------------------------------------------

# A kubeadm-documentation example token and a dummy hash: not secrets.
JOIN_VARS = {
    "fleetctl_k8s_api_endpoint": "k8s-api.lab.invalid:6443",
    "fleetctl_k8s_join_token": "abcdef.0123456789abcdef",
    "fleetctl_k8s_ca_cert_hash": "sha256:" + "0" * 64,
}


def _lab(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """An inventory of three local hosts with stand-ins; returns it and each host's folder."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    pkg = standins.write_script(bin_ / "fake-pkg", standins.FAKE_PKG)
    gpus = [(i, "NVIDIA H100 80GB HBM3", f"GPU-0000000{i}-1111-2222-3333-444444444444") for i in range(8)]
    key = tmp_path / "mncore-packages.asc"
    key.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab stand-in\n-----END PGP PUBLIC KEY BLOCK-----\n")

    homes: dict[str, Path] = {}
    hostvars: dict[str, dict] = {}
    for host, boards in ((GOOD, 4), (BAD, 3), (GPU, 0)):
        home = tmp_path / host
        root, state, dev = home / "root", home / "pkgstate", home / "dev"
        for d in (root, state, dev):
            d.mkdir(parents=True)
        for bus in range(1, boards + 1):
            (dev / f"mnc2p{bus}s0").touch()
        if host == GPU:
            for i, _, _ in gpus:
                (dev / f"nvidia{i}").touch()
        homes[host] = home
        log = str(home / "installs.log")
        hostvars[host] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "ansible_become": False,
            "fleetctl_root": str(root),
            "fleetctl_pkg_install_cmd": [pkg, "install", str(state), log],
            "fleetctl_pkg_query_cmd": [pkg, "query", str(state)],
            "fleetctl_pkg_update_cmd": [pkg, "update", str(home / "calls.log")],
            "fleetctl_sysctl_apply_cmd": [standins.write_script(home / "sysctl", standins.sysctl(home / "calls.log")), "-p"],
            "fleetctl_kubeadm_cmd": standins.write_script(home / "kubeadm", standins.kubeadm(home / "calls.log", root)),
            "fleetctl_mncore_apt_url": "https://mncore-packages.lab.example/debian",
            "fleetctl_mncore_apt_key_url": key.as_uri(),
            "fleetctl_dev_glob": str(dev / "mnc2p*"),
            "fleetctl_smi_cmd": standins.write_script(home / "gpfn3-smi", standins.gpfn3_smi(dev)),
            "fleetctl_nvidia_smi_cmd": standins.write_script(home / "nvidia-smi", standins.nvidia_smi(dev, gpus)),
            "fleetctl_expected_gpus": 8,
        }
    # The groups fleetctl's dynamic inventory gives these hosts.
    inventory = {
        "all": {
            "hosts": hostvars,
            "children": {
                "role_server": {"hosts": {h: None for h in hostvars}},
                "rack_rack_12": {"hosts": {h: None for h in hostvars}},
                "accel_mncore2": {"hosts": {GOOD: None, BAD: None}},
                "accel_gpu": {"hosts": {GPU: None}},
            },
        }
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path, homes


def _run(tmp_path: Path, inventory: Path, name: str, cfg: str, limit: str | None = None):  # type: ignore[no-untyped-def]
    ansible_runner = pytest.importorskip("ansible_runner")
    (tmp_path / name).mkdir()
    return ansible_runner.run(
        private_data_dir=str(tmp_path / name),
        playbook=str(PLAYBOOKS / "site.yml"),
        inventory=str(inventory),
        extravars=JOIN_VARS,
        limit=limit,
        forks=5,
        quiet=True,
        # ansible-runner runs the `ansible-playbook` first on PATH (its
        # `binary` option drops the playbook argument): the venv's.
        envvars=_env(cfg),
        timeout=180,
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@needs_ansible
def test_site_runs_for_real_with_lab_stand_ins(tmp_path: Path, ansible_cfg: str) -> None:
    inventory, homes = _lab(tmp_path)

    first = _run(tmp_path, inventory, "run1", ansible_cfg)
    stats = first.stats
    assert stats is not None, f"no stats: status={first.status} rc={first.rc}"

    # The 3-board host fails, alone, at the device check.
    assert first.status == "failed" and first.rc != 0
    assert {h for h, n in stats["failures"].items() if n} == {BAD}, stats
    assert not any(stats.get("dark", {}).values()), stats
    failed = [e["event_data"] for e in first.events if e["event"] == "runner_on_failed"]
    assert [(e["host"], e["task"]) for e in failed] == [(BAD, "MN-Core device check")]
    msg = failed[0]["res"]["msg"]
    assert "expected 4 boards" in msg and "found 3 device nodes" in msg, msg

    # What the package tool was asked to install, in order, per host.
    for host in (GOOD, BAD):
        assert _lines(homes[host] / "installs.log") == ["chrony", " ".join(GPFN3)], host
        assert _lines(homes[host] / "calls.log")[:2] == ["sysctl -p " + str(homes[host] / "root/etc/sysctl.d/90-fleetctl.conf"), "update"]
    assert _lines(homes[GPU] / "installs.log") == ["chrony", "nvidia-driver-550-server nvidia-utils-550-server"]

    # The good hosts went all the way: hostname, time, sysctl, repository, join, markers.
    for host in (GOOD, GPU):
        root = homes[host] / "root"
        assert (root / "etc/hostname").read_text() == host + "\n"
        assert f"127.0.1.1 {host}" in (root / "etc/hosts").read_text()
        assert "pool pool.ntp.org iburst" in (root / "etc/chrony/chrony.conf").read_text()
        assert "vm.max_map_count = 1048576" in (root / "etc/sysctl.d/90-fleetctl.conf").read_text().splitlines()
        assert (root / "etc/kubernetes/kubelet.conf").exists()
        assert _lines(homes[host] / "calls.log")[-1] == "kubeadm join k8s-api.lab.invalid:6443"
        base = json.loads((root / "var/lib/fleetctl/applied/base.json").read_text())
        assert base["hostname"] == host and base["sysctl"]["vm.swappiness"] == 1
        assert json.loads((root / "var/lib/fleetctl/applied/k8s-join.json").read_text())["joined"] is True
    good = homes[GOOD] / "root"
    sources = (good / "etc/apt/sources.list.d/mncore-packages.sources").read_text()
    assert "URIs: https://mncore-packages.lab.example/debian" in sources
    assert "Signed-By: /etc/apt/keyrings/mncore-packages.asc" in sources
    assert (good / "etc/apt/keyrings/mncore-packages.asc").read_text().startswith("-----BEGIN PGP")
    mncore = json.loads((good / "var/lib/fleetctl/applied/mncore.json").read_text())
    assert mncore["packages"] == GPFN3
    assert mncore["boards"] == [f"mnc2p{b}s0" for b in range(1, 5)]
    gpu = json.loads((homes[GPU] / "root/var/lib/fleetctl/applied/gpu.json").read_text())
    assert len(gpu["gpus"]) == 8

    # The failed host stopped there: no mncore marker, never joined the cluster.
    bad = homes[BAD] / "root"
    assert not (bad / "var/lib/fleetctl/applied/mncore.json").exists()
    assert not (bad / "etc/kubernetes/kubelet.conf").exists()

    # Second run over the good hosts: nothing changes, nothing is reinstalled.
    second = _run(tmp_path, inventory, "run2", ansible_cfg, limit=f"{GOOD}:{GPU}")
    assert second.stats is not None
    assert second.stats["changed"].get(GOOD, 0) == 0, second.stats
    assert second.stats["changed"].get(GPU, 0) == 0, second.stats
    assert not any(second.stats["failures"].values()), second.stats
    changed = [
        (e["event_data"]["host"], e["event_data"]["task"])
        for e in second.events
        if e["event"] == "runner_on_ok" and e["event_data"].get("res", {}).get("changed")
    ]
    assert not [c for c in changed if c[0] != BAD], changed
    assert _lines(homes[GOOD] / "installs.log") == ["chrony", " ".join(GPFN3)]
    assert _lines(homes[GOOD] / "calls.log").count("update") == 1
    assert _lines(homes[GOOD] / "calls.log").count("kubeadm join k8s-api.lab.invalid:6443") == 1
