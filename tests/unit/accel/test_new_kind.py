"""A board kind no part of fleetctl/ knows, registered at run time, is swept, judged and burned in.

The driver below (a made-up "npu" with its own tool, device nodes, kernel events
and default criteria) is what a third party would ship: it is found through the
``fleetctl.accel`` entry points (added here at run time), and the core reads
its boards, judges them by the criteria the driver ships, lets ``burnin --kind``
select it and runs its stages, with no edit anywhere in fleetctl/.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from fleetctl import hostio, plugins
from fleetctl.burnin import criteria as crit
from fleetctl.burnin import host as burnin_host
from fleetctl.burnin.verdict import evaluate
from fleetctl.errors import InputError
from fleetctl.interfaces.accel import (
    AccelBurnin,
    AccelDriver,
    AccelReading,
    BoardEvent,
    BoardObservation,
    BoardReading,
    BurninContext,
    BurninJob,
    InvBoard,
)
from fleetctl.interfaces.host import HostRef, HostSession, HostTarget
from fleetctl.sweep import host as sweep_host
from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.engine import _evaluate

KIND = "npu-x1"

#: The driver's default criteria, in the criteria file's shape (what it would ship as npu.criteria.yaml).
NPU_CRITERIA: dict[str, Any] = {
    "levels": {KIND: {"quick": {"seconds": 5}, "standard": {"seconds": 50}, "extended": {"seconds": 500}}},
    "kinds": {KIND: {"golden_throughput": 100.0, "unit": "TOPS", "temp_warn_c": 70, "temp_max_c": 90, "retired_pages_fail": 10,
                     "uncorrected_errors_fail": 1}},  # no severity map: the rules' defaults (temperature by its limits ...)
    "models": {"npu-box": {"golden_throughput": 120.0}},
}  # fmt: skip


class _Output:
    def __init__(self, stdout: str = "") -> None:
        self.stdout, self.stderr, self.exit_status = stdout, "", 0

    def last_error_line(self, limit: int = 200) -> str:
        return ""


class _Session:
    """A host that answers every command with nothing; its workload prints one result line per board."""

    def __init__(self, target: HostTarget) -> None:
        self.target = target
        self.commands: list[str] = []

    async def run(self, command: str, *, timeout: float, max_bytes: int = 0) -> _Output:
        self.commands.append(command)
        return _Output()

    async def stream(self, command: str, *, deadline: float, on_line: Any) -> tuple[int | None, bool]:
        self.commands.append(command)
        on_line("stdout", "npu0 55.0")
        on_line("stdout", "npu1 118.0")
        return 0, False


class _NpuStages(AccelBurnin):
    async def prechecks(self) -> list[BoardObservation]:
        job = self.ctx.job
        self.obs = [BoardObservation(server=job.server, device=f"npu{b.slot}", kind=b.kind, serial=b.serial, slot=b.slot,
                                     model=job.model) for b in job.boards]  # fmt: skip
        return self.obs

    async def workload(self) -> None:
        got: dict[str, float] = {}
        await self.ctx.host.stream(self.ctx.in_session("npu-burn"), deadline=0,
                                   on_line=lambda s, ln: got.__setitem__(ln.split()[0], float(ln.split()[1])))  # fmt: skip
        for o in self.obs:
            o.throughput = got.get(o.device)
            o.telemetry = [{"t": 1.0, "temp_c": 72.0 if o.device == "npu1" else 60.0, "source": "host"}]

    async def postchecks(self) -> None:
        self.obs[1].events.append(BoardEvent(code=7, message="npu RAS 7: HBM uncorrectable", where="npu1", critical=True))


class _NpuDriver(AccelDriver):
    kinds = (KIND,)

    def criteria(self) -> Mapping[str, Any]:
        return NPU_CRITERIA

    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        return AccelReading(
            boards=[BoardReading("npu0", serial="N0", temp_c=75.0, retired_pages=3, link_gen=4, link_gen_max=4, link_width=16,
                                 link_width_max=16),
                    BoardReading("npu1", serial="N1", temp_c=40.0, retired_pages=12, ecc_uncorrected=0, link_gen=4,
                                 link_gen_max=4, link_width=8, link_width_max=16)],
            tool="npu-smi", device_nodes=["/dev/npu0"],
            events=[BoardEvent(code=7, message="npu RAS 7: HBM uncorrectable", where="0000:05:00.0", critical=True),
                    BoardEvent(code=2, message="npu RAS 2: link retrained", where="0000:06:00.0", critical=False)])  # fmt: skip

    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        return _NpuStages(ctx)


class _EntryPoint:
    """What ``importlib.metadata`` gives for ``npu-x1 = "thirdparty.npu:NpuDriver"`` in ``fleetctl.accel``."""

    name, value = KIND, "thirdparty.npu:NpuDriver"

    def load(self) -> type[AccelDriver]:
        return _NpuDriver


@pytest.fixture
def npu_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    real = plugins._entry_points

    def with_npu(kind: str) -> dict[str, Any]:
        found = real(kind)
        return dict(sorted({**found, KIND: _EntryPoint()}.items())) if kind == "accel" else found

    monkeypatch.setattr(plugins, "_entry_points", with_npu)
    monkeypatch.setattr(crit, "_loaded", {})  # the criteria in force are read again, with the new driver's
    monkeypatch.delenv(crit.ENV, raising=False)


@pytest.fixture
def fake_host(monkeypatch: pytest.MonkeyPatch) -> list[_Session]:
    opened: list[_Session] = []

    @contextlib.asynccontextmanager
    async def connect(target: HostTarget, *, timeout: float) -> AsyncIterator[_Session]:
        opened.append(_Session(target))
        yield opened[-1]

    monkeypatch.setattr(hostio, "connect", connect)
    return opened


def test_a_new_kind_is_swept_and_judged_by_its_drivers_criteria(npu_registered: None, fake_host: list[_Session]) -> None:
    ref = HostRef(HostTarget(name="npu-01", address="127.0.0.1"), {}, KIND)
    (h,) = asyncio.run(sweep_host.read_hosts({"npu-01": ref})).values()
    e = ServerExpect("npu-01", "S", "npu-box", "site", "rack", 1, board_kind=KIND, board_count=3)
    got = {(f.check, f.subject, f.status.value) for f in _evaluate("server", "npu-01", ServerReading(host=h), e, "host")}
    assert got == {
        ("accel.host_boards", "npu-smi", "critical"),  # 2 of 3 boards listed, named by the driver's tool
        ("accel.host_boards", "device nodes", "critical"),  # 1 of 3 device nodes: the check any driver reporting nodes gets
        ("gpu.memory", "npu1", "critical"),  # 12 retired pages: the driver's retired_pages_fail is 10
        ("gpu.temperature", "npu0", "warning"),  # 75 C: the driver's temp_warn_c is 70 (85 for GPUs)
        ("gpu.pcie", "npu1", "critical"),  # x8 of x16
        ("gpu.xid", "0000:05:00.0", "critical"),  # the driver calls event 7 critical ...
        ("gpu.xid", "0000:06:00.0", "warning"),  # ... and event 2 not
    }
    messages = " | ".join(f.message for f in _evaluate("server", "npu-01", ServerReading(host=h), e, "host"))
    assert "npu-smi lists 2 of 3 boards" in messages and "12 retired memory pages (fails at 10)" in messages


def test_a_new_kind_is_burned_in_through_the_stage_runner(npu_registered: None, fake_host: list[_Session]) -> None:
    assert KIND in crit.board_kinds() and crit.burnin_kind(KIND) == KIND  # burnin --kind npu-x1
    assert crit.burnin_workload(KIND) == KIND  # its runs are stored under its own name
    criteria = crit.load()
    assert criteria.level(KIND, "quick").seconds == 5  # the levels the driver ships
    job = BurninJob(server="npu-01", target=HostTarget(name="npu-01", address="127.0.0.1"), hostvars={}, kind=KIND,
                    boards=[InvBoard("N0", KIND, 0), InvBoard("N1", KIND, 1)], model="npu-box", seconds=5.0, board_kind=KIND)  # fmt: skip
    out = asyncio.run(burnin_host.burn(job))
    assert out.error is None
    verdicts = {o.device: evaluate(o, criteria.for_board(KIND, "npu-box")) for o in out.observations}
    assert verdicts["npu0"].verdict == "fail"  # 55 of the model's golden 120 TOPS: below the 0.6 fail fraction
    assert verdicts["npu0"].metrics["throughput_fraction"] == round(55 / 120, 3)
    assert verdicts["npu1"].verdict == "fail"  # its critical event
    assert {r.criterion for r in verdicts["npu1"].reasons} == {"xid", "temperature"}  # 72 C: degraded by the driver's 70 C


def test_a_sites_copy_overrides_a_new_kinds_defaults(npu_registered: None, tmp_path: Any) -> None:
    f = tmp_path / "site.yaml"
    f.write_text(f"levels:\n  {KIND}:\n    quick: {{seconds: 9}}\nkinds:\n  {KIND}:\n    temp_warn_c: 80\n")
    c = crit.load(f)
    assert c.level(KIND, "quick").seconds == 9 and c.level(KIND, "standard").seconds == 50  # key by key
    assert (c.for_board(KIND, None).temp_warn_c, c.for_board(KIND, None).retired_pages_fail) == (80, 10)
    assert c.for_board("gpu", None).retired_pages_fail == 63  # the other kinds keep their drivers' defaults


def test_burnin_kind_names_the_known_kinds_for_one_it_does_not_know(npu_registered: None) -> None:
    with pytest.raises(InputError) as e:
        crit.burnin_kind("tpu")
    (line,) = str(e.value).splitlines()
    assert line.endswith(f"'tpu' is not a board kind: use {', '.join(sorted(['gpu', 'mncore2', KIND, *_others()]))}")


def _others() -> list[str]:
    """Kinds other installed drivers give a burn-in (helpers may add some), so the message is checked whole."""
    return [k for k in crit.burnable_kinds() if k not in ("gpu", "mncore2", KIND)]


class _BrokenEntryPoint:
    name, value = "npu-broken", "thirdparty.missing:Driver"

    def load(self) -> type[AccelDriver]:
        raise ModuleNotFoundError("No module named 'thirdparty.missing'")


def test_a_driver_that_cannot_be_loaded_costs_only_its_own_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    real = plugins._entry_points
    monkeypatch.setattr(plugins, "_entry_points",
                        lambda kind: {**real(kind), "npu-broken": _BrokenEntryPoint()} if kind == "accel" else real(kind))  # fmt: skip
    monkeypatch.delenv(crit.ENV, raising=False)
    assert crit.burnin_kind("gpu") == "gpu" and crit.load().level("gpu", "quick").seconds == 60  # the others burn in as before
    with pytest.raises(InputError, match=r"npu-broken: its accelerator driver cannot be loaded \(ModuleNotFoundError: No module"):
        crit.burnin_kind("npu-broken")


def test_a_site_file_may_name_a_new_kind_once_its_driver_is_registered(npu_registered: None) -> None:
    from pydantic import ValidationError

    from fleetctl.interfaces.bmc import Board
    from fleetctl.inventory.schema import BoardsSpec

    assert BoardsSpec(kind=KIND, count=8).kind == KIND  # a hardware model's boards: kind npu-x1
    assert Board(kind=KIND, serial="N0").kind == KIND  # as the BMC driver's board rules may name it
    with pytest.raises(ValidationError, match=rf"'tpu' is not a board kind \(the board kinds: mncore2, mncore, gpu, .*{KIND}"):
        BoardsSpec(kind="tpu", count=8)
