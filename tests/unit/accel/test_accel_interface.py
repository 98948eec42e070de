"""The accelerator interface: drivers found by board kind, the core's stage runner, and a core that names no driver.

The runner is driven here with a driver of a kind fleetctl does not know
(``testkind``) and a stand-in host session: what a third accelerator kind
gets from the core without a line of the core changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fleetctl import hostio, plugins
from fleetctl.burnin import host as burnin_host
from fleetctl.interfaces.accel import (
    AccelBurnin,
    AccelDriver,
    AccelReading,
    BoardObservation,
    BoardReading,
    BurninContext,
    BurninJob,
    InvBoard,
    NoopAccel,
    StageError,
)
from fleetctl.interfaces.host import HostRef, HostSession, HostTarget
from fleetctl.sweep import host as sweep_host

CORE = Path(__file__).resolve().parents[3] / "fleetctl"


def test_the_shipped_drivers_are_registered_by_the_board_kinds_they_serve() -> None:
    from fleetctl_drivers.accel.mncore import MnCoreDriver
    from fleetctl_drivers.accel.nvidia import NvidiaDriver

    assert {"gpu", "mncore", "mncore2"} <= set(plugins.driver_names("accel"))
    for kind in plugins.driver_names("accel"):
        driver = plugins.accel_driver(kind)
        assert isinstance(driver, AccelDriver)
        assert kind in driver.kinds  # an entry point's name is a kind its driver says it serves
    assert isinstance(plugins.accel_driver("mncore2"), MnCoreDriver)
    assert isinstance(plugins.accel_driver("gpu"), NvidiaDriver)


def test_a_board_kind_without_a_driver_is_refused_by_name() -> None:
    noop = plugins.accel_driver("tpu-v9")
    assert isinstance(noop, NoopAccel)
    with pytest.raises(StageError, match="no accelerator driver serves board kind 'tpu-v9'"):
        noop.burnin(None)  # type: ignore[arg-type]
    reading = asyncio.run(noop.read(None, {}, timeout=1))  # type: ignore[arg-type]
    assert "tpu-v9" in reading.errors["accelerators"]


def test_no_module_of_the_core_names_the_drivers_or_the_lab() -> None:
    hits = [f"{p.relative_to(CORE.parent)}:{n}" for p in sorted(CORE.rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"fleetctl_drivers|fleetctl_lab", line)]  # fmt: skip
    assert hits == []


# --- the core's stage runner, with a driver of a kind of its own ----------------------------------------------------


class _Output:
    def __init__(self, stdout: str = "") -> None:
        self.stdout, self.stderr, self.exit_status = stdout, "", 0

    def last_error_line(self, limit: int = 200) -> str:
        return ""


class _Session:
    """A host that answers every command with nothing, and records them."""

    def __init__(self, target: HostTarget) -> None:
        self.target = target
        self.commands: list[str] = []

    async def run(self, command: str, *, timeout: float, max_bytes: int = 0) -> _Output:
        self.commands.append(command)
        return _Output()

    async def stream(self, command: str, *, deadline: float, on_line: Any) -> tuple[int | None, bool]:
        self.commands.append(command)
        on_line("stdout", "board-0: 42.0 ops PASS")
        return 0, False


class _Stages(AccelBurnin):
    def __init__(self, ctx: BurninContext, calls: list[str], present: bool) -> None:
        super().__init__(ctx)
        self.calls, self.present = calls, present
        self.obs: list[BoardObservation] = []

    async def prechecks(self) -> list[BoardObservation]:
        self.calls.append("prechecks")
        job = self.ctx.job
        self.obs = [BoardObservation(server=job.server, device="board-0", kind=b.kind, serial=b.serial, present=self.present)
                    for b in job.boards]  # fmt: skip
        return self.obs

    async def prepare(self) -> None:
        self.calls.append("prepare")

    async def workload(self) -> None:
        self.calls.append("workload")
        lines: list[str] = []
        await self.ctx.host.stream(self.ctx.in_session("test-burn"), deadline=0, on_line=lambda s, ln: lines.append(ln))
        self.obs[0].throughput = float(lines[0].split()[1])

    async def postchecks(self) -> None:
        self.calls.append("postchecks")


class _Driver(AccelDriver):
    kinds = ("testkind",)

    def __init__(self, calls: list[str], present: bool = True, fail_in: str | None = None) -> None:
        self.calls, self.present, self.fail_in = calls, present, fail_in

    async def read(self, host: HostSession, hostvars: Mapping[str, Any], *, timeout: float) -> AccelReading:
        self.calls.append(f"read {host.target.name} {hostvars.get('tool')}")
        return AccelReading(boards=[BoardReading("board-0")], tool="test-smi", device_nodes=["/dev/t0"], errors={"tool": "why"})

    def burnin(self, ctx: BurninContext) -> AccelBurnin:
        stages = _Stages(ctx, self.calls, self.present)
        if self.fail_in:
            async def fail() -> None:
                raise StageError(f"{self.fail_in}: the tool said no")

            setattr(stages, self.fail_in, fail)
        return stages


@pytest.fixture
def fake_host(monkeypatch: pytest.MonkeyPatch) -> list[_Session]:
    opened: list[_Session] = []

    @contextlib.asynccontextmanager
    async def connect(target: HostTarget, *, timeout: float) -> AsyncIterator[_Session]:
        opened.append(_Session(target))
        yield opened[-1]

    monkeypatch.setattr(hostio, "connect", connect)
    return opened


def _job() -> BurninJob:
    return BurninJob(server="x-01", target=HostTarget(name="x-01", address="127.0.0.1"), hostvars={"fleetctl_burnin_dir": "/w"},
                     kind="x", boards=[InvBoard("S1", "testkind", 0)], model="m", seconds=1.0, board_kind="testkind")  # fmt: skip


def test_the_runner_runs_any_drivers_stages_in_order_after_the_cleanup(monkeypatch: pytest.MonkeyPatch,
                                                                         fake_host: list[_Session]) -> None:  # fmt: skip
    calls: list[str] = []
    monkeypatch.setattr(plugins, "accel_driver", lambda kind: _Driver(calls) if kind == "testkind" else NoopAccel(kind))
    out = asyncio.run(burnin_host.burn(_job()))
    assert out.error is None
    assert calls == ["prechecks", "prepare", "workload", "postchecks"]
    assert [o.throughput for o in out.observations] == [42.0]
    assert set(out.stages) == {"cleanup", "pre-checks", "reset", "workload", "post-checks"}
    (session,) = fake_host
    assert "/w/pgid" in session.commands[0]  # the leftover of a killed run is stopped first, in the job's folder
    assert "setsid" in session.commands[1] and "test-burn" in session.commands[1]  # the workload in a session of its own


def test_the_runner_stops_after_the_prechecks_when_no_board_is_there(monkeypatch: pytest.MonkeyPatch,
                                                                     fake_host: list[_Session]) -> None:  # fmt: skip
    calls: list[str] = []
    monkeypatch.setattr(plugins, "accel_driver", lambda kind: _Driver(calls, present=False))
    out = asyncio.run(burnin_host.burn(_job()))
    assert out.error is None and calls == ["prechecks"]
    assert [o.present for o in out.observations] == [False]  # judged missing by the verdict, not an error


@pytest.mark.parametrize("stage", ["prepare", "workload", "postchecks"])
def test_a_stage_that_cannot_go_on_is_the_servers_error(monkeypatch: pytest.MonkeyPatch, fake_host: list[_Session],
                                                        stage: str) -> None:  # fmt: skip
    monkeypatch.setattr(plugins, "accel_driver", lambda kind: _Driver([], fail_in=stage))
    out = asyncio.run(burnin_host.burn(_job()))
    assert out.error == f"{stage}: the tool said no"


def test_the_sweep_reads_a_host_through_its_kinds_driver(monkeypatch: pytest.MonkeyPatch, fake_host: list[_Session]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(plugins, "accel_driver", lambda kind: _Driver(calls))
    ref = HostRef(HostTarget(name="x-01", address="127.0.0.1"), {"tool": "/opt/tool"}, "testkind")
    (r,) = asyncio.run(sweep_host.read_hosts({"x-01": ref})).values()
    assert calls == ["read x-01 /opt/tool"]
    assert (r.error, [b.device for b in r.boards or []], r.tool, r.device_nodes, r.errors) == (
        None, ["board-0"], "test-smi", ["/dev/t0"], {"tool": "why"})  # fmt: skip
    no_boards = asyncio.run(sweep_host.read_host(HostRef(ref.target, {}, None)))
    assert calls == ["read x-01 /opt/tool"] and no_boards.error is None  # a server without boards: reached, nothing read


def test_the_mncore_sweep_read_uses_the_sites_mncore_facts_as_burnin_does(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from fleetctl_drivers.accel.mncore import MnCoreDriver

    site = tmp_path / "mncore.yaml"
    site.write_text("smi: /opt/site/bin/gpfn3-smi\ndevice_dir: /srv/dev\n")
    monkeypatch.setenv("FLEETCTL_MNCORE_CONFIG", str(site))
    session = _Session(HostTarget(name="mn-01", address="127.0.0.1"))
    asyncio.run(MnCoreDriver().read(session, {}, timeout=5))  # type: ignore[arg-type]
    assert any(c.startswith("/opt/site/bin/gpfn3-smi list") for c in session.commands), session.commands
    assert any("/srv/dev/mnc2p*" in c for c in session.commands), session.commands
