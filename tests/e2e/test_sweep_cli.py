"""`fleetctl sweep` and `fleetctl finding`: bad input is one line, exit 2, and nothing is swept or stored.

(What a sweep finds is tested against the lab in test_sweep_faults.py and
against real peers in tests/contract/test_sweep_peers.py.)
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select


def _runs() -> int:
    from fleetctl.store import get_engine
    from fleetctl.store import tables as T

    with get_engine().connect() as c:
        return int(c.execute(select(func.count()).select_from(T.sweep_run)).scalar_one())


@pytest.mark.parametrize("args,message", [
    (["sweep", "state="], "state="),
    (["sweep", "nosuch"], "no server, switch, rack or site named 'nosuch'"),
    (["sweep", "bogus=1"], "unknown selector 'bogus'"),
    (["sweep", "role="], "role= needs a value"),
    (["sweep", "all", "--level", "rack"], "--level 'rack'"),
    (["sweep", "all", "--textfile", "/nonexistent/dir"], "not a directory"),
    (["sweep", "show", "latest~x"], "bad run"),
    (["sweep", "show"], "no finished sweep run yet"),
    (["sweep", "diff"], "no finished sweep run yet"),
    (["finding", "ack", "nosuch:psu", "--reason", "r"], "no open finding"),
    (["finding", "ack", "nosuch", "--reason", "r"], "bad finding"),
    (["finding", "ack", "a:psu", "--reason", "r", "--until", "someday"], "--until"),
])  # fmt: skip
def test_bad_input_is_refused_before_any_sweep(example_loaded, cli, args, message) -> None:  # type: ignore[no-untyped-def]
    r = cli(*args)
    assert r.code == 2, (r.code, r.out, r.err)
    assert message in r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert _runs() == 0


def test_sweep_checks_lists_the_registry(example_loaded, cli) -> None:  # type: ignore[no-untyped-def]
    import json

    r = cli("sweep", "checks", "-o", "json")
    assert r.code == 0, r.err
    names = {(c["kind"], c["name"]) for c in json.loads(r.out)}
    assert {("server", "psu"), ("server", "bmc.certificate"), ("switch", "lldp"), ("switch", "port.errors")} <= names


def test_sweep_help_names_the_default_and_the_subcommands(example_loaded, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("sweep", "--help")
    assert r.code == 0
    for word in ("run", "list", "show", "diff", "checks"):
        assert word in r.out


def test_request_timeout_and_retries_apply_to_a_switch_s_snmp_requests(example_loaded, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`--request-timeout`/`--retries` bound each SNMP request too (before, SNMP kept its own 2 s: a slow but
    healthy switch read as unreachable however long the operator allowed)."""
    import json

    # a loopback address no lab or agent uses: the request goes unanswered
    assert cli("switch", "set", "spine-tyo1-01", "--address", "127.249.0.9", "--reason", "test").code == 0
    monkeypatch.setenv("SNMP_RO_USERNAME", "ro")
    monkeypatch.setenv("SNMP_RO_PASSWORD", "public")
    r = cli("sweep", "spine-tyo1-01", "--request-timeout", "0.4", "--retries", "1", "-o", "json")
    assert r.code == 5, (r.code, r.err)
    (f,) = json.loads(r.out)["new"]
    assert (f["target"], f["check"], f["status"]) == ("spine-tyo1-01", "switch.reachable", "critical")
    assert f["message"] == "no answer from 127.249.0.9:161 in 0.4s x 2 tries", f
