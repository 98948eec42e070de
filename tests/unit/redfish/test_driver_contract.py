"""One driver contract: sweeps declared on the interfaces, targets naming their
driver, and fleetctl.plugins running a sweep over targets of mixed drivers."""

from __future__ import annotations

import asyncio
import inspect
import threading
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest
from redfish_fake_bmc import FakeBMC, base_resources

from fleetctl import plugins
from fleetctl.errors import FleetError
from fleetctl.interfaces.bmc import BMC, BMCTarget, PowerState
from fleetctl.interfaces.snmp import Poller, SnmpTarget
from fleetctl.interfaces.sweep import BMCSweepResult, SwitchSweepResult
from fleetctl.interfaces.switch import Switch, SwitchTarget

# --------------------------------------------------------------------------
# The contract: every driver class provides sweep; the registries hand out classes
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "name", "base", "is_async"),
    [("bmc", "redfish", BMC, True), ("switch", "netmiko", Switch, False), ("snmp", "pysnmp", Poller, True)],
)
def test_registered_drivers_are_classes_implementing_their_interface(kind: str, name: str, base: Any, is_async: bool) -> None:
    cls = plugins.load_driver(kind, name)
    assert issubclass(cls, base)  # a class (issubclass refuses anything else)
    assert not cls.__abstractmethods__
    assert "sweep" in base.__abstractmethods__  # declared on the interface, not attached afterwards
    assert "sweep" in vars(cls)  # implemented by the driver class itself
    assert inspect.iscoroutinefunction(cls.sweep) is is_async


def test_targets_name_their_driver_with_defaults() -> None:
    assert BMCTarget(name="n1", url="https://192.0.2.1").driver == "redfish"
    assert SwitchTarget("sw1", "192.0.2.2").driver == "netmiko"
    assert SnmpTarget(name="sw1", host="192.0.2.2").driver == "pysnmp"
    assert SnmpTarget(name="sw1", host="192.0.2.2", driver="other").driver == "other"


def test_a_driver_without_sweep_cannot_be_made() -> None:
    class Incomplete(BMC):
        async def close(self) -> None:
            pass

    with pytest.raises(TypeError, match="sweep"):
        Incomplete()  # type: ignore[abstract]


# --------------------------------------------------------------------------
# plugins: grouping and merging, with fake drivers of two names
# --------------------------------------------------------------------------


class _SyncDriver:
    """A switch-like driver: synchronous sweep; records what it was given."""

    calls: ClassVar[list[tuple[str, list[str], dict[str, Any]]]] = []
    tag = "a"

    @classmethod
    def sweep(cls, targets: list[Any], operation: Any, *, concurrency: int = 16, progress: Any = None) -> list[SwitchSweepResult]:
        cls.calls.append((cls.tag, [t.name for t in targets], {"concurrency": concurrency, "thread": threading.current_thread().name}))
        out = []
        for i, t in enumerate(targets):
            r = SwitchSweepResult(target=t.name, ok=True, value=(cls.tag, operation(t)))
            out.append(r)
            if progress:
                progress(i + 1, len(targets), r)
        return out


class _SyncDriverB(_SyncDriver):
    tag = "b"


class _AsyncDriver:
    """A BMC-like driver: async sweep; shares a session through fleet_session()."""

    opened: ClassVar[list[str]] = []
    closed: ClassVar[list[str]] = []
    seen_fleets: ClassVar[list[Any]] = []
    tag = "x"

    @classmethod
    async def sweep(cls, targets: list[Any], operation: Any, *, progress: Any = None, fleet: Any = None, **kw: Any) -> list[BMCSweepResult]:
        cls.seen_fleets.append(fleet)
        out = []
        for i, t in enumerate(targets):
            await asyncio.sleep(0)
            r = BMCSweepResult(target=t.name, ok=True, value=(cls.tag, await operation(t)))
            out.append(r)
            if progress:
                progress(i + 1, len(targets), r)
        return out

    @classmethod
    def fleet_session(cls) -> Any:
        @asynccontextmanager
        async def cm() -> Any:
            cls.opened.append(cls.tag)
            yield f"session-{cls.tag}"
            cls.closed.append(cls.tag)

        return cm()

    def __init__(self, target: Any, *, fleet: Any = None, **options: Any) -> None:
        self.target, self.fleet, self.options = target, fleet, options

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


class _AsyncDriverY(_AsyncDriver):
    tag = "y"


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = {
        ("switch", "a"): _SyncDriver,
        ("switch", "b"): _SyncDriverB,
        ("bmc", "x"): _AsyncDriver,
        ("bmc", "y"): _AsyncDriverY,
    }

    def load(kind: str, name: str) -> Any:
        if (kind, name) not in registry:
            raise FleetError(f"no {kind} driver named {name!r} (installed: a, b, x, y)", exit_code=2)
        return registry[(kind, name)]

    monkeypatch.setattr(plugins, "load_driver", load)
    _SyncDriver.calls = []
    _AsyncDriver.opened, _AsyncDriver.closed, _AsyncDriver.seen_fleets = [], [], []


def _sw(name: str, driver: str) -> SwitchTarget:
    return SwitchTarget(name, "192.0.2.1", driver=driver)


def _bmc(name: str, driver: str) -> BMCTarget:
    return BMCTarget(name=name, url="https://192.0.2.1", driver=driver)


def test_drivers_for_groups_in_order_of_first_appearance(fake_registry: None) -> None:
    targets = [_sw("s1", "b"), _sw("s2", "a"), _sw("s3", "b")]
    groups = plugins.drivers_for("switch", targets)
    assert list(groups) == [_SyncDriverB, _SyncDriver]
    assert [t.name for t in groups[_SyncDriverB]] == ["s1", "s3"]
    assert plugins.driver_for("switch", targets[1]) is _SyncDriver


