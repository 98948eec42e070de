"""The system read with ``{Systems}?only`` where the BMC offers it: one request fewer, the same readings (issue 24).

DSP0266's ``only`` (``ProtocolFeaturesSupported.OnlyMemberQuery``, advertised by every recorded BMC) answers a
collection of exactly one member with that member. Where the inventory gives no system id, the driver asks it
instead of the Systems collection and takes the ComputerSystem it answers, whose later reads (read once) cost
nothing. A BMC that ignores ``only`` or has several systems answers the collection: the walk goes on with it,
as before, no request more. One that refuses the query (501) is read the plain way, one request more. Against
in-process lab BMCs; every request the driver sends is recorded; the plain read (``OnlyMemberQuery`` not
looked at) is the reference.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.sweep.collect import ServerReading, bmc_operation

fleetctl_lab = pytest.importorskip("fleetctl_lab.bmc")
from fleetctl_drivers.redfish import run_many  # noqa: E402
from fleetctl_drivers.redfish.cache import ReadingCache  # noqa: E402
from fleetctl_drivers.redfish.client import RedfishClient  # noqa: E402

Sent = list[tuple[str, str, int, bool]]  # tests/unit/sweep/conftest.py's sent
DIALECTS = ("ami", "openbmc", "hpe", "generic")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, Any]]]:
    specs = fleetctl_lab.generate_specs(len(DIALECTS) + 1, prefix="oq", flavours=(*DIALECTS, "nvidia"), mix=("mncore",))
    config = fleetctl_lab.LabConfig(state_dir=tmp_path_factory.mktemp("lab-only"), power_transition_s=0.1)
    with fleetctl_lab.run_lab_in_thread(specs, config) as running:
        by = {running.lab.bmc(s.name).flavour.name: s for s in specs}
        assert set(by) == {*DIALECTS, "nvidia"}
        for s in specs:
            running.set_fault(s.name, memory_errors=1)  # a log entry, so that the logs compared are not empty
        yield running, by


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Read as before: the service root's OnlyMemberQuery not looked at."""

    def use() -> None:
        async def never(self: RedfishClient) -> bool:
            return False

        monkeypatch.setattr(RedfishClient, "offers_only", never)

    return use


@pytest.fixture
def only_mode(lab: tuple[Any, dict[str, Any]]) -> Iterator[Any]:
    """Make a lab BMC advertise ``only`` and serve, ignore or refuse it (``Flavour.only_query``) for one test."""
    running, by = lab
    changed: list[tuple[Any, Any]] = []

    def set_mode(flavour: str, mode: str) -> None:
        bmc = running.lab.bmc(by[flavour].name)
        changed.append((bmc, bmc.flavour))
        running.call(setattr, bmc, "flavour", dataclasses.replace(bmc.flavour, only_query=mode))
        running.call(bmc.touch)

    yield set_mode
    for bmc, flavour in reversed(changed):
        running.call(setattr, bmc, "flavour", flavour)
        running.call(bmc.touch)


def _target(lab: tuple[Any, dict[str, Any]], flavour: str) -> BMCTarget:
    running, by = lab
    s = by[flavour]
    return BMCTarget(name=s.name, url=running.url_of(s.name), username=s.username, password=s.password,
                     fingerprint=running.fingerprint_of(s.name), timeout=10, retries=0)  # fmt: skip


def _read(target: BMCTarget, *, cache: ReadingCache | None = None) -> ServerReading:
    async def run() -> list[Any]:
        return await run_many([target], bmc_operation({}, cache=cache), concurrency=1, read_once=True, expand=True)

    (result,) = asyncio.run(run())
    assert result.ok, result.error
    return result.value


def _same(new: ServerReading, old: ServerReading) -> None:
    assert new.facts is not None and new.facts == old.facts
    assert new.health == old.health and new.firmware == old.firmware and new.logs == old.logs
    assert new.logs and new.facts.boards
    assert not new.errors and not old.errors


def _systems(sent: Sent) -> list[tuple[str, int]]:
    return [(p, s) for m, p, s, _ in sent if m == "GET" and p.startswith("/redfish/v1/Systems") and p.count("/") <= 4]


