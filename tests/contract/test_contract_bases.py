"""The BMC and switch contract bases, used as a driver outside this repository uses them, and their rules enforced.

``TestNotRedfish`` is what a package with a BMC driver of another protocol
writes: its peers table and how a peer opens (here an in-memory BMC that
reads its power state and refuses everything else, as its row says). The
tests below it give the shipped checks answers that break a rule (an
exception of the wrong type, an error that does not name the device, a row
that does not speak for every capability, VLANs the row does not expect) and
show each fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from fleetctl_drivers.testing import bmc as bmc_contract
from fleetctl_drivers.testing import switch as switch_contract
from fleetctl_drivers.testing.bmc import BMCContract, Refused, all_caps

from fleetctl.errors import DriverError, SwitchError
from fleetctl.interfaces.bmc import PowerState

NOT_SUPPORTED = Refused(r"is not supported by this BMC", "an in-memory BMC: it reads its power state, nothing else")


class _Refuses:
    """Every call raises the driver's own error, naming the BMC."""

    def __init__(self, name: str, what: str, error: type[Exception] = DriverError, named: bool = True) -> None:
        self.message = (f"{name}: " if named else "") + f"{what} is not supported by this BMC"
        self.error = error

    def __getattr__(self, attr: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            raise self.error(self.message)

        return call


class _Power:
    def __init__(self, name: str) -> None:
        self.refuse = _Refuses(name, "power control")

    async def state(self) -> PowerState:
        return PowerState.ON

    def __getattr__(self, attr: str) -> Any:  # on, off, wait_for
        return getattr(self.refuse, attr)


class MemoryBMC:
    """A BMC driver of no protocol fleetctl knows: an async context manager giving capabilities, as the contract wants."""

    def __init__(self, name: str, **refusal: Any) -> None:
        self.name = name
        self.power = _Power(name)
        for cap in ("inventory", "health", "firmware", "boot", "manager", "bios", "media"):
            setattr(self, cap, _Refuses(name, cap, **refusal))

    async def __aenter__(self) -> MemoryBMC:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class TestNotRedfish(BMCContract):
    PEERS: ClassVar[Mapping[str, bmc_contract.Peer]] = {
        "mem-1": bmc_contract.Peer("memory", caps=all_caps(**{c: NOT_SUPPORTED for c in bmc_contract.CAPABILITIES if c != "power"})),
    }

    def target(self, request: pytest.FixtureRequest, name: str, cap: str) -> tuple[Any, dict[str, Any]]:
        return name, {"serial": None, "model": None}

    def open(self, target: Any) -> AbstractAsyncContextManager[Any]:
        return MemoryBMC(target)

    def assert_open(self, bmc: Any) -> None:  # not Redfish: no system URI to show
        assert isinstance(bmc, MemoryBMC)


def _capability(bmc: MemoryBMC, cap: str, support: Any) -> None:
    peer = TestNotRedfish.PEERS["mem-1"]
    asyncio.run(bmc_contract.check_capability(bmc, "mem-1", peer, cap, support, {"serial": None, "model": None}))


def test_a_refusal_of_the_wrong_type_fails_the_bmc_contract() -> None:
    with pytest.raises(AssertionError, match="RuntimeError is not the driver's DriverError"):
        _capability(MemoryBMC("mem-1", error=RuntimeError), "bios", NOT_SUPPORTED)


def test_a_refusal_that_does_not_name_the_bmc_fails_the_bmc_contract() -> None:
    with pytest.raises(AssertionError, match="does not name the BMC"):
        _capability(MemoryBMC("mem-1", named=False), "bios", NOT_SUPPORTED)


def test_a_capability_said_supported_but_refused_fails_the_bmc_contract() -> None:
    with pytest.raises(DriverError, match="bios is not supported"):
        _capability(MemoryBMC("mem-1"), "bios", bmc_contract.YES)


def test_a_row_that_does_not_speak_for_every_capability_fails() -> None:
    caps = all_caps()
    del caps["media"]
    with pytest.raises(AssertionError, match="say for every capability"):
        bmc_contract.check_table({"half": bmc_contract.Peer("x", caps=caps)})
    with pytest.raises(AssertionError, match="say for every capability"):
        switch_contract.check_table({"half": switch_contract.Peer("x", "eos", {"facts": True})})


def test_the_switch_refusal_rule() -> None:
    peer = switch_contract.Peer("x", "eos", switch_contract.all_caps(lldp=switch_contract.Refused("LLDP is not supported", "none")))
    lldp = switch_contract.Refused("LLDP is not supported", "none")

    def sw(error: Exception) -> Any:
        def neighbors() -> Any:
            raise error

        return SimpleNamespace(lldp=SimpleNamespace(neighbors=neighbors))

    switch_contract.check_capability(sw(SwitchError("sw-1: LLDP is not supported by this switch")), "sw-1", peer, "lldp", lldp)
    with pytest.raises(AssertionError, match="does not name the switch"):
        switch_contract.check_capability(sw(SwitchError("LLDP is not supported by this switch")), "sw-1", peer, "lldp", lldp)
    with pytest.raises(AssertionError, match="is not the driver's SwitchError"):
        switch_contract.check_capability(sw(KeyError("lldp")), "sw-1", peer, "lldp", lldp)


def test_a_switch_listing_vlans_its_row_does_not_hold_fails_when_the_row_says_all() -> None:
    sw = SimpleNamespace(vlans=lambda: {100, 200, 300})
    caps = switch_contract.all_caps(interfaces=switch_contract.Refused("x", "y"))
    switch_contract.check_vlans(sw, switch_contract.Peer("x", "linux", caps, vlans=frozenset({100, 200})))
    with pytest.raises(AssertionError):
        switch_contract.check_vlans(sw, switch_contract.Peer("x", "linux", caps, vlans=frozenset({100, 200}), all_vlans=True))
