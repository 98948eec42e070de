"""The provisioning workflow's coordinators: power gate, switch batches and Ansible batches."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import pytest

from fleetctl.workflows.provision.coordinators import AnsibleBatcher, PowerGate
from fleetctl.workflows.provision.model import StepFailed


def test_power_gate_staggers_starts_and_keeps_the_budget() -> None:
    async def main() -> tuple[list[tuple[str, float]], list[str]]:
        gate = PowerGate({"s/r1": 3500}, {"s/r1": 500}, stagger_s=0.2)
        starts: list[tuple[str, float]] = []
        refused: list[str] = []
        t0 = time.monotonic()

        async def one(name: str, peak: int, drawing: bool = False) -> None:
            try:
                await gate.admit("s/r1", peak, already_drawing=drawing)
                starts.append((name, time.monotonic() - t0))
            except StepFailed as e:
                refused.append(f"{name}: {e}")

        await asyncio.gather(one("a", 1000), one("b", 1000), one("c", 1000), one("d", 1000, drawing=True))
        return starts, refused

    starts, refused = asyncio.run(main())
    # 500 W drawing + 1000 + 1000 = 2500; a third 1000 W would make 3500: still in; the fourth was drawing already.
    assert [n for n, _ in starts] == ["a", "b", "c", "d"]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(starts)]
    assert all(g >= 0.18 for g in gaps), gaps
    assert not refused


def test_power_gate_refuses_what_would_exceed_the_budget() -> None:
    async def main() -> str:
        gate = PowerGate({"s/r1": 2000}, {}, stagger_s=0)
        await gate.admit("s/r1", 1500, already_drawing=False)
        with pytest.raises(StepFailed) as e:
            await gate.admit("s/r1", 1500, already_drawing=False)
        return str(e.value)

    msg = asyncio.run(main())
    assert "3000 W" in msg and "2000 W budget" in msg


def test_ansible_batches_start_when_everybody_arrived_or_after_the_window() -> None:
    runs: list[list[str]] = []

    def run(names: list[str], stop: threading.Event) -> dict[str, str]:
        runs.append(names)
        return {n: f"done {n}" for n in names}

    async def main() -> list[str]:
        b = AnsibleBatcher(window_s=0.3, run=run)
        for n in ("a", "b", "c", "d"):
            b.expect(n)

        async def late(n: str, delay: float) -> str:
            await asyncio.sleep(delay)
            return await b.submit(n)

        async def dies(n: str, delay: float) -> None:
            await asyncio.sleep(delay)
            b.gone(n)

        got = await asyncio.gather(late("a", 0), late("b", 0.05), late("c", 1.0), dies("d", 0.1))
        return [g for g in got if g]

    got = asyncio.run(main())
    # a and b go together after the window (c is still expected); c alone once it arrives (nobody left).
    assert runs == [["a", "b"], ["c"]]
    assert got == ["done a", "done b", "done c"]


def test_ansible_batch_starts_at_once_when_nobody_else_is_coming() -> None:
    runs: list[list[str]] = []

    def run(names: list[str], stop: threading.Event) -> dict[str, str]:
        runs.append(names)
        return {n: n for n in names}

    async def main() -> float:
        b = AnsibleBatcher(window_s=30, run=run)
        b.expect("a")
        b.expect("b")
        t0 = time.monotonic()
        await asyncio.gather(b.submit("a"), b.submit("b"))
        return time.monotonic() - t0

    took = asyncio.run(main())
    assert runs == [["a", "b"]] and took < 5


def test_ansible_batch_is_told_to_stop_once_nobody_waits_for_it() -> None:
    """A run interrupted (`jobs cancel` on a worker cancels the servers' steps; Ctrl-C cancels every task): the
    playbook is stopped, not waited for."""
    told: list[str] = []

    def run(names: list[str], stop: threading.Event) -> dict[str, str]:
        told.append("stopped" if stop.wait(10) else "not told")
        return {}

    async def main() -> None:
        b = AnsibleBatcher(window_s=30, run=run)
        b.expect("a")
        b.expect("b")
        waiters = [asyncio.ensure_future(b.submit(n)) for n in ("a", "b")]
        await asyncio.sleep(0.1)
        waiters[0].cancel()
        await asyncio.sleep(0.3)
        assert told == []  # b still waits for it
        waiters[1].cancel()
        await asyncio.gather(*b.running, return_exceptions=True)

    t0 = time.monotonic()
    asyncio.run(main())
    assert told == ["stopped"] and time.monotonic() - t0 < 5


def test_switch_changes_go_through_the_driver_the_switch_names(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The batcher loads the switch's own driver (SwitchTarget.driver), never one by a fixed name."""
    from dataclasses import dataclass

    import fleetctl.plugins
    import fleetctl.targets
    from fleetctl.workflows.provision.coordinators import SwitchBatcher

    @dataclass
    class Target:
        name: str
        driver: str

    @dataclass
    class Outcome:
        ok: bool
        error: str | None = None

    loaded: list[str] = []
    applied: list[str] = []

    class FakeSwitch:
        def apply_port_change(self, port: str, wanted: Any, *, protected: set[str], force: bool) -> str:
            applied.append(port)
            return f"{port} -> {wanted}"

        @classmethod
        def sweep(cls, targets: list[Target], op: Any, *, concurrency: int) -> list[Outcome]:
            for _ in targets:
                op(cls())
            return [Outcome(True) for _ in targets]

    def driver_for(kind: str, target: Target) -> Any:
        loaded.append(f"{kind}:{target.driver}")
        return FakeSwitch

    monkeypatch.setattr(fleetctl.plugins, "driver_for", driver_for)
    monkeypatch.setattr(fleetctl.targets, "switch_targets", lambda refs: ([Target("leaf1", "eos-ish")], {}))

    async def main() -> list[Any]:
        b = SwitchBatcher({"leaf1": object()}, window_s=0.05, protected={}, sessions=2)
        return await asyncio.gather(*(b.change("leaf1", p, 200, force=False) for p in ("Ethernet1", "Ethernet2", "Ethernet3")))

    got = asyncio.run(main())
    assert loaded == ["switch:eos-ish"] and sorted(applied) == ["Ethernet1", "Ethernet2", "Ethernet3"]
    assert got == ["Ethernet1 -> 200", "Ethernet2 -> 200", "Ethernet3 -> 200"]
