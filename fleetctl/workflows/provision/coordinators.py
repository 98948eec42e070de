"""What the servers of one provisioning run share, each behind a small coordinator.

- :class:`PowerGate`: a rack's power budget and the stagger between two starts (kept in the store,
  shared with every other process working the rack);
- :class:`SwitchBatcher`: the port moves for one switch that arrive together
  share its SSH sessions (a rack's servers reach the VLAN steps at about the
  same time);
- :class:`AnsibleBatcher`: one ansible-playbook run per batch of servers that
  reached the ``ansible`` step together.

They run in the workflow's event loop; what blocks (a switch's CLI, an
ansible-runner run) runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fleetctl.errors import FleetError
from fleetctl.lifecycle.rack_power import OverBudget
from fleetctl.workflows.provision.model import StepFailed

if TYPE_CHECKING:
    from fleetctl.lifecycle.rack_power import RackPower


class PowerGate:
    """Admit power-ons: within each rack's budget, ``stagger_s`` apart, across every process working the rack.

    The admissions are the store's (:class:`~fleetctl.lifecycle.rack_power.RackPower`),
    so a second operator's run or another Temporal worker of the site counts
    this run's power-ons and takes its starts after them. A server already
    drawing power (found on) adds nothing when it is cycled, but its restart
    still takes a stagger slot (inrush). A server that does not fit is refused
    at once with the figures. Without a ledger (a run that powers nothing on),
    admitting is a mistake.
    """

    def __init__(self, ledger: RackPower | None = None) -> None:
        self.ledger = ledger

    async def admit(self, rack: str, server: str, peak_w: int, *, already_drawing: bool) -> int:
        """Wait for this server's slot; return the rack's counted draw with it."""
        if self.ledger is None:
            raise FleetError("no power ledger: this run was not set up to power servers on")
        try:
            return (await self.ledger.take_turn(rack, server, peak_w, already_drawing=already_drawing)).draw_w
        except OverBudget as e:
            raise StepFailed(str(e)) from None


class SwitchBatcher:
    """Port moves per switch, coalesced: what arrives within a window shares one SSH session."""

    def __init__(self, switches: dict[str, Any], window_s: float, *, protected: dict[str, set[str]], sessions: int = 8) -> None:
        self.switches = switches  # name -> SwitchRef
        self.window_s = window_s
        self.protected = protected
        self.sessions = sessions  # SSH sessions per switch at once
        self.pending: dict[str, list[tuple[str, Any, bool, asyncio.Future[Any]]]] = {}
        self.flushers: dict[str, asyncio.Task[None]] = {}
        self.sessions_opened = 0
        self.work_s: dict[tuple[str, str], float] = {}  # the last change's own seconds, per port

    async def change(self, switch: str, port: str, wanted: Any, *, force: bool) -> Any:
        """Apply one port change (read, diff, apply, read back, verify, roll back); the PortChange."""
        if switch not in self.switches:
            raise StepFailed(f"switch {switch} is not in the inventory")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.setdefault(switch, []).append((port, wanted, force, fut))
        if switch not in self.flushers or self.flushers[switch].done():
            self.flushers[switch] = asyncio.create_task(self._flush(switch))
        return await fut

    async def _flush(self, switch: str) -> None:
        await asyncio.sleep(self.window_s)
        while self.pending.get(switch):
            work, self.pending[switch] = self.pending[switch], []
            try:
                results = await asyncio.to_thread(self._apply, switch, [(p, w, f) for p, w, f, _ in work])
            except Exception as e:  # noqa: BLE001 - every waiter gets the reason
                for *_, fut in work:
                    if not fut.done():
                        fut.set_exception(e if isinstance(e, FleetError) else StepFailed(f"{switch}: {e}"))
                continue
            for (_, _, _, fut), res in zip(work, results, strict=True):
                if fut.done():
                    continue
                if isinstance(res, Exception):
                    fut.set_exception(res)
                else:
                    fut.set_result(res)

    def _apply(self, switch: str, work: list[tuple[str, Any, bool]]) -> list[Any]:
        """Apply the ports' changes over up to ``sessions`` SSH sessions to the switch at once.

        A port change waits on the switch's CLI far more than it computes
        (read, configure, read back), so a rack's 40 ports go through several
        sessions side by side; each session takes the next port still to do.
        Switches allow several management sessions (SONiC's sshd 10, EOS more).
        """
        import threading

        from fleetctl.plugins import driver_for
        from fleetctl.targets import switch_targets

        targets, unreachable = switch_targets([self.switches[switch]])
        if not targets:
            raise StepFailed(f"{switch}: {unreachable.get(switch, 'unreachable')}")
        protected = self.protected.get(switch, set())
        queue = list(enumerate(work))
        results: list[Any] = [None] * len(work)
        lock = threading.Lock()

        def op(sw: Any) -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    i, (port, wanted, force) = queue.pop(0)
                t0 = time.monotonic()
                try:
                    results[i] = sw.apply_port_change(port, wanted, protected=protected, force=force)
                except FleetError as e:  # one refused port does not stop the others
                    results[i] = StepFailed(f"{switch} {port}: {e}")
                self.work_s[(switch, port)] = time.monotonic() - t0

        k = max(1, min(self.sessions, len(work)))
        self.sessions_opened += k
        # The switch's own driver (its hardware model names it), k sessions to the same switch.
        outcomes = driver_for("switch", targets[0]).sweep(targets * k, op, concurrency=k)
        errors = [o.error for o in outcomes if not o.ok]
        return [r if r is not None else StepFailed(f"{switch}: {errors[0] if errors else 'not done'}") for r in results]


class AnsibleBatcher:
    """Servers reaching step 9 together share one ansible-playbook run.

    A batch starts when every server still working has reached the step
    (nobody else is coming), or ``window_s`` after its first server arrived.
    Servers arriving while a batch runs form the next one; batches may run
    side by side.
    """

    def __init__(self, window_s: float, run: Callable[[list[str], threading.Event], Any]) -> None:
        self.window_s = window_s
        self.run = run  # blocking: (names, stop event) -> {name: HostOutcome}
        self.expected: set[str] = set()  # servers that may still arrive
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self.timer: asyncio.Task[None] | None = None
        self.batches: list[list[str]] = []
        self.started: dict[str, float] = {}  # when each server's batch started
        self.running: set[asyncio.Task[None]] = set()
        self.playing: dict[str, asyncio.Task[None]] = {}  # the batch whose playbook runs on each server now

    def expect(self, name: str) -> None:
        self.expected.add(name)

    def gone(self, name: str) -> None:
        """A server that will not arrive (failed, or step 9 already done)."""
        self.expected.discard(name)
        self._maybe_now()

    async def submit(self, name: str) -> Any:
        self.expected.discard(name)
        earlier = self.playing.get(name)
        if earlier is not None and not earlier.done():
            # A playbook still runs on this server, from a batch an earlier attempt of its step joined (a unit Temporal
            # gave up and started again, whose old attempt was cancelled while its batch-mates kept the playbook
            # going): never two on one host at once. The others' batch does not wait for it; it joins a later one.
            self._maybe_now()
            await asyncio.wait({earlier})
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[name] = fut
        if self.timer is None or self.timer.done():
            self.timer = asyncio.create_task(self._after_window())
        self._maybe_now()
        return await fut

    def _maybe_now(self) -> None:
        if self.pending and not self.expected:
            self._start()

    async def _after_window(self) -> None:
        await asyncio.sleep(self.window_s)
        if self.pending:
            self._start()

    def _start(self) -> None:
        batch, self.pending = self.pending, {}
        now = time.monotonic()
        self.started.update(dict.fromkeys(batch, now))
        if self.timer is not None and not self.timer.done() and self.timer is not asyncio.current_task():
            self.timer.cancel()
        self.timer = None
        self.batches.append(sorted(batch))
        task = asyncio.create_task(self._run(batch))
        self.running.add(task)
        task.add_done_callback(self.running.discard)
        for name in batch:
            self.playing[name] = task
        task.add_done_callback(self._played)

    def _played(self, task: asyncio.Task[None]) -> None:
        for name in [n for n, t in self.playing.items() if t is task]:
            del self.playing[name]

    async def _run(self, batch: dict[str, asyncio.Future[Any]]) -> None:
        # Stopping the playbook: once every server of the batch stopped waiting for it (their steps cancelled on a
        # Temporal worker by `jobs cancel`), or this task is cancelled (Ctrl-C, SIGTERM in process, whose asyncio.run
        # would otherwise wait for the thread, and so for the whole playbook, before the run could close).
        stop = threading.Event()

        def on_done(_: asyncio.Future[Any]) -> None:
            if all(f.cancelled() for f in batch.values()):
                stop.set()

        for fut in batch.values():
            fut.add_done_callback(on_done)
        try:
            results = await asyncio.to_thread(self.run, sorted(batch), stop)
        except asyncio.CancelledError:
            stop.set()
            raise
        except Exception as e:  # noqa: BLE001 - every host of the batch gets the reason
            for fut in batch.values():
                if not fut.done():
                    fut.set_exception(e if isinstance(e, FleetError) else StepFailed(f"ansible run failed: {e}"))
            return
        for name, fut in batch.items():
            if not fut.done():
                fut.set_result(results.get(name))

