"""The campaign's rules without a BMC: version order, compliance, the failure threshold, the window, the waves."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fleetctl.errors import InputError
from fleetctl.interfaces.bmc import FirmwareComponent
from fleetctl.workflows.describe import Context, Opened, Unit, run_local
from fleetctl.workflows.firmware_campaign import WINDOW_REASON, CampaignOptions, plan, redact
from fleetctl.workflows.firmware_described import (
    FirmwareCampaignWorkflow,
    FirmwareKept,
    FirmwareRequest,
    FirmwareRunData,
    FirmwareTally,
    ServerDone,
    ServerWork,
    failed_count,
    report_of,
    unit_limit,
)
from fleetctl.workflows.firmware_policy import Threshold, Window, board_slot, classify, compare_versions, compliance


@pytest.mark.parametrize(
    ("current", "wanted", "order"),
    [
        ("1.8.2", "1.9.0", 1),
        ("1.9.0", "1.10.0", 1),  # numbers, not text: 10 > 9
        ("1.10.0", "1.9.0", -1),
        ("1.8", "1.8.0", 0),  # trailing zeros do not make it newer
        ("2.0.0rc1", "2.0.0", 1),  # PEP 440 where both parse
        ("96.00.74.00.01", "92.00.45.00.03", -1),  # a GPU vbios: leading zeros, five parts
        ("01.01.10", "01.02.00", 1),
        ("0.9.7", "0.9.7", 0),
        ("U46 v2.72", "U46 v2.80", None),  # a vendor string is not guessed at
        ("1.0.0", "A12", None),
    ],
)
def test_versions_are_ordered_or_said_to_be_unorderable(current: str, wanted: str, order: int | None) -> None:
    assert compare_versions(current, wanted) == order


def test_a_downgrade_or_an_unorderable_version_is_refused_unless_allowed() -> None:
    assert classify("1.9.0", "1.8.2", allow_downgrade=False)[0] == "downgrade-refused"
    assert classify("1.9.0", "1.8.2", allow_downgrade=True)[0] == "downgrade"
    action, why = classify("U46 v2.72", "U46 v2.80", allow_downgrade=False)
    assert action == "downgrade-refused" and why is not None and "cannot order" in why
    assert classify("1.8.2", "1.9.0", allow_downgrade=False) == ("update", None)
    assert classify(None, "1.9.0", allow_downgrade=False)[0] == "unknown"


def _comp(cid: str, version: str | None, name: str | None = None) -> FirmwareComponent:
    return FirmwareComponent(id=cid, name=name or cid, version=version, uri=f"/redfish/v1/UpdateService/FirmwareInventory/{cid}")


def test_compliance_covers_bmc_bios_nics_and_boards_and_says_what_is_missing() -> None:
    inv = [_comp("BMC", "2.14.0"), _comp("BIOS", "1.8.2"), _comp("mncore2_slot0_mncore2-board", "0.9.6"),
           _comp("mncore2_slot1_mncore2-board", "0.9.7"), _comp("CPLD", "3")]  # fmt: skip
    want = {"BMC": "2.14.0", "BIOS": "1.9.0", "mncore2-board": "0.9.7", "NIC": "22.31.1014"}
    rows = {r.component: r for r in compliance(inv, want)}
    assert rows["BMC"].action == "none" and rows["BIOS"].action == "update"
    board = rows["mncore2_slot0_mncore2-board"]
    assert board.action == "update" and board.baseline_component == "mncore2-board"
    assert rows["mncore2_slot1_mncore2-board"].action == "none"
    assert rows["CPLD"].action == "not-in-baseline"
    assert rows["NIC"].action == "unknown" and rows["NIC"].reason == "not reported by the BMC"
    assert rows["BIOS"].uri == "/redfish/v1/UpdateService/FirmwareInventory/BIOS"


def test_the_plan_renders_images_and_keeps_refusals_with_their_reason() -> None:
    inv = [_comp("BIOS", "1.9.0"), _comp("mncore2_slot0_mncore2-board", "0.9.6")]
    want = {"BIOS": "1.8.2", "mncore2-board": "0.9.7"}
    flashes = plan(inv, want, CampaignOptions(template="{base}/{component}/{id}-{version}.bin", base="http://img/fw/"))
    assert [(f.id, f.state, f.image) for f in flashes] == [
        ("BIOS", "refused", "http://img/fw/BIOS/BIOS-1.8.2.bin"),
        ("mncore2_slot0_mncore2-board", "planned", "http://img/fw/mncore2-board/mncore2_slot0_mncore2-board-0.9.7.bin"),
    ]
    assert flashes[0].message and "--allow-downgrade" in flashes[0].message
    only = plan(inv, want, CampaignOptions(template="{base}/{id}-{version}.bin", base="http://img", only={"mncore2-board"}))
    assert [f.id for f in only] == ["mncore2_slot0_mncore2-board"]


def test_a_password_in_an_image_url_is_never_shown() -> None:
    assert redact("https://fw:s3cret@images.example:8443/fw/BIOS-1.9.0.bin") == "https://fw:***@images.example:8443/fw/BIOS-1.9.0.bin"
    assert redact("http://images.example/fw/BIOS-1.9.0.bin") == "http://images.example/fw/BIOS-1.9.0.bin"
    assert redact("/srv/fw/BIOS-1.9.0.bin") == "/srv/fw/BIOS-1.9.0.bin"


def test_board_slots_are_read_from_component_ids() -> None:
    assert board_slot("mncore2_slot3_mncore2-board") == 3
    assert board_slot("gpu_slot0_vbios") == 0
    assert board_slot("BIOS") is None and board_slot("BMC") is None


@pytest.mark.parametrize(
    ("text", "total", "limit"),
    [("1", 100, 1), ("3", 100, 3), ("50%", 4, 2), ("5%", 100, 5), ("1%", 20, 1), ("10%", 25, 3), ("100%", 7, 7)],
)
def test_threshold_counts_or_percentages(text: str, total: int, limit: int) -> None:
    t = Threshold.parse(text)
    assert t.limit(total) == limit
    assert not t.reached(limit - 1, total) and t.reached(limit, total)


@pytest.mark.parametrize("bad", ["0", "-1", "0%", "101%", "abc", "5 %%", "", "nan%"])
def test_a_bad_threshold_is_bad_input(bad: str) -> None:
    with pytest.raises(InputError, match="failure threshold"):
        Threshold.parse(bad)


def _at(hh: int, mm: int = 0) -> dt.datetime:
    return dt.datetime(2026, 12, 1, hh, mm, tzinfo=dt.UTC)


def test_a_window_past_midnight() -> None:
    w = Window.parse("22:00-04:00")
    assert w.contains(_at(22)) and w.contains(_at(23, 59)) and w.contains(_at(0)) and w.contains(_at(3, 59))
    assert not w.contains(_at(4)) and not w.contains(_at(12)) and not w.contains(_at(21, 59))
    assert w.opens_in(_at(23)) == 0
    assert w.opens_in(_at(21)) == 3600
    assert w.opens_in(_at(4)) == 18 * 3600


def test_a_window_within_a_day_and_other_time_zones() -> None:
    w = Window.parse("09:30-11:00")
    assert w.contains(_at(9, 30)) and not w.contains(_at(11))
    assert w.opens_in(_at(11)) == (22 * 60 + 30) * 60  # tomorrow
    jst = dt.timezone(dt.timedelta(hours=9))
    assert w.contains(dt.datetime(2026, 12, 1, 19, 0, tzinfo=jst))  # 10:00 UTC


@pytest.mark.parametrize("bad", ["22-04", "25:00-02:00", "10:00-10:00", "10:60-11:00", "tonight"])
def test_a_bad_window_is_bad_input(bad: str) -> None:
    with pytest.raises(InputError):
        Window.parse(bad)


# ---------------------------------------------------------------- waves
# The campaign's description (fleetctl.workflows.firmware_described) run by the in-process engine: its own gate and
# report, the waves sequenced by the engine as on Temporal; the store and the BMCs stood in for (open, the units, the
# wave's job), and the window's clock a fake one whose sleep is the context's.


class FakeClock:
    def __init__(self, at: dt.datetime) -> None:
        self.at = at
        self.slept: list[float] = []

    def now(self) -> dt.datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += dt.timedelta(seconds=seconds)

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


class Standin(FirmwareCampaignWorkflow):
    """The campaign's gate, wave_done's tally and report, with the servers' flashing stood in for."""

    def __init__(self, clock: FakeClock, fail: set[str]) -> None:
        super().__init__(clock)
        self.fail = fail
        self.ran: list[tuple[int, list[str], dt.datetime]] = []

    def open(self, ctx: Context, request: FirmwareRequest) -> Opened[FirmwareRunData, ServerWork]:
        names = [n for w in request.waves for n in w]
        run = FirmwareRunData(7, "test", "rack", {}, request.options, Threshold.parse(request.threshold).limit(len(names)),
                              request.threshold, request.window, request.wait)  # fmt: skip
        units = [Unit(n, "", ServerWork(n, i, k), wave=k) for k, w in enumerate(request.waves) for i, n in enumerate(w)]
        return Opened(run, units, FirmwareKept(names, waves={u.key: u.wave for u in units}))

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: FirmwareRunData, units: list[ServerWork]) -> AsyncIterator[None]:
        yield None

    async def unit(self, ctx: Context, run: FirmwareRunData, data: ServerWork) -> ServerDone:
        if not self.ran or self.ran[-1][0] != data.wave:
            self.ran.append((data.wave, [], self.clock.now()))
        self.ran[-1][1].append(data.name)
        ok = data.name not in self.fail
        row = {"wave": data.wave, "server": data.name, "component": "BIOS", "result": "updated" if ok else "failed"}
        return ServerDone(data.name, ok, None if ok else "boom", rows=[row])

    def wave_done(self, ctx: Context, run: FirmwareRunData, wave: int, outcomes: list[Any], tally: FirmwareTally | None) -> FirmwareTally:
        t = tally or FirmwareTally()
        return FirmwareTally(t.failed + failed_count(outcomes), t.stopped)  # (the wave's job is the store's: not here)

    def close(self, ctx: Context, run: FirmwareRunData, kept: FirmwareKept, outcomes: list[Any], *, interrupted: bool) -> Any:
        return report_of(run, kept, outcomes)


