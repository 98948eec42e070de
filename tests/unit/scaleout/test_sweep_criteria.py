"""The sweep on Temporal judges by the command's criteria: read once by the command, carried in the workflow's input,
used by every worker's shard (before, each worker read its own ``$FLEETCTL_BURNIN_CRITERIA``).

The command's side (``fleetctl.scaleout.sweep.collector``) is run against a stand-in Temporal client that keeps what
it was asked to start; the shard (``fleetctl.sweep.workflow``'s unit) then runs in a "worker" whose own criteria
differ, with ``sweep_targets`` replaced to show what it was given.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

SITE = """
kinds:
  gpu:
    retired_pages_fail: 10
"""
WORKER = """
kinds:
  gpu:
    retired_pages_fail: 40
"""


class Handle:
    async def result(self) -> dict[str, Any]:
        return {"result": {"counts": {"ok": 0}, "new": [], "resolved": [], "persisting": [], "findings": []}}


class Client:
    def __init__(self) -> None:
        self.started: list[Any] = []

    async def start_workflow(self, workflow: str, call: Any, **kw: Any) -> Handle:
        self.started.append((workflow, call, kw))
        return Handle()


class Rec:
    run_id = 7
    now = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.new: list[Any] = []
        self.resolved: list[Any] = []
        self.persisting: list[Any] = []
        self.findings: list[Any] = []

    def flush(self) -> None:
        pass


def test_the_command_reads_the_criteria_once_and_every_shard_judges_by_them(tmp_path: Path, monkeypatch: Any) -> None:
    from fleetctl.burnin.criteria import current
    from fleetctl.scaleout import sweep as scaleout_sweep
    from fleetctl.sweep import workflow
    from fleetctl.sweep.engine import SweepOptions
    from fleetctl.workflows.describe import Context, typed

    (tmp_path / "site.yaml").write_text(SITE)
    (tmp_path / "worker.yaml").write_text(WORKER)
    monkeypatch.setenv("FLEETCTL_BURNIN_CRITERIA", str(tmp_path / "site.yaml"))
    monkeypatch.setattr(scaleout_sweep, "check_store", lambda _url: None)
    client = Client()

    async def connect(_address: str, _namespace: str) -> Client:
        return client

    monkeypatch.setattr(scaleout_sweep, "connect", connect)
    collect = scaleout_sweep.collector([], [], SweepOptions(level="host"), "127.0.0.1:7233", "default")
    command = current()
    asyncio.run(collect(Rec()))
    [(kind, call, kw)] = client.started
    assert kind == "fleetctl.run" and call.workflow == "sweep" and kw["id"] == "fleetctl-sweep-7"
    assert call.request["criteria"] == command.model_dump(mode="json")

    # A worker whose own copy says otherwise judges by the command's.
    monkeypatch.setenv("FLEETCTL_BURNIN_CRITERIA", str(tmp_path / "worker.yaml"))
    assert current().for_board("gpu", None).retired_pages_fail == 40
    given: list[Any] = []

    async def sweep_targets(*args: Any, criteria: Any = None) -> None:
        given.append(criteria)

    monkeypatch.setattr(workflow, "sweep_targets", sweep_targets)
    monkeypatch.setattr(workflow, "Recorder", lambda *a: Rec())
    req = typed(workflow.SweepRequest, call.request)
    run = workflow.SWEEP.open(Context("temporal", "alice:temporal:wf"), req).run  # (no target: no shard, no site read)
    asyncio.run(workflow.SWEEP.unit(Context("temporal", "alice:temporal:wf"), run, workflow.Shard([], [])))
    [criteria] = given
    assert criteria.for_board("gpu", None).retired_pages_fail == 10
