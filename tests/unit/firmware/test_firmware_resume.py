"""The campaign resuming what a killed run left in the journal, against a fake BMC that records every request.

The journal and the store are real (SQLite, the example inventory); the BMC
is a fake whose tasks and versions each test sets, so each way a run can
die (a task in flight, a task that failed meanwhile, a request that never
took effect, a reset already sent) is checked for what is flashed and what
is powered: never twice, never blindly.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import select, text

from fleetctl.errors import BMCError
from fleetctl.interfaces.bmc import FirmwareComponent, PowerState, TaskResult, UpdateServiceInfo
from fleetctl.workflows.firmware_campaign import KIND, PREFIX, Campaign, CampaignOptions
from fleetctl.workflows.journal import AsyncJournal, Journal

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
NAME = "mn-tyo1-r12-01"


@dataclass
class FakeFirmware:
    versions: dict[str, str]
    tasks: dict[str, Any] = field(default_factory=dict)  # uri -> TaskResult, or an exception to raise
    running: list[TaskResult] = field(default_factory=list)
    started: list[tuple[str, list[str] | None, str | None]] = field(default_factory=list)
    staged: dict[str, str] = field(default_factory=dict)

    async def inventory(self) -> list[FirmwareComponent]:
        return [FirmwareComponent(id=k, name=k, version=v, uri=f"/redfish/v1/UpdateService/FirmwareInventory/{k}")
                for k, v in self.versions.items()]  # fmt: skip

    async def update_service_info(self) -> UpdateServiceInfo:
        return UpdateServiceInfo(simple_update=True, simple_update_apply_times=["Immediate", "OnReset"])

    async def running_updates(self) -> list[TaskResult]:
        out, self.running = self.running, []  # running once, then done
        return out

    async def start_simple_update(self, image: str, *, targets: list[str] | None = None, apply_time: str | None = None) -> str:
        self.started.append((image, targets, apply_time))
        comp = (targets or [""])[0].rsplit("/", 1)[-1]
        version = image.rsplit("-", 1)[-1].removesuffix(".bin")
        if apply_time == "OnReset":
            self.staged[comp] = version
        else:
            self.versions[comp] = version
        uri = f"/redfish/v1/TaskService/Tasks/{len(self.started)}"
        self.tasks[uri] = TaskResult(state="Completed", task_uri=uri)
        return uri

    async def follow_task(self, task_uri: str | None, **_: Any) -> TaskResult:
        t = self.tasks[task_uri or ""]
        if isinstance(t, Exception):
            raise t
        return t


@dataclass
class FakePower:
    fw: FakeFirmware
    state_now: PowerState = PowerState.ON
    actions: list[str] = field(default_factory=list)

    async def state(self) -> PowerState:
        return self.state_now

    async def restart(self, *, force: bool = True) -> None:
        self.actions.append("restart")
        self.fw.versions.update(self.fw.staged)
        self.fw.staged.clear()

    async def on(self) -> bool:
        self.actions.append("on")
        self.fw.versions.update(self.fw.staged)
        self.fw.staged.clear()
        return True

    async def off(self, *, force: bool = False) -> bool:
        self.actions.append("off")
        return True

    async def wait_for(self, wanted: PowerState, **_: Any) -> PowerState:
        return wanted


@dataclass
class FakeTarget:
    name: str


class FakeBMC:
    def __init__(self, versions: dict[str, str]) -> None:
        self.target = FakeTarget(NAME)
        self.firmware = FakeFirmware(dict(versions))
        self.power = FakePower(self.firmware)


@pytest.fixture
def store(example_loaded: str) -> Any:
    from fleetctl.store import get_engine
    from fleetctl.store import tables as T

    engine = get_engine()
    with engine.connect() as c:
        sid = c.execute(select(T.server.c.id).where(T.server.c.name == NAME)).scalar_one()
    return engine, sid


WANT = {NAME: {"BMC": "2.14.0", "BIOS": "1.9.0", "mncore2-board": "1.0.0"}}
OPTS = CampaignOptions(template="{base}/{id}-{version}.bin", base="http://img", poll=0.01)


def _killed_run(engine: Any, sid: int, steps: dict[str, dict[str, Any]]) -> None:
    """What a run killed mid-way leaves: a pass, and steps left running with what they noted."""
    j = Journal.open(engine, kind=KIND, target=NAME, args={}, actor="test", prefix=PREFIX)
    j.begin_pass(sid, {"job": j.job_id})
    for name, noted in steps.items():
        j.note(j.start_step(sid, name), noted)


def _resume(engine: Any, sid: int, bmc: FakeBMC, opts: CampaignOptions = OPTS) -> tuple[Campaign, Exception | None]:
    j = AsyncJournal(Journal.open(engine, kind=KIND, target=NAME, args={}, actor="test", prefix=PREFIX))
    campaign = Campaign(engine, j, opts, WANT, {NAME: sid}, actor="test")
    err = None
    try:
        asyncio.run(campaign.op(bmc))
    except BMCError as e:
        err = e
    finally:
        j.close()
    return campaign, err


def _steps(engine: Any, sid: int) -> list[tuple[str, str]]:
    with engine.connect() as c:
        return [tuple(r) for r in c.execute(text("SELECT name, state FROM job_step WHERE server_id = :s AND name != 'firmware.begin' "
                                                 "ORDER BY id"), {"s": sid})]  # fmt: skip


def _events(engine: Any, action: str) -> list[str]:
    with engine.connect() as c:
        return [r[0] for r in c.execute(text("SELECT detail FROM event WHERE action = :a ORDER BY id"), {"a": action})]


def test_a_task_in_flight_that_completed_is_not_flashed_again(store: Any) -> None:
    engine, sid = store
    _killed_run(engine, sid, {"flash.BIOS": {"phase": "task", "task": "/t/7", "before": "1.8.2", "to": "1.9.0", "key": "BIOS",
                                             "method": "SimpleUpdate"}})  # fmt: skip
    bmc = FakeBMC({"BMC": "2.14.0", "BIOS": "1.8.2"})
    bmc.firmware.tasks["/t/7"] = TaskResult(state="Completed")  # followed to its end (the fake: already there)
    bmc.firmware.versions["BIOS"] = "1.9.0"  # what the task did meanwhile in the BMC
    campaign, err = _resume(engine, sid, bmc)
    assert err is None and bmc.firmware.started == []
    [f] = campaign.results[NAME].flashes
    assert f.state == "updated" and f.resumed and "not flashed again" in (f.message or "")
    assert ("firmware.flash.BIOS", "succeeded") in _steps(engine, sid)
    assert ("firmware.flash.BIOS", "running") not in _steps(engine, sid)
    [event] = _events(engine, "firmware.update")
    assert event == "BIOS 1.8.2 -> 1.9.0 (baseline 1.9.0; job 2; SimpleUpdate, resumed after an interruption)"


def test_a_task_that_failed_meanwhile_fails_the_board_without_a_new_flash(store: Any) -> None:
    engine, sid = store
    board = "mncore2_slot2_mncore2-board"
    _killed_run(engine, sid, {f"flash.{board}": {"phase": "task", "task": "/t/3", "before": "0.9.7", "to": "1.0.0"}})
    bmc = FakeBMC({"BIOS": "1.9.0", board: "0.9.7"})
    bmc.firmware.tasks["/t/3"] = BMCError("task /t/3 ended Exception: Installing mncore2-board 1.0.0 failed.")
    campaign, err = _resume(engine, sid, bmc)
    assert err is not None and bmc.firmware.started == []
    [f] = campaign.results[NAME].flashes
    assert f.state == "failed" and "Installing mncore2-board 1.0.0 failed" in (f.message or "")
    with engine.connect() as c:
        state = c.execute(text("SELECT b.state FROM accelerator_board b JOIN server s ON s.id = b.server_id "
                               "WHERE s.name = :n AND b.slot = 2"), {"n": NAME}).scalar_one()  # fmt: skip
        server_state = c.execute(text("SELECT state FROM server WHERE name = :n"), {"n": NAME}).scalar_one()
    assert state == "failed"
    # The example server is registered: the table has no way to maintenance from there; the history says so.
    assert server_state == "registered"
    assert any("server stays registered" in d for d in _events(engine, "firmware.failed"))
    assert any('"after": "0.9.7"' in d and '"before": "0.9.7"' in d for d in _events(engine, "firmware.failed"))


def test_a_request_that_never_took_effect_is_flashed_once_after_looking(store: Any) -> None:
    engine, sid = store
    _killed_run(engine, sid, {"flash.BIOS": {"phase": "starting", "before": "1.8.2", "to": "1.9.0"}})  # killed before the task was named
    bmc = FakeBMC({"BIOS": "1.8.2"})
    bmc.firmware.running = [TaskResult(state="Running", task_uri="/t/other")]  # something ran: waited for first
    campaign, err = _resume(engine, sid, bmc)
    assert err is None
    assert bmc.firmware.started == [("http://img/BIOS-1.9.0.bin", ["/redfish/v1/UpdateService/FirmwareInventory/BIOS"], None)]
    assert [f.state for f in campaign.results[NAME].flashes] == ["updated"]
    assert _steps(engine, sid) == [("firmware.flash.BIOS", "failed"), ("firmware.flash.BIOS", "succeeded")]


def test_a_sent_reset_is_not_sent_again_and_staged_components_are_read_back(store: Any) -> None:
    engine, sid = store
    _killed_run(engine, sid, {
        "flash.BIOS": {"phase": "staged", "task": "/t/1", "before": "1.8.2", "to": "1.9.0", "apply_time": "OnReset",
                       "method": "SimpleUpdate"},
        "reset": {"phase": "resetting", "power_before": "on", "action": "restart", "sent": True},
    })  # fmt: skip
    bmc = FakeBMC({"BIOS": "1.8.2"})
    bmc.firmware.tasks["/t/1"] = TaskResult(state="Completed")
    bmc.firmware.staged = {"BIOS": "1.9.0"}
    bmc.firmware.versions["BIOS"] = "1.8.2"

    async def boots_later(wanted: PowerState, **_: Any) -> PowerState:
        bmc.firmware.versions.update(bmc.firmware.staged)  # the reset sent before the kill boots the server now
        return wanted

    bmc.power.wait_for = boots_later  # type: ignore[method-assign]
    campaign, err = _resume(engine, sid, bmc, CampaignOptions(template=OPTS.template, base=OPTS.base, apply_time="on-reset", poll=0.01))
    assert err is None
    assert bmc.power.actions == [] and bmc.firmware.started == []  # no second reset, no second flash
    assert [(f.id, f.state, f.after) for f in campaign.results[NAME].flashes] == [("BIOS", "updated", "1.9.0")]
    assert ("firmware.reset", "succeeded") in _steps(engine, sid)


def test_staging_then_one_restart_of_a_server_that_is_on(store: Any) -> None:
    engine, sid = store
    bmc = FakeBMC({"BIOS": "1.8.2", "mncore2_slot0_mncore2-board": "0.9.7", "mncore2_slot1_mncore2-board": "0.9.7"})
    campaign, err = _resume(engine, sid, bmc, CampaignOptions(template=OPTS.template, base=OPTS.base, apply_time="on-reset", poll=0.01))
    assert err is None
    assert [a for _, _, a in bmc.firmware.started] == ["OnReset"] * 3
    assert bmc.power.actions == ["restart"]  # one reset for the three, and no power-off: it was on
    assert {f.state for f in campaign.results[NAME].flashes} == {"updated"}
    assert len(_events(engine, "firmware.update")) == 3 and all("staged OnReset" in d for d in _events(engine, "firmware.update"))
