"""The provisioning playbooks over real SSH, against lab hosts installed by PXE.

`fleetctl lab up` (a daemon, as an operator starts it) with a 1 s install;
three servers, two MN-Core and one GPU, are PXE-booted with fleetctl's own
`boot set` and `power on` through their lab BMCs; once their hosts are up,
`playbooks/site.yml` runs through ansible-runner over OpenSSH, using only
what lab.json's `hosts` section publishes (address, port, user, key,
known_hosts, and the sandbox variables) plus the inventory's own variables.
Then one MN-Core server gets the `device_missing` fault and it and the GPU
server are reinstalled: that host fails the device check alone, the GPU
host passes on a fresh OS, and the untouched MN-Core host changes nothing.

(A second MN-Core host is there because Ansible ends the whole run when
every host of a play has failed: with the faulty host alone in the MN-Core
play, the GPU play would never run.)
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleetctl_lab.hosts import ansible_host_vars
from tests_helpers_bmc import lab_up  # (path set in conftest)

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
MN, MN_OK, GPU = "mn-tyo1-r12-01", "mn-tyo1-r12-02", "gpu-tyo1-r12-19"
ALL = [MN, MN_OK, GPU]
APPLIED = "root/var/lib/fleetctl/applied"

# A kubeadm-documentation example token and a dummy hash: not secrets.
JOIN_VARS = {
    "fleetctl_k8s_api_endpoint": "k8s-api.lab.invalid:6443",
    "fleetctl_k8s_join_token": "abcdef.0123456789abcdef",
    "fleetctl_k8s_ca_cert_hash": "sha256:" + "0" * 64,
}

pytestmark = [
    pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client `ssh` not installed (openssh-client): "
                       "Ansible's ssh connection needs it"),
    pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason=f"ansible-playbook not installed beside {sys.executable} "
                       "(ansible-core)"),
]


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    pytest.importorskip("ansible_runner")
    pytest.importorskip("asyncssh")
    state = tmp_path / "lab"
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(state))
    r = lab_up(cli, monkeypatch, "--power-transition", "0.2", "--install-time", "1", "--os-boot-time", "0.2",
            "--server", MN, "--server", MN_OK, "--server", GPU)
    assert r.code == 0, r.err
    doc = json.loads((state / "lab.json").read_text())
    yield doc
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(state))
    assert cli("lab", "down").code == 0


def _host(lab: dict[str, Any], name: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{lab['control_url']}/lab/v1/hosts/{name}", timeout=10) as r:
        return json.loads(r.read())


def _wait(lab: dict[str, Any], names: list[str], ok: Callable[[dict[str, Any]], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        infos = {n: _host(lab, n) for n in names}
        if all(ok(i) for i in infos.values()):
            return
        assert time.monotonic() < deadline, infos
        time.sleep(0.1)


def _inventory(path: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    # Connection and sandbox from lab.json; the rest is what fleetctl's dynamic inventory gives.
    hostvars = {name: ansible_host_vars(hosts[name]) for name in ALL}
    hostvars[MN]["fleetctl_expected_boards"] = hostvars[MN_OK]["fleetctl_expected_boards"] = 4
    hostvars[GPU]["fleetctl_expected_gpus"] = 8
    inventory = {
        "all": {
            "hosts": hostvars,
            "children": {
                "role_server": {"hosts": {MN: None, MN_OK: None, GPU: None}},
                "accel_mncore2": {"hosts": {MN: None, MN_OK: None}},
                "accel_gpu": {"hosts": {GPU: None}},
            },
        }
    }
    path.write_text(yaml.safe_dump(inventory))
    return path


def _run(tmp_path: Path, inventory: Path, name: str, control_dir: str) -> Any:
    import ansible_runner

    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\n")
    env = {
        **os.environ, "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1", "ANSIBLE_CONFIG": str(cfg),
        # ssh's ControlPath is a socket: keep its folder short.
        "ANSIBLE_SSH_CONTROL_PATH_DIR": control_dir,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }  # fmt: skip
    (tmp_path / name).mkdir()
    return ansible_runner.run(
        private_data_dir=str(tmp_path / name), playbook=str(REPO / "playbooks/site.yml"), inventory=str(inventory),
        extravars=JOIN_VARS, forks=5, quiet=True, envvars=env, timeout=120,
    )  # fmt: skip


# The inventory backend plays no part here: one is enough.
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_site_over_ssh_on_pxe_installed_lab_hosts(lab, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    hosts = lab["hosts"]  # the lab's own record of the hosts it serves
    assert set(hosts) == set(ALL)
    for e in hosts.values():
        assert e["port"] and e["address"].startswith("127.") and Path(e["known_hosts"]).exists()
    assert hosts[MN]["boards"] == {"mncore2": 4, "gpu": 0} and hosts[GPU]["boards"] == {"mncore2": 0, "gpu": 8}
    assert all(_host(lab, n)["phase"] == "off" for n in ALL)

    # Install them over PXE, with fleetctl's own BMC commands.
    assert cli("boot", "set", *ALL, "--device", "pxe").code == 0
    r = cli("power", "on", *ALL, "--stagger", "0")
    assert r.code == 0, r.out + r.err
    _wait(lab, ALL, lambda i: i["phase"] == "up")
    assert all(_host(lab, n)["boot_source"] == "Pxe" and _host(lab, n)["installs"] == 1 for n in ALL)

    control_dir = tempfile.mkdtemp(prefix="fl-cp-", dir="/tmp")
    try:
        inventory = _inventory(tmp_path / "inventory.yml", hosts)
        first = _run(tmp_path, inventory, "run1", control_dir)
        stats = first.stats
        assert stats is not None, f"no stats: status={first.status} rc={first.rc}"
        assert first.status == "successful", (stats, first.stdout.read()[-3000:])
        assert not any(stats["failures"].values()) and not any(stats.get("dark", {}).values()), stats
        for name in ALL:
            applied = Path(hosts[name]["dir"], APPLIED)
            assert json.loads((applied / "base.json").read_text())["hostname"] == name
            assert json.loads((applied / "k8s-join.json").read_text())["joined"] is True
            assert Path(hosts[name]["dir"], "root/etc/kubernetes/kubelet.conf").exists()
            assert _host(lab, name)["ssh_logins"] >= 1  # over SSH, not a local connection
        boards = json.loads((Path(hosts[MN]["dir"], APPLIED) / "mncore.json").read_text())["boards"]
        assert len(boards) == 4 and boards == json.loads(Path(hosts[MN]["dir"], "host.json").read_text())["devices"]
        assert len(json.loads((Path(hosts[GPU]["dir"], APPLIED) / "gpu.json").read_text())["gpus"]) == 8
        assert Path(hosts[MN]["dir"], "pkg/installs.log").read_text().splitlines() == [
            "chrony", "gpfn3-dkms libgpfn3-0 gpfn3-smi gpfn3-loader"
        ]

        # A board's device node goes missing on one MN-Core server; it and the GPU server are reinstalled.
        assert cli("lab", "fault", MN, "--set", "device_missing=1").code == 0
        assert cli("boot", "set", MN, GPU, "--device", "pxe").code == 0
        r = cli("power", "restart", MN, GPU)
        assert r.code == 0, r.out + r.err
        _wait(lab, [MN, GPU], lambda i: i["phase"] == "up" and i["installs"] == 2)
        # A fresh OS: nothing of the first run is left.
        assert not Path(hosts[MN]["dir"], APPLIED).exists() and not Path(hosts[GPU]["dir"], APPLIED).exists()

        second = _run(tmp_path, inventory, "run2", control_dir)
        stats = second.stats
        assert stats is not None, f"no stats: status={second.status} rc={second.rc}"
        assert {h for h, n in stats["failures"].items() if n} == {MN}, stats
        assert stats["changed"].get(MN_OK, 0) == 0, stats  # its OS was kept: all applied already
        assert not any(stats.get("dark", {}).values()), stats
        failed = [e["event_data"] for e in second.events if e["event"] == "runner_on_failed"]
        assert [(e["host"], e["task"]) for e in failed] == [(MN, "MN-Core device check")]
        msg = failed[0]["res"]["msg"]
        assert "expected 4 boards" in msg and "found 3 device nodes" in msg, msg
        assert not Path(hosts[MN]["dir"], APPLIED, "mncore.json").exists()
        assert not Path(hosts[MN]["dir"], "root/etc/kubernetes/kubelet.conf").exists()  # never joined
        assert len(json.loads(Path(hosts[GPU]["dir"], APPLIED, "gpu.json").read_text())["gpus"]) == 8
        assert Path(hosts[GPU]["dir"], "root/etc/kubernetes/kubelet.conf").exists()
    finally:
        shutil.rmtree(control_dir, ignore_errors=True)
