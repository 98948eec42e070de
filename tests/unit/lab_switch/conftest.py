"""Fixtures for the switch lab tests: one lab (an EOS and a SONiC switch, SNMP on) for the folder."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The suite runs with --import-mode=importlib: register the helper module by path.
if "swlab_helpers" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("swlab_helpers", Path(__file__).with_name("swlab_helpers.py"))
    assert _spec and _spec.loader
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["swlab_helpers"] = _mod
    _spec.loader.exec_module(_mod)

from swlab_helpers import close_snmp, need_deps, small_specs


@pytest.fixture(scope="session")
def swlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    need_deps()
    from fleetctl_lab.switch import SwitchLabConfig, run_switch_lab_in_thread

    # The folder's files run on several xdist workers, each with a lab of the same switches: an address block per
    # worker. With one block for all, `-n 2` failed 8 tests (on the code before this too): SNMP answers carried the
    # other worker's lab state (a fault set there, not here).
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    block = int(worker) if worker.isdigit() else 0
    cfg = SwitchLabConfig(state_dir=str(tmp_path_factory.mktemp("swlab")), base_address=f"127.151.{block % 250}.1")
    with run_switch_lab_in_thread(small_specs(), cfg) as lab:
        yield lab


@pytest.fixture(scope="session", autouse=True)
def _snmp_client() -> Iterator[None]:
    """The helpers' SNMP engine and loop live for the session; close them at its end."""
    yield
    close_snmp()
