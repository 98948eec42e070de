"""A sweep reads only what its enabled checks need, and asks If-None-Match where the BMC gave an ETag (issue 24).

Against in-process lab BMCs of the AMI dialect (``$expand``) and the OpenBMC one (none); every request the
driver sends is recorded (method, path, conditional or not).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetctl.errors import FleetError
from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.sweep.collect import READ_KEYS, ReadPlan, ServerReading, bmc_operation
from fleetctl.sweep.model import CheckSpec, Status
from fleetctl.sweep.registry import checks

fleetctl_lab = pytest.importorskip("fleetctl_lab.bmc")
from fleetctl_drivers.redfish import run_many  # noqa: E402
from fleetctl_drivers.redfish.cache import ReadingCache  # noqa: E402
from fleetctl_drivers.redfish.client import RedfishClient  # noqa: E402

DIALECTS = ("ami", "openbmc")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[Any]]]:
    specs = fleetctl_lab.generate_specs(len(DIALECTS), prefix="rq", flavours=DIALECTS, mix=("mncore",))
    config = fleetctl_lab.LabConfig(state_dir=tmp_path_factory.mktemp("lab-requests"), power_transition_s=0.1)
    with fleetctl_lab.run_lab_in_thread(specs, config) as running:
        yield running, specs


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[str, str, bool]]]:
    """{BMC: [(method, path, conditional)]} of every request the driver sends."""
    seen: dict[str, list[tuple[str, str, bool]]] = {}
    orig = RedfishClient._send

    async def record(self: RedfishClient, method: str, url: str, headers: dict, data: bytes | None) -> Any:
        seen.setdefault(self.target.name, []).append((method, url.removeprefix(self.base), "If-None-Match" in headers))
        return await orig(self, method, url, headers, data)

    monkeypatch.setattr(RedfishClient, "_send", record)
    return seen


def _targets(lab: tuple[Any, list[Any]]) -> list[BMCTarget]:
    running, specs = lab
    return [BMCTarget(name=s.name, url=running.url_of(s.name), username=s.username, password=s.password,
                      fingerprint=running.fingerprint_of(s.name), timeout=10, retries=0) for s in specs]  # fmt: skip


def _sweep(targets: list[BMCTarget], **kw: Any) -> dict[str, ServerReading]:
    async def run() -> list[Any]:
        return await run_many(targets, bmc_operation({}, **kw), concurrency=4, read_once=True, expand=True)

    results = asyncio.run(run())
    assert all(r.ok for r in results), [r.error for r in results]
    return {r.target: r.value for r in results}


def _paths(sent: dict[str, list[tuple[str, str, bool]]], name: str) -> list[str]:
    return [p for m, p, _ in sent[name] if m == "GET"]


def test_every_builtin_server_check_declares_what_it_needs() -> None:
    for spec in checks("server", "bmc"):
        assert spec.needs is not None, spec.name
        assert set(spec.needs) <= READ_KEYS.keys(), spec.name


def test_a_check_that_declares_nothing_gets_everything_read() -> None:
    plugin = CheckSpec("site.thing", "server", Status.WARNING, ("?",), "0 requests", "bmc", "", lambda r, e: [], None)
    assert ReadPlan.for_checks([*checks("server", "bmc"), plugin]) == ReadPlan.full()
    with pytest.raises(FleetError, match=r"health\.psu"):
        ReadPlan.for_checks([CheckSpec("x", "server", Status.WARNING, (), "", "bmc", "", lambda r, e: [], ("health.psu",))])


def test_the_default_sweep_reads_no_network_interface(lab: tuple[Any, list[Any]], sent: dict[str, Any]) -> None:
    """No check judges a NIC: the built-in checks' plan leaves EthernetInterfaces unread, the old full read did not."""
    targets = _targets(lab)
    full = _sweep(targets, plan=ReadPlan.full())
    full_paths = {t.name: _paths(sent, t.name) for t in targets}
    sent.clear()
    lean = _sweep(targets)
    for t in targets:
        assert any("EthernetInterfaces" in p for p in full_paths[t.name])
        assert not any("EthernetInterfaces" in p for p in _paths(sent, t.name)), _paths(sent, t.name)
        assert len(_paths(sent, t.name)) < len(full_paths[t.name])
        assert lean[t.name].facts.boards == full[t.name].facts.boards and not lean[t.name].facts.nics


