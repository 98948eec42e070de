"""A selector never widens by accident: an empty or unknown value is an error, only `all` selects all.

`fleetctl power off "state=$S"` with S unset must not power off the fleet.
Every case is refused before any device is contacted (exit 2, one line,
naming the selector), and the dry runs prove what `all` and a good value do.
"""

from __future__ import annotations

import json

import pytest

EMPTY = ["state=", "tag=", "rack=", "model=", "site="]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("selector", EMPTY)
@pytest.mark.parametrize("command", [("power", "off", "--dry-run"), ("power", "status"), ("provision", "--dry-run")])
def test_an_empty_selector_value_is_refused(example_loaded, cli, selector, command) -> None:  # type: ignore[no-untyped-def]
    r = cli(*command, selector)
    assert r.code == 2, (r.out, r.err)
    assert "needs a value" in r.err and "all" in r.err and len(r.err.strip().splitlines()) == 1
    assert r.out == ""  # nothing was planned, let alone done


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("selector", "why"),
    [("state=bogus", "no such state"), ("tag=no-such-tag", "no server carries that tag"), ("rack=rack-99", "rack-99"),
     ("model=no-such-model", "no model of that name"), ("site=xyz9", "no site of that name")],
)  # fmt: skip
def test_an_unknown_selector_value_is_refused(example_loaded, cli, selector, why) -> None:  # type: ignore[no-untyped-def]
    r = cli("power", "off", selector, "--dry-run")
    assert r.code == 2 and why in r.err, r.err


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_empty_targets_and_switch_selectors(example_loaded, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("power", "off", "", "--dry-run").code == 2
    for sel in ("role=", "rack=", "site=", "platform="):
        r = cli("switch", "facts", sel)
        assert r.code == 2 and "needs a value" in r.err, (sel, r.err)
    r = cli("server", "list", "--state", "")
    assert r.code == 2 and "'--state'" in r.err and "must not be empty" in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_all_and_a_good_value_select_what_they_say(example_loaded, cli) -> None:  # type: ignore[no-untyped-def]
    every = json.loads(cli("server", "list", "--output", "json").out)
    # A dry run of power off contacts nothing and says, line by line, what it would do.
    r = cli("power", "off", "all", "--dry-run")
    assert r.code == 0, r.err
    planned = {line.split()[3] for line in r.out.splitlines() if line.startswith("would shut down ")}
    assert planned == {s["name"] for s in every}
    r = cli("power", "off", "tag=gpu", "--dry-run")
    gpus = {s["name"] for s in every if "gpu" in s["tags"]}
    assert gpus and {line.split()[3] for line in r.out.splitlines() if line.startswith("would shut down ")} == gpus
