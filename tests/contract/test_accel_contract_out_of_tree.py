"""An accelerator driver written outside fleetctl runs the shipped contract, and the contract catches one that breaks it.

``ToyDriver`` stands for a third party's package: a made-up board kind
(``toy``) read through a made-up tool (``toy-smi``: one ``<index> <serial>
<temp C>`` line per board) and burnt in with ``toy-burn`` (``<index> OK|FAIL``
per board). Its recordings and its stand-in host are hand-made here (there is
no such tool). :class:`TestToyContract` is all such a package writes to run
the contract (``fleetctl_drivers.testing.accel``, imported from the installed
drivers distribution); the tests below it give the contract drivers that
break one rule each and show it fails them.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fleetctl_drivers.testing.accel import AccelContract, Answer, LocalHost, RecordedHost, Recording, StandIn

from fleetctl.hostio import HostOutputError
from fleetctl.interfaces.accel import (
    AccelBurnin,
    AccelDriver,
    AccelReading,
    BoardObservation,
    BoardReading,
    BurninContext,
    InvBoard,
    StageError,
)
from fleetctl.interfaces.host import BatchPart, HostSession

LISTING = "0 TOY-A 41.5\n1 TOY-B 44.0\n"


def parse_toy(text: str) -> list[tuple[int, str, float]]:
    """``toy-smi``'s lines; anything else raises ValueError."""
    out = []
    for line in text.splitlines():
        index, serial, temp = line.split()
        out.append((int(index), serial, float(temp)))
    return out


class ToyStages(AccelBurnin):
    def __init__(self, ctx: BurninContext) -> None:
        super().__init__(ctx)
        self.obs: dict[int, BoardObservation] = {}

    async def prechecks(self) -> list[BoardObservation]:
        job = self.ctx.job
        try:
            listed = {serial: i for i, serial, _ in parse_toy(await self.ctx.run("toy-smi", what="toy-smi"))}
        except ValueError as e:
            raise StageError(f"toy-smi: {e}") from e
        out = []
        for b in job.boards:
            i = listed.get(b.serial)
            o = BoardObservation(server=job.server, device=f"toy{i}" if i is not None else f"slot {b.slot}", kind=b.kind,
                                 serial=b.serial, present=i is not None)  # fmt: skip
            out.append(o)
            if i is not None:
                self.obs[i] = o
        return out

    async def workload(self) -> None:
        lines: list[str] = []
        await self.ctx.host.stream(self.ctx.in_session("toy-burn"), deadline=0, on_line=lambda s, ln: lines.append(ln))
        for ln in lines:
            i, verdict = ln.split()
            if int(i) in self.obs:
                self.obs[int(i)].workload_ok = verdict == "OK"

    async def postchecks(self) -> None:
        return None


class ToyDriver(AccelDriver):
    kinds = ("toy",)

    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        r = AccelReading(tool="toy-smi")
        try:
            done = await host.run("toy-smi", timeout=timeout, max_bytes=1 << 16)
            if done.exit_status != 0:
                raise RuntimeError(f"exited {done.exit_status}: {done.last_error_line()}")
            r.boards = [BoardReading(device=f"toy{i}", serial=s, temp_c=t) for i, s, t in parse_toy(done.stdout)]
        except Exception as e:  # noqa: BLE001 - a tool's failure is the reading's error, as the contract asks
            r.errors["toy-smi"] = f"{host.target.name}: {e}"
        return r

    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        return ToyStages(ctx)


def toy_host(name: str = "toy-01", listing: str = LISTING) -> RecordedHost:
    return RecordedHost(name, {r"toy-smi": listing, r"toy-burn": "0 OK\n1 OK\n", r"pgid": ""})


class TestToyContract(AccelContract):
    """All an out-of-tree package writes: its driver, its recordings, its stand-in host."""

    driver = ToyDriver()
    recordings = (Recording("two-boards", {r"toy-smi": LISTING}, boards=2), Recording("no-board", {r"toy-smi": ""}, boards=0))

    def standin(self, label: str, tmp_path: Path) -> StandIn | None:
        return StandIn(toy_host(), {}, [InvBoard("TOY-A", "toy", 0), InvBoard("TOY-B", "toy", 1)])


# --- drivers that break the contract, one rule each --------------------------------------------------------------


class RaisesOnGarbage(ToyDriver):
    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        done = await host.run("toy-smi", timeout=timeout)
        return AccelReading(boards=[BoardReading(device=f"toy{i}", serial=s, temp_c=t) for i, s, t in parse_toy(done.stdout)],
                            tool="toy-smi")  # fmt: skip


class Millidegrees(ToyDriver):
    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        r = await super().read(host, hostvars, timeout=timeout)
        for b in r.boards or []:
            b.temp_c = (b.temp_c or 0) * 1000  # the sysfs unit kept: 41500 "C"
        return r


class ForgetsAbsentBoards(ToyDriver):
    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        stages = ToyStages(ctx)
        listed = stages.prechecks

        async def only_listed() -> list[BoardObservation]:
            return [o for o in await listed() if o.present]  # an inventory board the host lacks, dropped unsaid

        stages.prechecks = only_listed  # type: ignore[method-assign]
        return stages


