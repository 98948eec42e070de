"""The sweep's journal on both backends: first seen, new, resolved, diff, acks, retention, interrupted runs.

Verdicts are fed straight to the recorder (no devices): what is tested is
what the store makes of them.
"""

from __future__ import annotations

import datetime as dt
import os

import pytest
from sqlalchemy import insert, select, update

from fleetctl.store import get_engine
from fleetctl.store import tables as T
from fleetctl.sweep import history
from fleetctl.sweep.engine import SweepOptions, TargetVerdict, mark_interrupted, run
from fleetctl.sweep.model import Finding, Status, worst


def verdict(name: str, *findings: tuple[str, str, Status], kind: str = "server") -> TargetVerdict:
    fs = [Finding(kind, name, check, status, f"{check} {subject} {status}", subject) for check, subject, status in findings]
    return TargetVerdict(kind, name, worst(f.status for f in fs), fs, rack="rack-1", site="s1", position=1)


def sweep(*verdicts: TargetVerdict, retention: int = 90):  # type: ignore[no-untyped-def]
    async def collect(rec):  # type: ignore[no-untyped-def]
        for v in verdicts:
            rec.add(v, {"log_cursor": f"cursor-{v.name}"})

    return run([], [], selector="test", options=SweepOptions(retention_days=retention), collect=collect)


def test_new_persisting_resolved_and_first_seen(db_url):  # type: ignore[no-untyped-def]
    r1 = sweep(verdict("a", ("psu", "PSU1", Status.CRITICAL)), verdict("b"))
    assert [f["check"] for f in r1.new] == ["psu"] and r1.worst_new == Status.CRITICAL
    assert r1.counts == {"ok": 1, "warning": 0, "unknown": 0, "critical": 1}
    r2 = sweep(verdict("a", ("psu", "PSU1", Status.CRITICAL)), verdict("b", ("fan", "Fan1", Status.WARNING)))
    assert [f["target"] for f in r2.new] == ["b"] and r2.worst_new == Status.WARNING
    assert [f["target"] for f in r2.persisting] == ["a"]
    with get_engine().connect() as c:
        f2 = {f["target"]: f for f in history.findings(c, r2.run_id)}
        f1 = {f["target"]: f for f in history.findings(c, r1.run_id)}
        assert f2["a"]["first_seen"] == f1["a"]["first_seen"]  # carried: the problem is as old as its first sweep
        assert not f2["a"]["new"] and f2["b"]["new"]
    # a worse status is new again
    r3 = sweep(verdict("a"), verdict("b", ("fan", "Fan1", Status.CRITICAL)))
    assert [(f["target"], f["status"]) for f in r3.new] == [("b", "critical")]
    assert [(f["target"], f["check"]) for f in r3.resolved] == [("a", "psu")]
    with get_engine().connect() as c:
        d = history.diff(c, r2.run_id, r3.run_id)
        assert [f["target"] for f in d["resolved"]] == ["a"]
        assert [(f["target"], f["status"]) for f in d["new"]] == [("b", "critical")]
        assert d["persisting"] == []
        cursors = {k[1]: v for k, v in history.baseline_cursors(c).items()}
        assert cursors == {"a": {"log_cursor": "cursor-a"}, "b": {"log_cursor": "cursor-b"}}
        assert history.get_run(c, "latest")["id"] == r3.run_id
        assert history.get_run(c, "latest~2")["id"] == r1.run_id


def test_a_partial_sweep_resolves_nothing_elsewhere(db_url):  # type: ignore[no-untyped-def]
    sweep(verdict("a", ("psu", "PSU1", Status.CRITICAL)), verdict("b", ("fan", "F", Status.WARNING)))
    r2 = sweep(verdict("b", ("fan", "F", Status.WARNING)))  # rack b only
    assert r2.resolved == [] and r2.new == []
    r3 = sweep(verdict("a", ("psu", "PSU1", Status.CRITICAL)))
    assert r3.new == [] and len(r3.persisting) == 1  # still the same problem, not new
    with get_engine().connect() as c:
        d = history.diff(c, r2.run_id, r3.run_id)  # no target in common: nothing to say
        assert d == {"new": [], "resolved": [], "persisting": []}


def test_ack_silences_until_the_status_changes(db_url):  # type: ignore[no-untyped-def]
    sweep(verdict("a", ("temperature", "Inlet", Status.WARNING)))
    with get_engine().begin() as c:
        a = history.ack(c, "a:temperature:Inlet", reason="known hot aisle", until=None, actor="me")
    assert a["status"] == "warning"
    with get_engine().connect() as c:  # the latest run shows it at once
        assert history.findings(c, history.get_run(c)["id"])[0]["ack_reason"] == "known hot aisle"
    r2 = sweep(verdict("a", ("temperature", "Inlet", Status.WARNING)), verdict("b", ("fan", "F", Status.WARNING)))
    acked = [f for f in r2.findings if f["ack_id"]]
    assert [f["target"] for f in acked] == ["a"]
    # b is new and unacked: the warning sets the exit code, a's never does
    assert r2.worst_new == Status.WARNING
    r3 = sweep(verdict("a", ("temperature", "Inlet", Status.CRITICAL)))
    assert r3.findings[0]["ack_id"] is None and r3.worst_new == Status.CRITICAL
    with get_engine().connect() as c:
        ended = history.acks(c, include_ended=True)
        assert [(x["ended_why"]) for x in ended] == ["changed"]
        assert history.acks(c) == []


