"""Issue 21 item 8: the import contracts ([tool.importlinter] in pyproject.toml, run by `make lint`) hold on the tree,
and each fails on a deliberate violation, naming itself; no cycle of imports that run remains."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = {"fleetctl": ROOT / "fleetctl", "fleetctl_drivers": ROOT / "drivers" / "fleetctl_drivers",
            "fleetctl_lab": ROOT / "lab" / "fleetctl_lab"}  # fmt: skip


def lint_imports(cwd: Path, *args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:  # the copy first on the path: found before the editable installs of the tree
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(cwd / "pyproject.toml"), *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three packages' sources and pyproject.toml, copied: a violation is added to the copy, never to the tree."""
    root = tmp_path_factory.mktemp("tree")
    for name, src in PACKAGES.items():
        shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.fixture
def violation(copy: Path) -> Iterator[dict[str, str]]:
    """Files written into the copy for one test (path -> source), removed after it."""
    written: dict[str, str] = {}
    yield written
    for path in written:
        (copy / path).unlink(missing_ok=True)


def test_the_tree_keeps_every_contract() -> None:
    r = lint_imports(ROOT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout, r.stdout[-4000:]


def test_the_copy_keeps_every_contract_before_a_violation(copy: Path) -> None:
    """The copy is read, not the installed tree (else the violations below would prove nothing)."""
    r = lint_imports(copy, pythonpath=copy)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


# (contract id, the name it reports, the module written, its source, the import the report must name)
VIOLATIONS = [
    ("core-layers", "the core's layers", "fleetctl/store/_violation.py", "from fleetctl.cli import app\n",
     "fleetctl.store._violation -> fleetctl.cli.app"),
    ("core-layers", "the core's layers", "fleetctl/lifecycle/_violation.py", "from fleetctl.scaleout import client\n",
     "fleetctl.lifecycle._violation -> fleetctl.scaleout.client"),
    ("foundation", "the foundation", "fleetctl/interfaces/_violation.py", "def f() -> None:\n    import fleetctl.store\n",
     "fleetctl.interfaces._violation -> fleetctl.store"),
    ("drivers", "drivers reach the core only through its interfaces", "fleetctl_drivers/_violation.py",
     "from fleetctl.store import get_engine\n", "fleetctl_drivers._violation -> fleetctl.store"),
    ("core-without-drivers", "the core never imports the drivers or the lab", "fleetctl/burnin/_violation.py",
     "def f() -> None:\n    from fleetctl_drivers.accel import mncore\n", "fleetctl.burnin._violation -> fleetctl_drivers.accel.mncore"),
    ("core-without-drivers", "the core never imports the drivers or the lab", "fleetctl/sweep/_violation.py",
     "import fleetctl_lab\n", "fleetctl.sweep._violation -> fleetctl_lab"),
    ("lab", "the lab uses the core's public API only", "fleetctl_lab/_violation.py",
     "from fleetctl.workflows.provision import engine\n", "fleetctl_lab._violation -> fleetctl.workflows.provision.engine"),
]  # fmt: skip


@pytest.mark.parametrize("contract,name,path,source,named", VIOLATIONS, ids=[f"{v[0]}:{v[2]}" for v in VIOLATIONS])
def test_a_violation_breaks_its_contract(copy: Path, violation: dict[str, str], contract: str, name: str, path: str,
                                         source: str, named: str) -> None:  # fmt: skip
    violation[path] = source
    (copy / path).write_text(source)
    r = lint_imports(copy, "--contract", contract, pythonpath=copy)
    assert r.returncode == 1, r.stdout[-4000:] + r.stderr[-2000:]
    assert "1 broken" in r.stdout and name in r.stdout and named in r.stdout, r.stdout[-4000:]


def test_a_cycle_breaks_the_acyclic_contract(copy: Path, violation: dict[str, str]) -> None:
    """Two modules of one package importing each other (inside functions, too) are a cycle."""
    for path, source in {"fleetctl/models/_cycle_a.py": "def f() -> None:\n    import fleetctl.models._cycle_b\n",
                         "fleetctl/models/_cycle_b.py": "import fleetctl.models._cycle_a\n"}.items():  # fmt: skip
        violation[path] = source
        (copy / path).write_text(source)
    r = lint_imports(copy, "--contract", "acyclic", pythonpath=copy)
    assert r.returncode == 1 and "No cycles are allowed in fleetctl.models" in r.stdout, r.stdout[-4000:]


def test_no_cycle_of_imports_that_run() -> None:
    """Over every import, function-level ones included (those under TYPE_CHECKING never run)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_cycles.py")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "no cycle of imports that run" in r.stdout, r.stdout + r.stderr