class ErrorNamesNoHost(ToyDriver):
    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        r = await super().read(host, hostvars, timeout=timeout)
        r.errors = {k: v.split(": ", 1)[-1] for k, v in r.errors.items()}
        return r


def contract_for(driver: AccelDriver) -> AccelContract:
    c = TestToyContract()
    c.drivers = lambda: {"toy": driver}  # type: ignore[method-assign]
    return c


@pytest.mark.parametrize("failure", ["garbage", "fails"])
def test_the_contract_fails_a_driver_that_raises_for_a_tool(failure: str) -> None:
    with pytest.raises((ValueError, AssertionError)):  # garbage: the driver's own ValueError; fails: nothing said of it
        contract_for(RaisesOnGarbage()).test_read_survives_a_failing_tool("toy", failure)
    contract_for(ToyDriver()).test_read_survives_a_failing_tool("toy", failure)  # the well-behaved one passes


def test_the_contract_fails_a_reading_out_of_physical_range(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"temperature \(C\): 41500.0 is not within -40..150"):
        contract_for(Millidegrees()).test_standin_read("toy", tmp_path)


def test_the_contract_fails_stages_that_drop_a_board_the_host_lacks(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="one observation per inventory board"):
        contract_for(ForgetsAbsentBoards()).test_standin_marks_a_missing_board("toy", tmp_path)


def test_the_contract_fails_an_error_that_does_not_name_the_host() -> None:
    with pytest.raises(AssertionError, match="does not name the host"):
        contract_for(ErrorNamesNoHost()).test_read_survives_a_failing_tool("toy", "fails")


def test_a_recorded_host_keeps_the_real_sessions_bounds() -> None:
    host = RecordedHost("b-01", {"big": "x" * 100, "slow": Answer(times_out=True)})
    with pytest.raises(HostOutputError, match="more than 10 bytes"):
        asyncio.run(host.run("big", timeout=1, max_bytes=10))
    with pytest.raises(HostOutputError, match="did not end") as ei:
        asyncio.run(host.run("slow", timeout=1))
    assert ei.value.timed_out
    with pytest.raises(ValueError, match="identifier"):  # as the real session: a batch part's name is an identifier
        asyncio.run(host.batch({"bad-pages": "x"}, timeout=1))
    assert asyncio.run(host.run("other", timeout=1)).exit_status == 127


def test_the_drivers_package_needs_pytest_only_for_its_contract_suites() -> None:
    """fleetctl_drivers and every driver in it import without pytest; the contract suites are what brings it."""
    code = ("import sys, importlib; sys.modules['pytest'] = None\n"
            "for m in ['fleetctl_drivers', 'fleetctl_drivers.accel.mncore', 'fleetctl_drivers.accel.nvidia', 'fleetctl_drivers.redfish',\n"
            "          'fleetctl_drivers.switch', 'fleetctl_drivers.snmp']:\n"
            "    importlib.import_module(m)\n"
            "try:\n    importlib.import_module('fleetctl_drivers.testing.accel')\n"
            "except ImportError:\n    print('testing needs pytest')\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "testing needs pytest"


def test_a_package_outside_the_repository_runs_the_contract(tmp_path: Path) -> None:
    """This module copied to a folder of its own (no conftest, no configuration of this repository): pytest collects
    the toy's contract from the installed drivers distribution and it passes."""
    (tmp_path / "test_toy_accel.py").write_text(Path(__file__).read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the package's own (empty) configuration, not this repository's
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
                           "-k", "TestToyContract", "test_toy_accel.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "12 passed" in done.stdout, done.stdout[-2000:]


def test_a_local_host_keeps_the_real_sessions_bounds() -> None:
    host = LocalHost("l-01")
    with pytest.raises(HostOutputError, match="more than 1000 bytes"):
        asyncio.run(host.run("yes | head -c 100000", timeout=30, max_bytes=1000))
    with pytest.raises(HostOutputError, match="did not end") as ei:
        asyncio.run(host.run("sleep 30", timeout=0.3))
    assert ei.value.timed_out
    # stderr is read to its end (kept up to its bound): a command printing much of it is not stopped by a full pipe
    done = asyncio.run(host.run("head -c 300000 /dev/zero | tr '\\0' e >&2; echo ok; exit 3", timeout=30))
    assert (done.stdout, done.exit_status, len(done.stderr)) == ("ok\n", 3, 64 << 10)
    lines: list[tuple[str, str]] = []
    status, hung = asyncio.run(host.stream("printf 'a\\rb\\nc'; echo oops >&2", deadline=time.monotonic() + 30,
                                           on_line=lambda s, ln: lines.append((s, ln))))  # fmt: skip
    assert (status, hung) == (0, False) and sorted(lines) == [("stderr", "oops"), ("stdout", "a"), ("stdout", "b"), ("stdout", "c")]
    assert asyncio.run(host.batch({"one": "echo 1", "two": "(echo 2; exit 4)"}, timeout=30)) == {
        "one": BatchPart("1\n", 0), "two": BatchPart("2\n", 4)}
