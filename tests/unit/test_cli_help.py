"""`fleetctl --help` lists every noun, verb and plugin without importing their modules.

Timings are bench/cli.py's business; these check what makes it fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from fleetctl.cli.app import NOUNS, PLUGIN_GROUP, VERBS

# Run the real entry point in a fresh interpreter; report its stdout, exit code
# and which command modules (ours and the plugins') it imported.
_PROBE = """
import contextlib, io, json, sys
sys.argv = ["fleetctl", *json.loads(sys.argv[1])]
from fleetctl.cli.app import main
out = io.StringIO()
code = 0
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    try:
        main()
    except SystemExit as e:
        code = e.code
print(json.dumps({"out": out.getvalue(), "code": code, "modules": sorted(sys.modules)}))
"""


def _run(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _plugins() -> dict[str, str]:
    """{name: top-level module} of the installed CLI plugins."""
    return {ep.name: ep.module.split(".")[0] for ep in entry_points(group=PLUGIN_GROUP)}


def _command_modules(modules: list[str]) -> set[str]:
    """The sub-app modules among those imported: fleetctl.cli.<noun or verb> and any plugin package."""
    ours = {f"fleetctl.cli.{name}" for name in [*NOUNS, *VERBS]}
    theirs = set(_plugins().values())
    return {m for m in modules if m in ours or m.split(".")[0] in theirs}


# No arguments: the same help, exit code 2 (click's no_args_is_help).
@pytest.mark.parametrize(("args", "code"), [(["--help"], 0), ([], 2)], ids=["--help", "no-args"])
def test_help_lists_every_command_and_imports_none(args: list[str], code: int) -> None:
    r = _run(*args)
    assert r["code"] == code, r["out"]
    section = r["out"].split("\nCommands:\n", 1)[1]
    listed = [line.split()[0] for line in section.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    assert listed == [*VERBS, *NOUNS, *sorted(_plugins())]
    assert _command_modules(r["modules"]) == set()


def test_a_subcommand_imports_only_its_own_module() -> None:
    r = _run("server", "list", "--help")
    assert r["code"] == 0, r["out"]
    assert "Usage: fleetctl server list" in r["out"]
    assert _command_modules(r["modules"]) == {"fleetctl.cli.server"}


def test_a_typo_is_answered_without_importing_the_commands() -> None:
    r = _run("srvr")
    assert r["code"] == 2
    assert "Did you mean 'server'?" in r["out"]
    assert _command_modules(r["modules"]) == set()


@pytest.mark.skipif("lab" not in _plugins(), reason="the lab distribution is not installed")
def test_a_plugin_still_runs() -> None:
    r = _run("lab", "--help")
    assert r["code"] == 0, r["out"]
    assert "Usage: fleetctl lab" in r["out"]
    assert "fleetctl_lab.cli" in r["modules"]
