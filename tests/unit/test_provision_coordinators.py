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

R = "s/r1"
MEMBERS = {R: [("on", 500), ("a", 1000), ("b", 1000), ("c", 1000), ("d", 1000), ("x", 1000), ("y", 1000)]}


def ledger(budget: int | None, *, drawing: tuple[str, ...] = (), stagger_s: float = 0.0, read_at: float | None = None,
           holder: str = "op1") -> Any:  # fmt: skip
    """One process's view of rack s/r1: what it read from the BMCs, and the store every process shares."""
    from fleetctl.lifecycle.rack_power import RackPower
    from fleetctl.store import get_engine

    return RackPower(get_engine(), budgets={R: budget}, members=MEMBERS, drawing=drawing,
                     read_at=time.time() if read_at is None else read_at, stagger_s=stagger_s, holder=holder)  # fmt: skip


def test_power_gate_staggers_starts_and_keeps_the_budget(db_url: str) -> None:
    async def main() -> tuple[list[tuple[str, float]], list[str]]:
        gate = PowerGate(ledger(3500, drawing=("on", "d"), stagger_s=0.5))
        starts: list[tuple[str, float]] = []
        refused: list[str] = []
        t0 = time.monotonic()

        async def one(name: str, drawing: bool = False) -> None:
            try:
                await gate.admit(R, name, 1000, already_drawing=drawing)
                starts.append((name, time.monotonic() - t0))
            except StepFailed as e:
                refused.append(f"{name}: {e}")

        await asyncio.gather(one("a"), one("b"), one("d", drawing=True), one("c"))
        return starts, refused

    starts, refused = asyncio.run(main())
    # "on" (500 W) and "d" (1000 W) drawing + a, b: 3500; c would make 4500; d was drawing already: a slot, no watts.
    assert [n for n, _ in starts] == ["a", "b", "d"]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(starts)]
    assert all(g >= 0.4 for g in gaps), gaps  # 0.5 s apart in the store; the wake-ups may come a little late
    assert refused == ["c: rack s/r1 would draw 4500 W at peak, over its 3500 W budget"]


def test_power_gate_refuses_what_would_exceed_the_budget(db_url: str) -> None:
    async def main() -> str:
        gate = PowerGate(ledger(2000))
        await gate.admit(R, "a", 1500, already_drawing=False)
        with pytest.raises(StepFailed) as e:
            await gate.admit(R, "b", 1500, already_drawing=False)
        return str(e.value)

    msg = asyncio.run(main())
    assert "3000 W" in msg and "2000 W budget" in msg


def test_two_processes_share_one_rack_s_budget_and_stagger(db_url: str) -> None:
    """Each process read the rack's power before the other started anything: the store still counts both."""
    one, two = ledger(2500, stagger_s=5.0, holder="op1"), ledger(2500, stagger_s=5.0, holder="op2")
    a = one.admit(R, "a", 1000, already_drawing=False)
    x = two.admit(R, "x", 1000, already_drawing=False)  # op2's reading never saw a: counted from the store
    assert (a.draw_w, x.draw_w) == (1000, 2000)
    assert x.start_at >= a.start_at + 5.0  # op2's start waits for op1's stagger
    from fleetctl.lifecycle.rack_power import OverBudget

    with pytest.raises(OverBudget, match="would draw 3000 W at peak, over its 2500 W budget"):
        one.admit(R, "b", 1000, already_drawing=False)
    # a server both saw admitted and then read as on is counted once
    three = ledger(2500, drawing=("a", "x"), stagger_s=5.0, holder="op3")
    assert three.admit(R, "a", 1000, already_drawing=True).draw_w == 2000


def test_a_reading_taken_after_an_old_admission_is_what_counts(db_url: str) -> None:
    """An admission whose slot is long past shows on its BMC: a later reading that found it off (it was powered off
    since) does not count it again."""
    from fleetctl.lifecycle.rack_power import MARGIN_S

    ledger(1500, read_at=time.time() - 3 * MARGIN_S).admit(R, "a", 1000, already_drawing=False)
    later = ledger(1500, read_at=time.time() + 2 * MARGIN_S)  # as if read two minutes after a's slot
    assert later.admit(R, "x", 1000, already_drawing=False).draw_w == 1000


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


def test_a_server_resubmitted_while_its_playbook_runs_waits_for_it_and_joins_a_later_batch() -> None:
    """A unit Temporal gave up (its heartbeat lapsed) is started again; its old attempt, cancelled while waiting for
    its batch, leaves that batch's playbook running for its batch-mate. The new attempt's server must not get a
    second playbook beside it: it waits for that batch to end, then runs in a batch of its own."""
    lock = threading.Lock()
    on_host: dict[str, int] = {}
    most: dict[str, int] = {}
    runs: list[list[str]] = []

    def run(names: list[str], stop: threading.Event) -> dict[str, str]:
        with lock:
            runs.append(names)
            for n in names:
                on_host[n] = on_host.get(n, 0) + 1
                most[n] = max(most.get(n, 0), on_host[n])
        stop.wait(0.6)  # the playbook's length (it is not told to stop: b still waits)
        with lock:
            for n in names:
                on_host[n] -= 1
        return {n: f"done {n} in {'+'.join(names)}" for n in names}

    async def main() -> tuple[str, str]:
        b = AnsibleBatcher(window_s=30, run=run)
        b.expect("a")
        b.expect("b")
        first = [asyncio.ensure_future(b.submit(n)) for n in ("a", "b")]
        await asyncio.sleep(0.1)
        first[0].cancel()  # a's old attempt given up
        again = await b.submit("a")  # a's new attempt reaches the step again
        return again, await first[1]

    t0 = time.monotonic()
    again, b_done = asyncio.run(main())
    assert runs == [["a", "b"], ["a"]], runs
    assert most == {"a": 1, "b": 1}, most  # never two playbooks on one host
    assert again == "done a in a" and b_done == "done b in a+b"
    assert 1.0 < time.monotonic() - t0 < 5  # the second batch ran after the first ended


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