def test_unknown_driver_names_the_targets_before_any_work(fake_registry: None) -> None:
    targets = [_sw("s1", "a"), _sw("s2", "nope"), _sw("s3", "nope")]
    with pytest.raises(FleetError, match=r"s2, s3: no switch driver named 'nope'") as e:
        plugins.sweep("switch", targets, lambda t: t.name)
    assert e.value.exit_code == 2
    assert _SyncDriver.calls == []


def test_sync_sweep_over_mixed_drivers_merges_in_order(fake_registry: None) -> None:
    targets = [_sw("s1", "a"), _sw("s2", "b"), _sw("s3", "a"), _sw("s1", "a")]  # a target twice: two sessions
    seen: list[tuple[int, int, str]] = []
    results = plugins.sweep(
        "switch", targets, lambda t: t.name.upper(), concurrency=3, progress=lambda d, n, r: seen.append((d, n, r.target))
    )
    assert [(r.target, r.value) for r in results] == [("s1", ("a", "S1")), ("s2", ("b", "S2")), ("s3", ("a", "S3")), ("s1", ("a", "S1"))]
    assert sorted((tag, names) for tag, names, _ in _SyncDriver.calls) == [("a", ["s1", "s3", "s1"]), ("b", ["s2"])]
    assert {kw["concurrency"] for _, _, kw in _SyncDriver.calls} == {3}
    assert sorted(d for d, _, _ in seen) == [1, 2, 3, 4] and {n for _, n, _ in seen} == {4}


def test_sync_sweep_with_one_driver_runs_in_the_calling_thread(fake_registry: None) -> None:
    results = plugins.sweep("switch", [_sw("s1", "a"), _sw("s2", "a")], lambda t: 1)
    assert [r.target for r in results] == ["s1", "s2"]
    assert _SyncDriver.calls[0][2]["thread"] == threading.current_thread().name
    assert plugins.sweep("switch", [], lambda t: 1) == []


def test_async_sweep_from_sync_callers_and_shared_sessions(fake_registry: None) -> None:
    async def op(t: Any) -> str:
        return t.name

    targets = [_bmc("n1", "y"), _bmc("n2", "x"), _bmc("n3", "y")]
    results = plugins.sweep("bmc", targets, op, concurrency=5)
    assert [(r.target, r.value) for r in results] == [("n1", ("y", "n1")), ("n2", ("x", "n2")), ("n3", ("y", "n3"))]
    assert _AsyncDriver.seen_fleets == [None, None]  # no FleetSessions: each sweep opens its own

    async def batch() -> None:
        async with plugins.FleetSessions() as fleets:
            got = await plugins.sweep_async("bmc", targets, op, fleets=fleets)
            assert [r.target for r in got] == ["n1", "n2", "n3"]
            async with fleets.connect(targets[1], task_poll_interval=0.5) as bmc:
                assert isinstance(bmc, _AsyncDriver) and bmc.fleet == "session-x" and bmc.options == {"task_poll_interval": 0.5}
            assert sorted(_AsyncDriver.opened) == ["x", "y"]  # one session per driver, opened once
            assert _AsyncDriver.closed == []
        assert sorted(_AsyncDriver.closed) == ["x", "y"]

    asyncio.run(batch())
    assert sorted(_AsyncDriver.seen_fleets[2:]) == ["session-x", "session-y"]


def test_sweep_async_runs_a_sync_driver_off_the_event_loop(fake_registry: None) -> None:
    async def body() -> list[Any]:
        return await plugins.sweep_async("switch", [_sw("s1", "a"), _sw("s2", "b")], lambda t: t.name)

    results = asyncio.run(body())
    assert [r.value for r in results] == [("a", "s1"), ("b", "s2")]
    assert all(kw["thread"] != threading.current_thread().name for _, _, kw in _SyncDriver.calls)


# --------------------------------------------------------------------------
# The Redfish driver through the registry
# --------------------------------------------------------------------------


def test_redfish_sweep_through_plugins_and_fleet_sessions() -> None:
    async def body() -> None:
        async with FakeBMC() as on, FakeBMC(base_resources(power="Off")) as off:
            targets = [
                BMCTarget(name="n1", url=on.url, username="admin", password="pw"),
                BMCTarget(name="n2", url=off.url, username="admin", password="pw"),
            ]
            async with plugins.FleetSessions() as fleets:
                results = await plugins.sweep_async("bmc", targets, lambda bmc: bmc.power.state(), fleets=fleets)
                assert [(r.target, r.ok, r.value) for r in results] == [("n1", True, PowerState.ON), ("n2", True, PowerState.OFF)]
                assert all(isinstance(r, BMCSweepResult) for r in results)
                async with fleets.connect(targets[0], task_poll_interval=0.1) as bmc:
                    assert await bmc.power.state() == PowerState.ON
                    assert bmc.fingerprint_first_seen is False
                fleet = await fleets.session(plugins.load_driver("bmc", "redfish"))
                assert fleet.http is not None  # one shared pool, open for the batch
            assert fleet.http is None  # closed with the batch
            assert on.logouts == 2 and off.logouts == 1

    asyncio.run(body())


def test_redfish_sweep_classmethod_matches_run_many_from_sync_callers() -> None:
    async def serve() -> None:
        async with FakeBMC() as bmc:
            t = BMCTarget(name="n1", url=bmc.url, username="admin", password="pw")
            (r,) = await asyncio.to_thread(plugins.sweep, "bmc", [t], lambda d: d.power.state())
            assert r.ok and r.value == PowerState.ON

    asyncio.run(serve())
