"""A burn-in run that says it is over has let its servers go (the same description on both engines).

``BurninWorkflow.close`` wrote the run's end, then released the servers: a reader between the two writes (a CI run's
test, polling the run on Temporal) saw the run finished with its servers still reserved. Now the reservations go
first; a close whose release fails still ends the run.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleetctl.burnin import workflow as W
from fleetctl.workflows.describe import Context


def _run() -> Any:
    return W.BurninRunData(run=7, job=9, resumed=False, actor="t", kind="mncore", level="quick", seconds=2.0, grace=4.0,
                           interval=1.0, force=False, dcgm_level=None, criteria={})  # fmt: skip


@pytest.mark.parametrize("interrupted", [False, True])
def test_the_servers_are_released_before_the_run_is_closed(monkeypatch: pytest.MonkeyPatch, interrupted: bool) -> None:
    seen: list[tuple[str, Any]] = []
    monkeypatch.setattr(W, "get_engine", lambda *a, **kw: object())
    monkeypatch.setattr(W, "Journal", lambda *a, **kw: object())
    monkeypatch.setattr(W, "release", lambda engine, names, *, owner: seen.append(("release", (tuple(names), owner))))
    monkeypatch.setattr(W, "close_run", lambda *a, interrupted: seen.append(("close_run", interrupted)))
    out = W.BurninWorkflow().close(Context("temporal", "wf-owner"), _run(), W.BurninKept(["mn-1", "mn-2"]), [],
                                   interrupted=interrupted)  # fmt: skip
    assert seen == [("release", (("mn-1", "mn-2"), "wf-owner")), ("close_run", interrupted)]
    assert out.run == 7 and out.job == 9


def test_a_release_that_fails_still_closes_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[bool] = []

    def release(*_a: Any, **_kw: Any) -> None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(W, "get_engine", lambda *a, **kw: object())
    monkeypatch.setattr(W, "Journal", lambda *a, **kw: object())
    monkeypatch.setattr(W, "release", release)
    monkeypatch.setattr(W, "close_run", lambda *a, interrupted: closed.append(interrupted))
    with pytest.raises(RuntimeError, match="locked"):
        W.BurninWorkflow().close(Context("process", "me"), _run(), W.BurninKept(["mn-1"]), [], interrupted=False)
    assert closed == [False]