def test_ack_expires_and_ends_when_resolved(db_url):  # type: ignore[no-untyped-def]
    sweep(verdict("a", ("fan", "F1", Status.WARNING)), verdict("b", ("psu", "P", Status.CRITICAL)))
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with get_engine().begin() as c:
        history.ack(c, "a:fan:F1", reason="part ordered", until=soon, actor="me")
        history.ack(c, "b:psu", reason="swap scheduled", until=None, actor="me")  # the only psu finding of b
        # the ack's time passes
        c.execute(update(T.finding_ack).where(T.finding_ack.c.target == "a").values(until=dt.datetime.now(dt.UTC) - dt.timedelta(1)))
    r2 = sweep(verdict("a", ("fan", "F1", Status.WARNING)), verdict("b"))
    assert r2.findings[0]["ack_id"] is None
    with get_engine().connect() as c:
        why = {x["target"]: x["ended_why"] for x in history.acks(c, include_ended=True)}
    assert why == {"a": "expired", "b": "resolved"}


@pytest.mark.parametrize("ref,message", [
    ("nosuch:psu", "no open finding"), ("a", "bad finding"), ("99999", "no finding 99999"),
])  # fmt: skip
def test_ack_refuses_what_is_not_open(db_url, ref, message):  # type: ignore[no-untyped-def]
    from fleetctl.errors import InputError

    sweep(verdict("a", ("psu", "P", Status.CRITICAL)))
    with pytest.raises(InputError, match=message), get_engine().begin() as c:
        history.ack(c, ref, reason="x", until=None, actor="me")


def test_ack_refuses_the_past_and_an_empty_reason(db_url):  # type: ignore[no-untyped-def]
    from fleetctl.errors import InputError

    sweep(verdict("a", ("psu", "P", Status.CRITICAL)))
    with pytest.raises(InputError, match="in the past"), get_engine().begin() as c:
        history.ack(c, "a:psu:P", reason="x", until=dt.datetime(2020, 1, 1, tzinfo=dt.UTC), actor="me")
    with pytest.raises(InputError, match="--reason"), get_engine().begin() as c:
        history.ack(c, "a:psu:P", reason=" ", until=None, actor="me")


def test_retention_prunes_old_runs_but_keeps_the_latest(db_url):  # type: ignore[no-untyped-def]
    r1 = sweep(verdict("a", ("psu", "P", Status.CRITICAL)))
    r2 = sweep(verdict("a", ("psu", "P", Status.CRITICAL)))
    with get_engine().begin() as c:
        old = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
        c.execute(update(T.sweep_run).where(T.sweep_run.c.id.in_([r1.run_id, r2.run_id])).values(started_at=old))
    r3 = sweep(verdict("a", ("psu", "P", Status.CRITICAL)), retention=30)
    assert r3.pruned == 2
    with get_engine().connect() as c:
        assert [r["id"] for r in history.runs(c)] == [r3.run_id]
        assert c.execute(select(T.finding.c.run_id).distinct()).scalars().all() == [r3.run_id]
        # the open problem keeps its first_seen across the pruning: the first run's
        first = c.execute(select(T.finding_state.c.first_seen)).scalar_one()
    assert (first if first.tzinfo else first.replace(tzinfo=dt.UTC)) == r1.started_at


def test_a_run_whose_process_died_is_marked_interrupted(db_url):  # type: ignore[no-untyped-def]
    import socket

    engine = get_engine()
    with engine.begin() as c:
        dead = c.execute(insert(T.sweep_run).values(started_at=dt.datetime.now(dt.UTC), state="running", level="bmc", selector="all",
                         actor="x", host=socket.gethostname(), pid=2**22 + 12345, servers=1, switches=0, counts={})
                         .returning(T.sweep_run.c.id)).scalar_one()  # fmt: skip
        alive = c.execute(insert(T.sweep_run).values(started_at=dt.datetime.now(dt.UTC), state="running", level="bmc", selector="all",
                          actor="x", host=socket.gethostname(), pid=os.getpid(), servers=1, switches=0, counts={})
                          .returning(T.sweep_run.c.id)).scalar_one()  # fmt: skip
    assert mark_interrupted(engine) == 1
    with engine.connect() as c:
        states = dict(c.execute(select(T.sweep_run.c.id, T.sweep_run.c.state)).all())
    assert states == {dead: "interrupted", alive: "running"}


def test_a_crash_mid_sweep_keeps_what_was_written(db_url):  # type: ignore[no-untyped-def]
    async def collect(rec):  # type: ignore[no-untyped-def]
        rec.add(verdict("a", ("psu", "P", Status.CRITICAL)), {"log_cursor": "x"})
        rec.flush()
        rec.add(verdict("b"), None)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run([], [], selector="t", collect=collect)
    with get_engine().connect() as c:
        r = c.execute(select(T.sweep_run)).one()
        assert r.state == "interrupted"
        assert sorted(c.execute(select(T.sweep_target.c.name)).scalars()) == ["a", "b"]
        assert c.execute(select(T.finding_state.c.target)).scalars().all() == ["a"]
