"""Checks from other distributions: found by entry point, run beside the built-in ones, refused when broken."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from fleetctl.errors import FleetError
from fleetctl.sweep import registry
from fleetctl.sweep.collect import ServerExpect, ServerReading
from fleetctl.sweep.engine import _evaluate
from fleetctl.sweep.model import Status, problem


class _EP:
    def __init__(self, name: str, module: str) -> None:
        self.name, self.value = name, module

    def load(self) -> Any:
        import importlib

        return importlib.import_module(self.value)


@pytest.fixture
def plugin(monkeypatch):  # type: ignore[no-untyped-def]
    """A fresh registry and a fake distribution whose module registers one check."""
    registry.checks()  # the real registry, loaded once: the copy below starts from the built-in checks
    monkeypatch.setattr(registry, "_CHECKS", dict(registry._CHECKS))
    monkeypatch.setattr(registry, "_loaded", False)

    def install(body: str, name: str = "site_checks") -> None:
        mod = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, mod)

        def run_body() -> None:
            exec(body, mod.__dict__)  # the plugin's source, written by this test

        loader = types.SimpleNamespace(called=False)

        class EP(_EP):
            def load(self) -> Any:
                if not loader.called:
                    loader.called = True
                    run_body()
                return mod

        import importlib.metadata as md

        monkeypatch.setattr(md, "entry_points", lambda group=None: [EP(name, name)] if group == "fleetctl.checks" else [])

    return install


def test_a_plugin_check_runs_beside_the_built_in_ones(plugin) -> None:  # type: ignore[no-untyped-def]
    plugin(
        "from fleetctl.sweep.model import Status, problem\n"
        "from fleetctl.sweep.registry import check\n"
        "@check('site.asset_tag', kind='server', severity=Status.WARNING, reads=('Systems/{id} AssetTag',))\n"
        "def asset_tag(r, e):\n"
        "    '''The asset tag is the server's name.'''\n"
        "    yield problem(Status.WARNING, 'asset tag missing')\n"
    )
    names = {c.name for c in registry.checks("server")}
    assert "site.asset_tag" in names and "psu" in names
    spec = next(c for c in registry.checks("server") if c.name == "site.asset_tag")
    assert spec.metadata()["description"] == "The asset tag is the server's name."
    found = _evaluate("server", "srv", ServerReading(), ServerExpect("srv", "S", "m", "s", "r", 1), "bmc")
    assert [(f.check, f.status) for f in found] == [("site.asset_tag", Status.WARNING)]


def test_a_plugin_that_fails_to_load_is_named(plugin) -> None:  # type: ignore[no-untyped-def]
    plugin("raise ImportError('no module named vendorlib')")
    with pytest.raises(FleetError, match=r"check plugin site_checks .* failed to load: ImportError: no module named vendorlib"):
        registry.checks()


def test_two_checks_of_one_name_are_refused(plugin) -> None:  # type: ignore[no-untyped-def]
    plugin(
        "from fleetctl.sweep.model import Status\n"
        "from fleetctl.sweep.registry import check\n"
        "@check('psu', kind='server', severity=Status.WARNING, reads=('x',))\n"
        "def psu(r, e):\n"
        "    return []\n"
    )
    with pytest.raises(FleetError, match="two checks named 'psu'"):
        registry.checks()


def test_problem_carries_its_evidence() -> None:
    p = problem(Status.CRITICAL, "hot", "Inlet", reading_c=50)
    assert (p.status, p.subject, p.evidence) == (Status.CRITICAL, "Inlet", {"reading_c": 50})
