"""Fewer requests per OpenBMC (bmcweb) BMC, the same readings (issue 24, item 2).

bmcweb offers no ``$expand`` (it is compiled in only with insecure-enable-redfish-query), so every document
is a request. Where its routes fix a URI (``Quirks.pcie_function0_id``, ``log_entries_suffix``,
``firmware_inventory_suffix``), the driver reads the document it needs there and skips the one that would only
name it; where the inventory knows the system's id, it reads ``Systems/{id}`` without the Systems collection.
A guess that misses falls back to the walk, which reads the same documents as before. Against an in-process
lab BMC of the OpenBMC dialect; every request the driver sends is recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.sweep.collect import ReadPlan, ServerReading, bmc_operation

fleetctl_lab = pytest.importorskip("fleetctl_lab.bmc")
from fleetctl_drivers.redfish import driver as driver_mod  # noqa: E402
from fleetctl_drivers.redfish import run_many  # noqa: E402
from fleetctl_drivers.redfish.quirks import Quirks  # noqa: E402

Sent = list[tuple[str, str, int, bool]]  # tests/unit/sweep/conftest.py's sent


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    (spec,) = fleetctl_lab.generate_specs(1, prefix="ro", flavours=("openbmc",), mix=("mncore",))
    config = fleetctl_lab.LabConfig(state_dir=tmp_path_factory.mktemp("lab-openbmc"), power_transition_s=0.1)
    with fleetctl_lab.run_lab_in_thread([spec], config) as running:
        # A warning log entry, so that the logs compared below are not empty.
        running.set_fault(spec.name, memory_errors=1)
        yield running, spec


def _target(lab: tuple[Any, Any], **kw: Any) -> BMCTarget:
    running, s = lab
    return BMCTarget(name=s.name, url=running.url_of(s.name), username=s.username, password=s.password,
                     fingerprint=running.fingerprint_of(s.name), timeout=10, retries=0, **kw)  # fmt: skip


def _read(target: BMCTarget, *, plan: ReadPlan | None = None, expand: bool = True) -> Any:
    op = bmc_operation({}, plan=plan) if plan is not None else bmc_operation({})

    async def run() -> list[Any]:
        return await run_many([target], op, concurrency=1, read_once=True, expand=expand)

    (result,) = asyncio.run(run())
    return result


def _same_reading(new: ServerReading, old: ServerReading) -> None:
    assert new.facts is not None and old.facts is not None
    assert new.facts.pcie_devices == old.facts.pcie_devices and new.facts.boards == old.facts.boards
    assert len(new.facts.boards) == 4
    assert new.firmware == old.firmware and new.firmware
    assert new.logs == old.logs and new.logs
    assert not new.errors and not old.errors


def _gets(sent: Sent) -> list[str]:
    return [p for m, p, _, _c in sent if m == "GET"]


def test_the_sweep_reads_function_zero_the_log_entries_and_the_inventory_at_their_uris(lab: tuple[Any, Any],
                                                                                       sent: Sent) -> None:  # fmt: skip
    old = _read(_target(lab), plan=ReadPlan.full(), expand=False)
    sent.clear()
    new = _read(_target(lab))
    assert new.ok, new.error
    _same_reading(new.value, old.value)
    gets = _gets(sent)
    assert all(status < 400 for _, _, status, _c in sent), sent  # no guess missed
    # function 0 of each of the 6 devices, neither their PCIeFunctions collections nor other functions
    assert sorted(p.rsplit("/", 3)[-3] for p in gets if "/PCIeFunctions" in p) == sorted(
        d.id for d in new.value.facts.pcie_devices)  # fmt: skip
    assert all(p.endswith("/PCIeFunctions/0") for p in gets if "/PCIeFunctions" in p), gets
    # the entries of every log service, not the LogService documents
    logs = [p for p in gets if "/LogServices/" in p]
    assert logs and all(p.endswith("/Entries") for p in logs), logs
    assert "/redfish/v1/UpdateService" not in gets and "/redfish/v1/UpdateService/FirmwareInventory" in gets
    # 47 before: 6 PCIeFunctions collections, 3 LogService documents and the UpdateService fewer, and the Systems
    # collection and the system read as one (Systems?only, OnlyMemberQuery: tests/unit/sweep/test_requests_only.py)
    assert len(sent) == 36, sent


def test_guesses_that_miss_fall_back_to_the_walk(lab: tuple[Any, Any], sent: Sent, monkeypatch: pytest.MonkeyPatch) -> None:
    """A BMC that does not follow the pattern (here: the patterns made wrong) is read as before, the guess
    costing one 404 each."""
    real = driver_mod.quirks_for

    def wrong(profile: Any, model: str | None = None) -> Quirks:
        q = real(profile, model)
        assert q.pcie_function0_id == "0" and q.log_entries_suffix and q.firmware_inventory_suffix, q
        return dataclasses.replace(q, pcie_function0_id="7", log_entries_suffix="/Elsewhere",
                                   firmware_inventory_suffix="/Elsewhere")  # fmt: skip

    old = _read(_target(lab), plan=ReadPlan.full(), expand=False)
    monkeypatch.setattr(driver_mod, "quirks_for", wrong)
    sent.clear()
    new = _read(_target(lab))
    assert new.ok, new.error
    _same_reading(new.value, old.value)
    missed = sorted(p for _, p, status, _c in sent if status == 404)
    assert len(missed) == 6 + 3 + 1, missed
    assert all(p.endswith(("/PCIeFunctions/7", "/Elsewhere")) for p in missed), missed
    gets = _gets(sent)
    assert sum(p.endswith("/PCIeFunctions") for p in gets) == 6
    assert "/redfish/v1/UpdateService" in gets
    assert sum(p.endswith("/Entries") for p in gets) == 3


@pytest.mark.parametrize("system_id", ["system", "/system/"])
def test_a_system_id_the_inventory_knows_saves_the_systems_collection(lab: tuple[Any, Any], sent: Sent, system_id: str) -> None:
    known = _read(_target(lab, system_id=system_id))
    assert known.ok, known.error
    assert "/redfish/v1/Systems" not in _gets(sent)
    count = len(sent)
    sent.clear()
    walked = _read(_target(lab))
    # without the id: Systems?only, the system itself (bmcweb offers OnlyMemberQuery), the same count
    assert "/redfish/v1/Systems?only" in _gets(sent) and len(sent) == count
    assert known.value.facts == walked.value.facts


def test_a_system_id_not_at_its_uri_falls_back_to_the_collection(lab: tuple[Any, Any], sent: Sent) -> None:
    """Another case (the lab's URIs, as bmcweb's, are case-sensitive: a 404) is matched in the collection, as before."""
    r = _read(_target(lab, system_id="SYSTEM"))
    assert r.ok, r.error
    assert [p for _, p, s, _c in sent if s == 404] == ["/redfish/v1/Systems/SYSTEM"]
    gets = _gets(sent)
    assert "/redfish/v1/Systems" in gets and r.value.facts.serial
    assert gets.count("/redfish/v1/Systems/system") == 1


def test_a_wrong_system_id_names_the_ids_the_bmc_has(lab: tuple[Any, Any], sent: Sent) -> None:
    r = _read(_target(lab, system_id="host2"))
    assert not r.ok and "no system 'host2' (the BMC has: system)" in str(r.error), r.error
    assert [p for _, p, s, _c in sent if s == 404] == ["/redfish/v1/Systems/host2"]


def test_the_recorded_openbmc_is_read_at_the_same_uris(sent: Sent) -> None:
    """The real bmcweb (shared/redfish-mockups/openbmc-stock): its root names no vendor, so the quirks come from
    the manager's model, which the sweep reads anyway; its log entries and firmware inventory are where the
    pattern says (4 requests fewer: 3 LogService documents and the UpdateService)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "contract"))
    from mockup_server import MockupServer, mockups_dir

    base = mockups_dir()
    if base is None or not (base / "openbmc-stock").is_dir():
        pytest.skip("shared/redfish-mockups/openbmc-stock not found beside the repository (set FLEETCTL_SHARED)")
    with MockupServer(base / "openbmc-stock") as server:
        target = BMCTarget(name="openbmc-stock", url=server.url, username="admin", password="secret", timeout=10, retries=0)
        old = _read(target, plan=ReadPlan.full(), expand=False)
        sent.clear()
        new = _read(target)
    assert new.ok and old.ok, (new.error, old.error)
    assert new.value.firmware == old.value.firmware and new.value.firmware
    assert new.value.logs == old.value.logs and new.value.logs
    gets = _gets(sent)
    assert sorted(p for p in gets if "/LogServices/" in p) == [
        "/redfish/v1/Managers/bmc/LogServices/Journal/Entries", "/redfish/v1/Systems/system/LogServices/EventLog/Entries",
        "/redfish/v1/Systems/system/LogServices/HostLogger/Entries"]  # fmt: skip
    assert "/redfish/v1/UpdateService" not in gets
    assert len(sent) == 19 and all(status < 400 for _, _, status, _c in sent), sent
