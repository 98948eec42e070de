"""`fleetctl sweep` on both engines: the same lab, the same faults, the same findings.

Through Temporal, the sweep's targets are read in shards by site, each shard a unit of the generic workflow (``fleetctl.run``,
the sweep's description: ``fleetctl.sweep.workflow``), an activity on a worker of its site (docs/scale-out.md); the run is
opened, journaled and closed in the same store as in process.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the scale-out engine's SDK (pip install 'fleetctl[temporal]')")

import scaleout_helpers as h  # (path set in conftest)
from scaleout_helpers import BIN, OSA, TYO

lab, lab_timings, temporal, workers = h.lab, h.lab_timings, h.temporal, h.workers  # the fixtures

pytestmark = [
    *h.TEMPORAL_MARKS,
    *h.ANSIBLE_MARKS,
]

FAST = ["--timeout", "60", "--request-timeout", "20"]  # generous: a busy machine slows the lab
SEEN: dict[str, set[tuple[str, str, str]]] = {}  # engine -> the findings of its sweep


async def _shard_workers(address: str) -> list[tuple[str, str]]:
    """(the site of each shard activity, the identity of the worker that ran it)."""
    from temporalio.client import Client

    client = await Client.connect(address)
    out = []
    async for wf in client.list_workflows("WorkflowType = 'fleetctl.run'"):
        if not wf.id.startswith("fleetctl-sweep-"):
            continue
        history = (await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()).to_json_dict()
        sites: dict[str, str] = {}
        for ev in history["events"]:
            attrs = ev.get("activityTaskScheduledEventAttributes")
            if attrs and attrs["activityType"]["name"] == "fleetctl.run.unit":
                sites[ev["eventId"]] = attrs["taskQueue"]["name"].removeprefix("fleetctl-site-")
            attrs = ev.get("activityTaskStartedEventAttributes")
            if attrs and attrs["scheduledEventId"] in sites:
                out.append((sites[attrs["scheduledEventId"]], attrs.get("identity", "")))
    return out


@pytest.mark.parametrize("engine", ["process", "temporal"])
def test_the_same_sweep_on_both_engines(engine, lab, cli, temporal, workers, monkeypatch):  # type: ignore[no-untyped-def]
    h.use_engine(engine, workers, monkeypatch, "tyo1", "osa1")
    assert cli("lab", "fault", "mn-tyo1-r12-01", "--set", "psu_failed=true").code == 0
    assert cli("lab", "fault", "mn-osa1-r12-01", "--set", "fan_failed=true").code == 0
    r = cli("sweep", *TYO, *OSA, *FAST, "-o", "json")
    assert r.code == 5 and r.out.strip(), (r.code, r.err, workers.logs() if engine == "temporal" else "")
    doc: dict[str, Any] = json.loads(r.out)
    assert doc["servers"] == len(TYO + OSA) and sum(doc["targets_by_status"].values()) == len(TYO + OSA)
    found = {(f["target"], f["check"], f["status"]) for f in doc["new"]}
    assert {("mn-tyo1-r12-01", "psu", "critical"), ("mn-osa1-r12-01", "fan", "critical")} <= found, found
    assert not [f for f in found if f[0] == "mn-tyo1-r12-02" and f[2] == "critical"], found
    # The run in the store says the same as the command (journaled by the workers on Temporal).
    shown = json.loads(cli("sweep", "show", str(doc["run"]), "-o", "json").out)
    rows = shown if isinstance(shown, list) else shown.get("findings", [])
    assert {(f["target"], f["check"], f["status"]) for f in rows} >= found
    SEEN[engine] = found
    if len(SEEN) == 2:  # the two engines found the same
        assert SEEN["process"] == SEEN["temporal"]
    if engine == "temporal":
        ran = asyncio.run(_shard_workers(temporal.address))
        assert sorted(site for site, _ in ran) == ["osa1", "tyo1"]  # one shard per site (fewer than 1,000 targets each)
        for site, identity in ran:
            assert workers.site[int(identity.partition("@")[0])] == site


async def _sweep_workflows(address: str) -> dict[str, str]:
    from temporalio.client import Client

    client = await Client.connect(address)
    return {wf.id: wf.status.name if wf.status else "?" async for wf in client.list_workflows("WorkflowType = 'fleetctl.run'")
            if wf.id.startswith("fleetctl-sweep-")}  # fmt: skip


def test_an_interrupted_sweep_stops_its_shards_on_the_workers(lab, cli, temporal, workers, tmp_path):  # type: ignore[no-untyped-def]
    """SIGTERM (as Ctrl-C) to a sweep on Temporal: the command marks the run interrupted, so the workflow and its shard
    activities are cancelled and waited for: nothing is written into the run after it, and no workflow runs on."""
    import os
    import signal
    import subprocess
    import time

    from sqlalchemy import create_engine, text

    from fleetctl.config import database_url

    workers.start("tyo1", "tyo1")
    workers.start("osa1", "osa1")
    workers.wait_ready()
    assert cli("lab", "fault", "mn-tyo1-r12-01", "--set", "hang=true").code == 0  # its shard reads for the request timeout
    proc = subprocess.Popen([str(BIN / "fleetctl"), "sweep", *TYO, *OSA, "--timeout", "120", "--request-timeout", "60", "-o", "json"],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    eng = create_engine(database_url())
    try:
        deadline = time.monotonic() + 60
        while not any(s == "RUNNING" for s in asyncio.run(_sweep_workflows(temporal.address)).values()):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.3)
        time.sleep(3)  # the shards are reading (one waits on the hung BMC)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 130, err
        with eng.connect() as c:
            run_id, state = c.execute(text("SELECT id, state FROM sweep_run ORDER BY id DESC LIMIT 1")).one()
            assert state == "interrupted"
            before = c.execute(text("SELECT count(*) FROM sweep_target WHERE run_id = :r"), {"r": run_id}).scalar_one()
        statuses = asyncio.run(_sweep_workflows(temporal.address))
        assert statuses == {f"fleetctl-sweep-{run_id}": "CANCELED"}, statuses
        time.sleep(3)
        with eng.connect() as c:  # no shard goes on writing into the interrupted run
            after = c.execute(text("SELECT count(*) FROM sweep_target WHERE run_id = :r"), {"r": run_id}).scalar_one()
            assert after == before
            assert c.execute(text("SELECT state FROM sweep_run WHERE id = :r"), {"r": run_id}).scalar_one() == "interrupted"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        eng.dispose()
