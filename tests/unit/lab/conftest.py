"""Fixtures for the BMC lab tests: a shared lab per module.

The client (``lab_client_helpers.RF``) is deliberately not fleetctl's driver:
the lab is the drivers' peer, and these tests pin the lab's own behaviour.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The suite runs with --import-mode=importlib, which puts no test folder on
# sys.path; register the helper module by path so test files can import it.
if "lab_client_helpers" not in sys.modules or "local_host" not in sys.modules:
    for _name in ("lab_client_helpers", "local_host"):
        _spec = importlib.util.spec_from_file_location(_name, Path(__file__).with_name(f"{_name}.py"))
        assert _spec and _spec.loader
        _mod = importlib.util.module_from_spec(_spec)
        sys.modules[_name] = _mod
        _spec.loader.exec_module(_mod)

from fleetctl_lab.bmc import LabConfig, LabServerSpec, generate_specs, run_lab_in_thread
from lab_client_helpers import RF

TIMING = dict(power_transition_s=0.3, graceful_shutdown_s=0.4, firmware_update_s=0.5, max_sessions=3)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    specs = generate_specs(10)  # every flavour, both kinds
    specs.append(
        LabServerSpec(name="plain", flavour="generic", username="root", password="s3cret",
                      nics=[{"name": "eth0", "mac": "02:00:00:00:00:01"}])
    )
    cfg = LabConfig(state_dir=tmp_path_factory.mktemp("lab"), **TIMING)
    with run_lab_in_thread(specs, cfg) as running:
        yield running


@pytest.fixture
def rf(lab: Any) -> Any:
    def make(name: str, **kw: Any) -> RF:
        return RF(lab.url_of(name), **kw)

    return make