def _waves(n: int, fail: set[str], clock: FakeClock, *, threshold: str = "1", window: str | None = None, wait: bool = True,
           said: list[str] | None = None) -> Any:  # fmt: skip
    names = [f"s{i}" for i in range(n)]
    waves = [names[:1]] + [names[i : i + 2] for i in range(1, n, 2)]
    desc = Standin(clock, fail)
    req = FirmwareRequest("rack", {}, CampaignOptions(template="", base=""), waves, threshold, window, wait, "test")
    ctx = Context("process", "test:host:1", sleep=clock.asleep, say=(said.append if said is not None else None))
    report = run_local(desc, req, ctx=ctx)
    return report, desc.ran


def test_the_threshold_halts_the_waves_after_the_one_that_reached_it() -> None:
    report, ran = _waves(7, {"s1", "s3"}, FakeClock(_at(12)), threshold="2")
    assert [k for k, _, _ in ran] == [0, 1, 2]  # s1 fails in wave 1 (1 < 2), s3 in wave 2: halted
    assert report.failed == 2 and report.halted
    halted = [r for r in report.rows if r["result"] == "not attempted"]
    assert [r["server"] for r in halted] == ["s5", "s6"] and halted[0]["message"] == "halted: 2 server(s) failed, threshold 2"
    assert [r["wave"] for r in halted] == [3, 3]


