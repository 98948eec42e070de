"""The lifecycle table and the per-server locks, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fleetctl.lifecycle.machine import TRANSITIONS, allowed


def test_every_transition_says_why() -> None:
    assert all(isinstance(why, str) and len(why) > 10 for why in TRANSITIONS.values())
    assert allowed("validating", "ready") and not allowed("registered", "in-service")


def test_set_state_follows_the_table_and_audits(example_loaded, cli):  # type: ignore[no-untyped-def]
    r = cli("server", "set-state", "mn-tyo1-r12-01", "in-service", "--reason", "skip ahead")
    assert r.code == 2 and "not a lifecycle transition" in r.err and "inspected" in r.err
    r = cli("server", "set-state", "mn-tyo1-r12-01", "inspected", "--reason", "checked by hand")
    assert r.code == 0 and "registered -> inspected" in r.out
    r = cli("server", "set-state", "mn-tyo1-r12-01", "in-service", "--reason", "emergency", "--force")
    assert r.code == 0
    events = json.loads(cli("events", "list", "--name", "mn-tyo1-r12-01", "--output", "json").out)
    assert [e["reason"] for e in events[:2]] == ["emergency", "checked by hand"]
    assert "forced" in events[0]["detail"]
    r = cli("server", "set-state", "mn-tyo1-r12-01", "bogus", "--reason", "x")
    assert r.code == 2 and "not a lifecycle state" in r.err


def test_locks_are_exclusive_and_name_the_holder(example_loaded):  # type: ignore[no-untyped-def]
    from fleetctl.errors import Locked
    from fleetctl.lifecycle.locks import acquire, try_lock
    from fleetctl.store import get_engine

    engine = get_engine()
    with acquire(engine, ["mn-tyo1-r12-01", "mn-tyo1-r12-02"], purpose="provision"):
        got, refused = try_lock(engine, ["mn-tyo1-r12-02", "mn-tyo1-r12-03"], purpose="burnin", owner="other:host:1")
        assert got == ["mn-tyo1-r12-03"]
        why = refused["mn-tyo1-r12-02"]
        assert why.holder is not None and why.holder.user == "tester@ci" and why.purpose == "provision" and not why.stale
        assert str(why).startswith("locked by tester@ci:") and str(why).endswith(" for provision")
        with pytest.raises(Locked), acquire(engine, ["mn-tyo1-r12-01"], purpose="again"):
            pass
    # released on exit: all three can be taken now except the one 'other' holds
    got, refused = try_lock(engine, ["mn-tyo1-r12-01", "mn-tyo1-r12-02", "mn-tyo1-r12-03"], purpose="x", owner="me:h:2")
    assert got == ["mn-tyo1-r12-01", "mn-tyo1-r12-02"] and list(refused) == ["mn-tyo1-r12-03"]


def test_a_dead_workers_lock_is_recovered(example_loaded, cli):  # type: ignore[no-untyped-def]
    import socket

    from fleetctl.lifecycle.locks import try_lock
    from fleetctl.store import get_engine

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    owner = f"ghost@x:{socket.gethostname()}:{dead.pid}"
    try_lock(get_engine(), ["mn-tyo1-r12-05"], purpose="provision", owner=owner)
    show = json.loads(cli("server", "show", "mn-tyo1-r12-05", "--output", "json").out)
    assert show["locked_by"] == owner and show["locked_for"] == "provision"
    r = cli("server", "unlock", "mn-tyo1-r12-05")
    assert r.code == 0 and "broken" in r.out
    # a live owner's lock is not broken without --force
    live = f"me@x:{socket.gethostname()}:{os.getpid()}"
    try_lock(get_engine(), ["mn-tyo1-r12-06"], purpose="provision", owner=live)
    r = cli("server", "unlock", "mn-tyo1-r12-06")
    assert r.code == 1 and "still running" in r.err
    assert cli("server", "unlock", "mn-tyo1-r12-06", "--force").code == 0


def test_a_lock_holder_is_a_typed_value() -> None:
    import socket

    from fleetctl.lifecycle.locks import Holder, Refused

    here = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    h = Holder.parse(f"ghost@x:{here}:{dead.pid}")
    assert h == Holder("ghost@x", here, dead.pid) and str(h) == f"ghost@x:{here}:{dead.pid}"
    assert h.alive() is False and Refused("s1", h, None, "provision").stale
    assert Holder.parse(f"me@x:{here}:{os.getpid()}").alive() is True
    assert Holder.parse("me@x:elsewhere:1").alive() is None  # another host: unknown
    assert Holder.parse("taken by hand") == Holder("taken by hand") and Holder("taken by hand").alive() is None
    assert str(Refused("s1")) == "no such server" and not Refused("s1").stale
