"""Issue #25 items 1 and 9: what "new" is judged against, on both backends.

New means: not open (and not silenced) in the last *finished* run that swept
the target. An interrupted run's findings, cursors and ack endings are kept,
but it reported nothing, so it is no baseline; an ack that ends by expiry (or
is removed) makes its problem news again, as an Alertmanager silence does.
The e2e test with a real process stopped by SIGTERM and SIGKILL is
tests/e2e/test_sweep_interrupted.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import update

from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.sweep import history
from fleetctl.sweep.engine import SweepOptions, TargetVerdict, run
from fleetctl.sweep.model import Finding, Status, worst

PSU = ("psu", "PSU1", Status.CRITICAL)


def verdict(name: str, *findings: tuple[str, str, Status]) -> TargetVerdict:
    fs = [Finding("server", name, check, status, f"{check} {subject} {status}", subject) for check, subject, status in findings]
    return TargetVerdict("server", name, worst(f.status for f in fs), fs, rack="rack-1", site="s1", position=1)


def sweep(*verdicts: TargetVerdict, cursor: str = "c") -> Any:
    async def collect(rec):  # type: ignore[no-untyped-def]
        for v in verdicts:
            rec.add(v, {"log_cursor": f"{cursor}-{v.name}"})

    return run([], [], selector="test", options=SweepOptions(retention_days=0), collect=collect)


def interrupted(*verdicts: TargetVerdict, cursor: str = "i") -> int:
    """A run stopped after its verdicts were written (as SIGTERM leaves it); its id."""
    seen: list[int] = []

    async def collect(rec):  # type: ignore[no-untyped-def]
        seen.append(rec.run_id)
        for v in verdicts:
            rec.add(v, {"log_cursor": f"{cursor}-{v.name}"})
        rec.flush()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run([], [], selector="test", collect=collect)
    return seen[0]


def test_a_problem_an_interrupted_run_saw_first_is_new_at_the_next_finished_run(db_url):  # type: ignore[no-untyped-def]
    base = sweep(verdict("a"), verdict("b"))
    stopped = interrupted(verdict("a", PSU))
    r = sweep(verdict("a", PSU), verdict("b"))
    assert [(f["target"], f["check"]) for f in r.new] == [("a", "psu")] and r.persisting == []
    assert r.worst_new == Status.CRITICAL  # the exit code of a new critical finding
    with get_engine().connect() as c:
        assert history.get_run(c, str(stopped))["state"] == "interrupted"
        assert [f["new"] for f in history.findings(c, r.run_id)] == [True]
        d = history.diff(c, base.run_id, r.run_id)  # `sweep diff` (the finished runs) agrees
        assert [(f["target"], f["check"]) for f in d["new"]] == [("a", "psu")]
    # and the run after that: persisting, as of the run that first reported it
    r2 = sweep(verdict("a", PSU), verdict("b"))
    assert r2.new == [] and [f["check"] for f in r2.persisting] == ["psu"]


def test_a_problem_an_interrupted_run_saw_resolved_is_resolved_at_the_next_finished_run(db_url):  # type: ignore[no-untyped-def]
    sweep(verdict("a", PSU))
    interrupted(verdict("a"))
    r = sweep(verdict("a"))
    assert [(f["target"], f["check"]) for f in r.resolved] == [("a", "psu")]


def test_a_target_only_an_older_partial_sweep_saw_is_judged_against_it(db_url):  # type: ignore[no-untyped-def]
    sweep(verdict("a", PSU), verdict("b"))
    for _ in range(3):  # three finished runs of b alone since a was last swept
        sweep(verdict("b"))
    r = sweep(verdict("a", PSU))
    assert r.new == [] and [f["check"] for f in r.persisting] == ["psu"]


def test_the_cursor_an_interrupted_run_wrote_is_not_the_next_run_s_mark(db_url):  # type: ignore[no-untyped-def]
    sweep(verdict("a"), cursor="first")
    interrupted(verdict("a"), cursor="stopped")
    with get_engine().connect() as c:  # "since the last sweep" is since the finished one
        assert history.baseline_cursors(c) == {("server", "a"): {"log_cursor": "first-a"}}
    interrupted(verdict("a"), cursor="stopped-again")
    with get_engine().connect() as c:
        assert history.baseline_cursors(c) == {("server", "a"): {"log_cursor": "first-a"}}
    sweep(verdict("a"), cursor="next")
    with get_engine().connect() as c:
        assert history.baseline_cursors(c) == {("server", "a"): {"log_cursor": "next-a"}}


def _expire(target: str) -> None:
    with get_engine().begin() as c:
        c.execute(update(T.finding_ack).where(T.finding_ack.c.target == target, T.finding_ack.c.ended_at.is_(None))
                  .values(until=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)))  # fmt: skip


def test_an_expired_ack_makes_its_problem_new_again(db_url):  # type: ignore[no-untyped-def]
    fan = ("fan", "Fan1", Status.WARNING)
    sweep(verdict("a", fan))
    with get_engine().begin() as c:
        history.ack(c, "a:fan:Fan1", reason="part ordered", until=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1), actor="me")
    silenced = sweep(verdict("a", fan))
    assert silenced.worst_new == Status.OK and silenced.new == [] and silenced.findings[0]["ack_id"]
    _expire("a")
    r = sweep(verdict("a", fan))
    assert [(f["check"], f["ack_id"]) for f in r.new] == [("fan", None)]
    assert r.worst_new == Status.WARNING  # exit 1, as a new warning: the alert fires again
    with get_engine().connect() as c:
        assert [f["new"] for f in history.findings(c, r.run_id)] == [True]
        assert [a["ended_why"] for a in history.acks(c, include_ended=True)] == ["expired"]
    again = sweep(verdict("a", fan))
    assert again.new == [] and again.worst_new == Status.OK  # news once, then persisting


def test_an_ack_that_expired_during_an_interrupted_run_is_news_at_the_next_finished_run(db_url):  # type: ignore[no-untyped-def]
    fan = ("fan", "Fan1", Status.WARNING)
    sweep(verdict("a", fan))
    with get_engine().begin() as c:
        history.ack(c, "a:fan:Fan1", reason="r", until=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1), actor="me")
    sweep(verdict("a", fan))
    _expire("a")
    interrupted(verdict("a", fan))  # ends the ack, reports nothing
    r = sweep(verdict("a", fan))
    assert [f["check"] for f in r.new] == ["fan"] and r.worst_new == Status.WARNING


def test_a_removed_ack_makes_its_problem_new_again(db_url):  # type: ignore[no-untyped-def]
    sweep(verdict("a", PSU))
    with get_engine().begin() as c:
        history.ack(c, "a:psu:PSU1", reason="r", until=None, actor="me")
    assert sweep(verdict("a", PSU)).worst_new == Status.OK
    with get_engine().begin() as c:
        assert history.unack(c, "a:psu:PSU1") == 1
    assert sweep(verdict("a", PSU)).worst_new == Status.CRITICAL