def test_the_default_threshold_is_the_first_failure() -> None:
    report, ran = _waves(5, {"s0"}, FakeClock(_at(12)))
    assert [k for k, _, _ in ran] == [0] and report.halted  # the canary failed
    assert [r["result"] for r in report.rows] == ["failed"] + ["not attempted"] * 4


def test_a_percentage_threshold_counts_the_servers_of_the_campaign() -> None:
    report, ran = _waves(7, {"s1", "s2"}, FakeClock(_at(12)), threshold="50%")  # 4 of 7: two failures do not halt
    assert [k for k, _, _ in ran] == [0, 1, 2, 3] and report.failed == 2 and not report.halted


def test_waves_wait_for_the_window_and_start_inside_it() -> None:
    clock, said = FakeClock(_at(20)), []
    report, ran = _waves(3, set(), clock, window="22:00-04:00", said=said)
    assert clock.slept == [7200.0]
    assert said == ["wave 0: outside the window 22:00-04:00 UTC; waiting 120 min for it to open"]
    assert all(Window.parse("22:00-04:00").contains(at) for _, _, at in ran) and len(ran) == 2
    assert not report.halted and not report.stopped_for_window


def test_outside_the_window_no_wait_stops_every_wave_cleanly() -> None:
    clock = FakeClock(_at(20))
    report, ran = _waves(3, set(), clock, window="22:00-04:00", wait=False)
    assert ran == [] and clock.slept == [] and report.stopped_for_window and not report.halted
    assert {r["result"] for r in report.rows} == {"not attempted"} and len(report.rows) == 3
    assert {r["message"] for r in report.rows} == {WINDOW_REASON.format(window="22:00-04:00 UTC")}


def test_a_window_that_closes_stops_the_waves_after_it() -> None:
    # The canary starts inside the window and ends past its end: with --no-wait the wave after it is not attempted.
    clock = FakeClock(_at(3, 59))

    class Slow(Standin):
        async def unit(self, ctx: Context, run: FirmwareRunData, data: ServerWork) -> ServerDone:
            out = await super().unit(ctx, run, data)
            self.clock.at += dt.timedelta(minutes=5)  # the canary takes past 04:00
            return out

    desc = Slow(clock, set())
    req = FirmwareRequest("rack", {}, CampaignOptions(template="", base=""), [["s0"], ["s1"]], "1", "22:00-04:00", False, "test")
    report = run_local(desc, req, ctx=Context("process", "test:host:1", sleep=clock.asleep))
    assert [k for k, _, _ in desc.ran] == [0] and report.stopped_for_window
    assert [(r["server"], r["result"]) for r in report.rows] == [("s0", "updated"), ("s1", "not attempted")]


def test_a_unit_time_limit_is_bounded_from_the_baseline_and_the_boards() -> None:
    opts = CampaignOptions(template="", base="", task_timeout=100.0, power_timeout=50.0)
    # 4 baseline components, 4 boards: each component once, and once per board for a board's (per slot), and 2 more tasks.
    assert unit_limit(4, 4, opts) == 600 + (4 * 5 + 2) * 100
    assert unit_limit(3, 0, opts) == 600 + 5 * 100
    staged = CampaignOptions(template="", base="", task_timeout=100.0, power_timeout=50.0, apply_time="on-reset")
    assert unit_limit(3, 0, staged) == 600 + 5 * 100 + 3 * 50