def test_one_check_reads_only_its_resources(lab: tuple[Any, list[Any]], sent: dict[str, Any]) -> None:
    """``psu`` alone: the chassis's power supplies, nothing of thermal, sensors, logs, firmware, boards or manager."""
    targets = _targets(lab)
    psu = [c for c in checks("server", "bmc") if c.name == "psu"]
    readings = _sweep(targets, checks=psu)
    for t in targets:
        paths = _paths(sent, t.name)
        assert any("/Power" in p for p in paths), paths
        for unread in ("Thermal", "Sensors", "LogServices", "FirmwareInventory", "Processors", "PCIeDevices", "/Managers/"):
            assert not any(unread in p for p in paths), (unread, paths)
        r = readings[t.name]
        assert r.health.psus and not r.health.fans and not r.health.temperatures
        assert r.facts is None and r.manager is None and r.logs is None and r.firmware is None and not r.errors


def test_a_second_sweep_asks_if_none_match_and_judges_the_kept_document(lab: tuple[Any, list[Any]], sent: dict[str, Any],
                                                                          tmp_path: Path) -> None:  # fmt: skip
    targets = _targets(lab)
    cache = ReadingCache(tmp_path / "cache.sqlite")
    first = _sweep(targets, cache=cache)
    assert not any(c for v in sent.values() for _, _, c in v)  # nothing kept yet
    sent.clear()
    second = _sweep(targets, cache=cache)
    for t in targets:
        conditional = [p for m, p, c in sent[t.name] if c]
        # The chassis and firmware do not change between sweeps: asked conditionally (on OpenBMC, which cannot
        # expand, every firmware component too; AMI's come expanded in one answer, never conditional). The system
        # comes with Systems?only (OnlyMemberQuery), a query: never conditional, one request for two 304s.
        assert any(p.endswith(("/Chassis/Self", "/Chassis/chassis")) for p in conditional), conditional
        assert "/redfish/v1/Systems?only" in _paths(sent, t.name)
        if "openbmc" in t.url or t.name == targets[DIALECTS.index("openbmc")].name:
            assert any("FirmwareInventory/" in p for p in conditional), conditional
        assert not any("?" in p for p in conditional)  # an expanded answer is never conditional
        assert second[t.name].firmware == first[t.name].firmware
        assert second[t.name].facts == first[t.name].facts
    assert cache.size > 0
    cache.close()


def test_a_full_cache_forgets_the_least_recently_used(tmp_path: Path) -> None:
    cache = ReadingCache(tmp_path / "c.sqlite", max_bytes=2_000)
    cache.save_sync("bmc1", {f"/r/{i}": (f'"e{i}"', {"Id": i, "pad": "x" * 300}) for i in range(4)}, [])
    cache.save_sync("bmc1", {}, ["/r/0"])  # used again: the newest
    cache.save_sync("bmc2", {"/r/9": ('"e9"', {"Id": 9, "pad": "y" * 900})}, [])
    kept = cache.load_sync("bmc1")
    assert cache.size <= 2_000
    assert "/r/0" in kept and "/r/1" not in kept
    assert "/r/9" in cache.load_sync("bmc2")
    # A new process sees what the last one kept, and its size
    again = ReadingCache(tmp_path / "c.sqlite", max_bytes=2_000)
    assert again.load_sync("bmc1") == kept and again.size == cache.size


def test_the_cache_file_named_by_the_environment_is_used(lab: tuple[Any, list[Any]], sent: dict[str, Any], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """``FLEETCTL_SWEEP_CACHE``: the engine's sweep (no cache given) keeps documents there and asks If-None-Match next time."""
    monkeypatch.setenv("FLEETCTL_SWEEP_CACHE", str(tmp_path / "env-cache.sqlite"))
    targets = _targets(lab)
    _sweep(targets)
    assert (tmp_path / "env-cache.sqlite").is_file()
    sent.clear()
    _sweep(targets)
    assert all(any(c for _, _, c in sent[t.name]) for t in targets)
    monkeypatch.setenv("FLEETCTL_SWEEP_CACHE", "off")
    sent.clear()
    _sweep(targets)
    assert not any(c for v in sent.values() for _, _, c in v)
