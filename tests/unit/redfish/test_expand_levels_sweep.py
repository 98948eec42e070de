"""The sweep's reads with ``$expand`` levels (issue 24): fewer requests where MaxLevels allows, the same reading;
today's reads where MaxLevels is 1, and where a BMC advertises levels but ignores them."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.sweep.collect import bmc_operation

fleetctl_lab = pytest.importorskip("fleetctl_lab.bmc")
import fleetctl_lab.bmc.expand as lab_expand  # noqa: E402
from fleetctl_drivers.redfish import capabilities, run_many  # noqa: E402
from fleetctl_drivers.redfish.client import RedfishClient  # noqa: E402


def _sweep(lab: Any, spec: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Any]:
    """The GETs one sweep of one BMC sends, and its reading."""
    sent: list[str] = []
    real = RedfishClient._request

    async def counted(self: RedfishClient, method: str, uri: str, **kw: Any) -> Any:
        sent.append(f"{method} {uri}")
        return await real(self, method, uri, **kw)

    monkeypatch.setattr(RedfishClient, "_request", counted)
    target = BMCTarget(name=spec.name, url=lab.url_of(spec.name), username=spec.username, password=spec.password,
                       fingerprint=lab.fingerprint_of(spec.name), timeout=10, retries=0)  # fmt: skip
    (r,) = asyncio.run(run_many([target], bmc_operation({}), read_once=True, expand=True))
    assert r.ok, r.error
    monkeypatch.setattr(RedfishClient, "_request", real)
    return sent, r.value


def _same(reading: Any) -> Any:
    """The reading but the manager's clock (read at a different moment by each sweep)."""
    assert reading.manager is not None
    return dataclasses.replace(reading, manager=None), reading.manager.firmware_version


def _lab(tmp_path: Path, flavour: str) -> tuple[Any, Any]:
    (spec,) = fleetctl_lab.generate_specs(1, prefix=f"xl{flavour}", flavours=(flavour,))
    return spec, fleetctl_lab.run_lab_in_thread([spec], fleetctl_lab.LabConfig(state_dir=tmp_path / "lab"))


def test_ami_reads_three_levels_deep_in_fewer_requests_the_same_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, running = _lab(tmp_path, "ami")
    with running as lab:
        monkeypatch.setattr(capabilities, "SWEEP_EXPAND_LEVELS", 1)
        flat, flat_reading = _sweep(lab, spec, monkeypatch)
        monkeypatch.setattr(capabilities, "SWEEP_EXPAND_LEVELS", 3)
        deep, deep_reading = _sweep(lab, spec, monkeypatch)
    # A BMC that advertises MaxLevels 5 and answers one level whatever $levels asks: read as today. A lab of
    # its own: the render cache keeps answers by path and query.
    monkeypatch.setattr(lab_expand, "parse_expand", lambda q, _most, real=lab_expand.parse_expand: real(q, 1))
    spec, running = _lab(tmp_path / "ignores", "ami")
    with running as lab:
        monkeypatch.setattr(capabilities, "SWEEP_EXPAND_LEVELS", 1)
        _, flat_b = _sweep(lab, spec, monkeypatch)
        monkeypatch.setattr(capabilities, "SWEEP_EXPAND_LEVELS", 3)
        ignored, ignored_reading = _sweep(lab, spec, monkeypatch)
    assert any("$levels=3" in s for s in deep)
    assert len(deep) < len(flat) - 8, (deep, flat)  # the PCIe functions and log entries came with their collections
    assert not any("PCIeFunctions" in s or "/Entries" in s for s in deep), deep
    assert _same(deep_reading) == _same(flat_reading)
    assert _same(ignored_reading) == _same(flat_b)
    assert any("PCIeFunctions" in s for s in ignored), ignored  # the shape told: the functions read as before


def test_max_levels_1_reads_as_today(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, running = _lab(tmp_path, "hpe")
    with running as lab:
        sent, _ = _sweep(lab, spec, monkeypatch)
    assert sent and not any("$levels=" in s and "$levels=1" not in s for s in sent), sent
