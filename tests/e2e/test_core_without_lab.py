"""The core installs and runs without the lab: a fresh venv with fleetctl and its drivers only.

`pip install fleetctl` (with fleetctl-drivers) must not pull the simulators
in (snmpsim, pysmi), and the CLI must work without them: `fleetctl lab`
exists only where the lab distribution is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_core_installs_and_runs_without_the_lab(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # --no-compile: byte-compiling ansible-core alone takes minutes on two cores.
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    # Wheels of the dependencies are in pip's cache from `make venv`; no network is needed where they are.
    done = subprocess.run([*pip, str(REPO / "drivers"), str(REPO)], capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0 and "Could not find a version" in done.stderr + done.stdout:
        pytest.skip(f"the dependencies cannot be installed here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-2000:]
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True).stdout.lower()
    assert "fleetctl==" in listed and "fleetctl-drivers==" in listed
    for lab_only in ("fleetctl-lab", "snmpsim", "pysmi"):
        assert f"{lab_only}==" not in listed, f"{lab_only} came with the core"
    env = {**os.environ, "FLEETCTL_DB": str(tmp_path / "fleet.db"), "FLEETCTL_DATA_DIR": str(tmp_path / "data"),
           "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    env.pop("PYTHONPATH", None)
    fleetctl = str(env_dir / "bin" / "fleetctl")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([fleetctl, *args], env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)

    assert subprocess.run([str(py), "-c", "import fleetctl_lab"], capture_output=True, cwd=tmp_path, check=False).returncode != 0
    help_ = run("--help")
    assert help_.returncode == 0, help_.stderr
    assert "provision" in help_.stdout and " lab " not in help_.stdout
    assert run("lab", "up").returncode == 2  # no such command here
    imported = run("inventory", "import", str(REPO / "inventory"))
    assert imported.returncode == 0, imported.stderr
    listed_servers = run("server", "list", "--rack", "rack-12", "--output", "json")
    assert listed_servers.returncode == 0 and "mn-tyo1-r12-01" in listed_servers.stdout
    # A device command's plan (contacts nothing), and every driver loads by its entry point.
    dry = run("power", "off", "rack-12", "--dry-run")
    assert dry.returncode == 0 and "would shut down mn-tyo1-r12-01" in dry.stdout, dry.stderr
    drivers = "from fleetctl.plugins import driver_names, load_driver\n" \
              "for kind in ('bmc', 'switch', 'snmp'):\n    [load_driver(kind, n) for n in driver_names(kind)]\n" \
              "import sys; assert 'fleetctl_lab' not in sys.modules"
    loaded = subprocess.run([str(py), "-c", drivers], env=env, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert loaded.returncode == 0, loaded.stderr
    assert sys.executable  # the test's own interpreter is untouched
