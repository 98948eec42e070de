"""Issue #13: a lock held by a live process never suggests --force; it says who holds it since when for what."""

from __future__ import annotations

import os
import socket

import pytest

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@sqlite_only
def test_a_live_holder_is_waited_for_or_left_out_never_forced(example_loaded, cli):  # type: ignore[no-untyped-def]
    from fleetctl.errors import Locked
    from fleetctl.lifecycle.locks import acquire, acquire_recovering, break_lock, try_lock
    from fleetctl.store import get_engine

    engine = get_engine()
    live = f"me@x:{socket.gethostname()}:{os.getpid()}"
    try_lock(engine, ["mn-tyo1-r12-06"], purpose="provision rack-12", owner=live)
    for attempt in (lambda: acquire(engine, ["mn-tyo1-r12-06", "mn-tyo1-r12-07"], purpose="burnin"),
                    lambda: acquire_recovering(engine, ["mn-tyo1-r12-06"], purpose="burnin", reason="t")):  # fmt: skip
        with pytest.raises(Locked) as e, attempt():
            pass
        text = str(e.value)
        assert text.startswith(f"mn-tyo1-r12-06 is locked by {live} since ") and "for provision rack-12" in text, text
        assert "wait for it to end, or leave that server out" in text and "--force" not in text, text
    with pytest.raises(Locked) as e:
        break_lock(engine, "mn-tyo1-r12-06")
    assert "still running: wait for it to end, or leave that server out" in str(e.value) and "--force" not in str(e.value)
    r = cli("server", "unlock", "mn-tyo1-r12-06")
    assert r.code == 1 and "--force" not in r.err and "for provision rack-12" in r.err, r.err
    # A holder on another host cannot be seen from here: unlock --force remains, for when it is known gone.
    try_lock(engine, ["mn-tyo1-r12-08"], purpose="provision rack-12", owner="op@y:other-host:4242")
    r = cli("server", "unlock", "mn-tyo1-r12-08")
    assert r.code == 1 and "held from host other-host" in r.err and "server unlock mn-tyo1-r12-08 --force" in r.err, r.err
    assert cli("server", "unlock", "mn-tyo1-r12-08", "--force").code == 0


@pytest.mark.parametrize("value,want", [
    ("me@x:host-1:42", ("me@x", "host-1", 42, None)),
    ("me@x:temporal:fleetctl-burnin-0a1b2c3d4e5f", ("me@x", None, None, "fleetctl-burnin-0a1b2c3d4e5f")),
    ("me@x:temporal:17", ("me@x:temporal:17", None, None, None)),  # the older job-id form: never taken for gone
    ("by hand", ("by hand", None, None, None)),
])  # fmt: skip
def test_a_holder_is_a_process_or_a_temporal_workflow(value: str, want: tuple) -> None:  # type: ignore[type-arg]
    from fleetctl.lifecycle.locks import Holder

    h = Holder.parse(value)
    assert (h.user, h.host, h.pid, h.workflow) == want
    assert str(h) == value


@sqlite_only
def test_a_workflow_s_lock_is_never_taken_for_gone_where_temporal_cannot_be_asked(example_loaded, cli, monkeypatch):  # type: ignore[no-untyped-def]
    """Without FLEETCTL_TEMPORAL (or with a Temporal that does not answer) a workflow's status is unknown: its
    lock stays, and the message says why; with Temporal the lock is recovered once the workflow is closed
    (tests/e2e/test_jobs_cancel.py)."""
    from fleetctl.errors import Locked
    from fleetctl.lifecycle.locks import acquire_recovering, try_lock
    from fleetctl.store import get_engine

    held = "op@y:temporal:fleetctl-provision-0123456789ab"
    engine = get_engine()
    for temporal in ("", "127.0.0.1:9"):  # unset; nothing listening
        monkeypatch.setenv("FLEETCTL_TEMPORAL", temporal)
        try_lock(engine, ["mn-tyo1-r12-06"], purpose="provision rack-12", owner=held)
        with pytest.raises(Locked) as e, acquire_recovering(engine, ["mn-tyo1-r12-06"], purpose="burnin", reason="t"):
            pass
        assert "held by Temporal workflow fleetctl-provision-0123456789ab, whose status cannot be read here" in str(e.value)
        monkeypatch.delenv("FLEETCTL_TEMPORAL")
        r = cli("server", "unlock", "mn-tyo1-r12-06")
        assert r.code == 1 and "--force" not in r.err, r.err