@pytest.mark.parametrize("flavour", DIALECTS)
def test_one_request_fewer_where_only_is_offered(lab: tuple[Any, dict[str, Any]], sent: Sent, plain: Any, flavour: str) -> None:
    new = _read(_target(lab, flavour))
    n_new = len(sent)
    # the ?only answer is the system: neither the collection nor the member is asked
    assert _systems(sent) == [("/redfish/v1/Systems?only", 200)], _systems(sent)
    sent.clear()
    plain()
    old = _read(_target(lab, flavour))
    walked = [p for p, _ in _systems(sent)]
    assert len(walked) == 2 and walked[0] == "/redfish/v1/Systems" and walked[1].startswith("/redfish/v1/Systems/")
    assert n_new == len(sent) - 1, (n_new, len(sent))
    _same(new, old)


def test_a_bmc_that_ignores_only_is_walked_as_before(lab: tuple[Any, dict[str, Any]], sent: Sent, plain: Any,
                                                     only_mode: Any) -> None:  # fmt: skip
    only_mode("ami", "ignored")
    new = _read(_target(lab, "ami"))
    n_new = len(sent)
    assert [p for p, _ in _systems(sent)] == ["/redfish/v1/Systems?only", "/redfish/v1/Systems/Self"]
    sent.clear()
    plain()
    old = _read(_target(lab, "ami"))
    assert [p for p, _ in _systems(sent)] == ["/redfish/v1/Systems", "/redfish/v1/Systems/Self"]
    assert n_new == len(sent)
    _same(new, old)


def test_a_bmc_with_two_systems_is_walked_as_before(lab: tuple[Any, dict[str, Any]], sent: Sent, plain: Any,
                                                    only_mode: Any) -> None:  # fmt: skip
    """The NVIDIA dialect lists the HGX baseboard as a second ComputerSystem: ``?only`` answers the collection."""
    only_mode("nvidia", "served")
    new = _read(_target(lab, "nvidia"))
    n_new = len(sent)
    got = [p for p, _ in _systems(sent)]
    assert got[0] == "/redfish/v1/Systems?only" and "/redfish/v1/Systems" not in got, got
    sent.clear()
    plain()
    old = _read(_target(lab, "nvidia"))
    want = [p for p, _ in _systems(sent)]
    assert want[0] == "/redfish/v1/Systems" and got[1:] == want[1:], (got, want)
    assert n_new == len(sent)
    assert new.facts == old.facts and new.health == old.health and new.firmware == old.firmware


def test_a_bmc_that_refuses_only_is_read_plainly(lab: tuple[Any, dict[str, Any]], sent: Sent, plain: Any,
                                                 only_mode: Any) -> None:  # fmt: skip
    only_mode("openbmc", "refused")
    new = _read(_target(lab, "openbmc"))
    n_new = len(sent)
    assert _systems(sent)[:3] == [("/redfish/v1/Systems?only", 501), ("/redfish/v1/Systems", 200),
                                  ("/redfish/v1/Systems/system", 200)]  # fmt: skip
    sent.clear()
    plain()
    old = _read(_target(lab, "openbmc"))
    assert n_new == len(sent) + 1  # the refusal
    _same(new, old)


@pytest.mark.parametrize("flavour", ["openbmc", "ami"])
def test_only_is_never_conditional_and_the_system_is_not_read_again(lab: tuple[Any, dict[str, Any]], sent: Sent,
                                                                    flavour: str, tmp_path: Path) -> None:  # fmt: skip
    cache = ReadingCache(tmp_path / "cache.sqlite")
    first = _read(_target(lab, flavour), cache=cache)
    n_first = len(sent)
    sent.clear()
    second = _read(_target(lab, flavour), cache=cache)
    assert len(sent) == n_first
    asked = [(p, c) for m, p, _, c in sent if m == "GET" and p.startswith("/redfish/v1/Systems")]
    assert asked[0] == ("/redfish/v1/Systems?only", False)
    assert not any(p.count("/") == 4 and "?" not in p for p, _ in asked), asked  # neither Systems nor Systems/{id}
    assert any(c for _, _, _, c in sent)  # the other documents are still asked conditionally
    assert second.facts == first.facts and second.firmware == first.firmware
    cache.close()
