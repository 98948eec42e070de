"""Every argument of every command, given hostile values (issue #25): never an internal error, one line, nothing stored.

The commands come from the CLI's own tree (fleetctl's nouns and verbs, walked
as click builds them), so a new command or option is covered without editing
this file. Each example picks one parameter of one command and gives it a
hostile value: huge and negative integers, Unicode digits and letters, empty
and blank strings, non-finite and huge floats, paths that are folders, /proc
files, a link to /dev/full, or in a folder that does not exist. The command
must not end with exit 3; on exit 2 stderr is one line; on any failure the
inventory (the whole SQLite file, dumped as SQL) is as it was.

What keeps it from acting on anything: an inventory with the example site
whose BMCs and switches never resolve (tests/conftest.py guards their
network), every other argument a name that selects nothing, --dry-run where a
command has it, a Temporal address and an exporter address that cannot serve
(loopback port 1, no port at all), and a deadline per example (a command that
would hang fails the test instead). Plugins' commands (`fleetctl lab`) are
their distributions' to test. Derandomized: the same examples every run.
"""

# ruff: noqa: RUF001  (Arabic-Indic and full-width digits are the point: they must not read as numbers)

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 20  # per example: the slowest refusal takes well under a second
PLACEHOLDER = "no-such-name"  # selects nothing: no server, rack, site, switch, run or finding is called that


@dataclass(frozen=True)
class Param:
    path: tuple[str, ...]  # the command's words
    opt: str | None  # the option's flag; None for an argument
    index: int  # the argument's position among the command's arguments
    command: Any

    def __repr__(self) -> str:
        return f"{' '.join(self.path)} {self.opt or f'ARG{self.index}'}"


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    import typer

    from fleetctl.cli.app import NOUNS, VERBS, app

    root = typer.main.get_command(app)
    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs is not None:
            for name in sorted(subs):
                walk(subs[name], (*path, name))
        else:
            found.append((path, cmd))

    for name in [*VERBS, *NOUNS]:
        walk(root.commands[name], (name,))  # type: ignore[attr-defined]
    return found


def _params() -> list[Param]:
    out = []
    for path, cmd in _commands():
        args = 0
        for p in cmd.params:
            if p.name == "help" or getattr(p, "is_flag", False):
                continue
            if p.param_type_name == "argument":
                out.append(Param(path, None, args, cmd))
                args += 1
            else:
                out.append(Param(path, p.opts[0], 0, cmd))
    return out


PARAMS = _params()


def _filler(p: Any, tmp: Path) -> str:
    """A valid-looking value of the parameter's type that selects nothing."""
    ann = str(getattr(p.type_descriptor, "annotation", ""))
    if "int" in ann or "float" in ann:
        return "1"
    if "Path" in ann:
        return str(tmp / "placeholder.out")
    return PLACEHOLDER


def _argv(param: Param, value: str, tmp: Path) -> list[str]:
    """The command line: the command, its options, then after ``--`` its arguments (so "-1" is read as a value);
    every other required parameter filled with a value that selects nothing."""
    args: list[str] = []
    opts: list[str] = []
    index = 0
    for p in param.command.params:
        if p.name == "help" or getattr(p, "is_flag", False):
            continue
        if p.param_type_name == "argument":
            if param.opt is None and param.index == index:
                args.append(value)
            elif p.required or p.name in ("targets", "path", "names"):  # an optional target list defaults to all
                args.append(_filler(p, tmp))
            index += 1
        elif p.opts[0] == param.opt:
            opts += [p.opts[0], value]
        elif p.required:
            opts += [p.opts[0], _filler(p, tmp)]
    flags = {o for p in param.command.params for o in p.opts}
    if "--dry-run" in flags:
        opts.append("--dry-run")
    if param.path == ("exporter",) and param.opt != "--listen":
        opts += ["--listen", "no-port"]  # never serves: the exporter would run until a signal
    return [*param.path, *opts, "--", *args]


class Hung(BaseException):
    """The per-example deadline: a BaseException, so the CLI's error mapping does not turn it into an exit code."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hung(f"no answer in {DEADLINE_S} s")


def _dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as c:
        return list(c.iterdump())


_TEMPLATE: dict[str, Path] = {}


def _template(tmp_path_factory: Any, cli: Any, monkeypatch: Any) -> Path:
    """The example site imported once per session; each example runs on a fresh copy of it."""
    if "db" not in _TEMPLATE:
        db = tmp_path_factory.mktemp("fuzz-template") / "fleet.db"
        with monkeypatch.context() as m:
            m.setenv("FLEETCTL_DB", str(db))
            r = cli("inventory", "import", str(REPO / "inventory"))
        assert r.code == 0, r.err
        _TEMPLATE["db"] = db
    return _TEMPLATE["db"]


@pytest.fixture
def template(tmp_path_factory, cli, monkeypatch) -> Path:  # type: ignore[no-untyped-def]
    return _template(tmp_path_factory, cli, monkeypatch)


@pytest.fixture
def fuzz_env(tmp_path, monkeypatch, template) -> Path:  # type: ignore[no-untyped-def]
    db = tmp_path / "fleet.db"
    monkeypatch.setenv("FLEETCTL_DB", str(db))
    monkeypatch.setenv("FLEETCTL_TEMPORAL", "127.0.0.1:1")  # nothing listens there: a worker cannot start
    monkeypatch.chdir(tmp_path)  # a default output file (burnin-report.html) lands here
    return db


def _fixed(tmp: Path) -> list[str]:
    folder = tmp / "a-folder"
    folder.mkdir(exist_ok=True)
    full = tmp / "full-disk"  # a link, so that a lost rule replaces the link and never the device node
    if not full.is_symlink():
        full.symlink_to("/dev/full")
    zero = tmp / "zeros"  # read whole, a device without end fills the memory
    if not zero.is_symlink():
        zero.symlink_to("/dev/zero")
    return [
        "99999999999999999999999", "", "9223372036854775808", "-9223372036854775809", "-1", "0", "²", "١", "٩٨٧٧", "１２",
        "1e3", "0x10", "1_000", " 7", " ", "nan", "inf", "-inf", "1e308", "1e12", "١.٥", "latest~99999999999999999999999",
        "99999999999d", "0001-01-01", "9999-12-31T23:59", "127.0.0.1:٩٨٧٧", "Ω", "\u202e", "x" * 5000,
        str(folder), "/proc/version", str(full), str(zero), str(tmp / "no" / "such" / "file"),
    ]  # fmt: skip


def _values(tmp: Path) -> st.SearchStrategy[str]:
    generated = st.one_of(
        st.integers(min_value=-(2**80), max_value=2**80).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        # Digits and letters of other scripts (no ASCII letter: "all" would select the whole example fleet).
        st.text(st.characters(categories=["Nd", "No", "Lo", "Zs"]), max_size=6),
    )
    return st.one_of(st.sampled_from(_fixed(tmp)), generated)


def _check(param: Param, value: str, db: Path, template: Path, tmp: Path, cli: Any) -> str | None:
    """Run one command line on a fresh copy of the template; what went wrong, or None."""
    from fleetctl.store import reset_engines

    argv = _argv(param, value, tmp)
    reset_engines()
    shutil.copyfile(template, db)
    before = _dump(db)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(DEADLINE_S)
    try:
        r = cli(*argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        reset_engines()
    if r.code == 3 or "Traceback" in r.err:
        return f"{argv!r}: exit {r.code}: {r.err.strip()[:300]}"
    if r.code == 2 and len(r.err.strip().splitlines()) != 1:
        return f"{argv!r}: exit 2 with {len(r.err.strip().splitlines())} lines: {r.err[:300]!r}"
    if r.code != 0 and _dump(db) != before:
        return f"{argv!r}: exit {r.code} and the inventory changed"
    return None


def test_every_parameter_with_values_in_turn(fuzz_env, template, tmp_path, cli) -> None:  # type: ignore[no-untyped-def]
    """Each parameter of each command gets the huge id, and one more value of the list in turn (all of it is used)."""
    fixed = _fixed(tmp_path)
    failures = []
    for i, param in enumerate(PARAMS):
        for value in (fixed[0], fixed[1 + i % (len(fixed) - 1)]):
            if (failure := _check(param, value, fuzz_env, template, tmp_path, cli)) is not None:
                failures.append(failure)
    assert not failures, "\n".join(failures)


@settings(max_examples=int(os.environ.get("FUZZ_N", "150")), derandomize=True, deadline=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(data=st.data())
def test_no_argument_gives_an_internal_error(data, fuzz_env, template, tmp_path, cli) -> None:  # type: ignore[no-untyped-def]
    """Any parameter, any hostile value (generated ones too), a fixed seed."""
    param = data.draw(st.sampled_from(PARAMS), label="parameter")
    value = data.draw(_values(tmp_path), label="value")
    note(f"argv: {_argv(param, value, tmp_path)!r}")
    failure = _check(param, value, fuzz_env, template, tmp_path, cli)
    assert failure is None, failure


def test_every_command_is_walked() -> None:
    """The walk finds the commands (a broken walk would make the property test vacuous)."""
    words = {p.path for p in PARAMS}
    for expected in [("jobs", "show"), ("sweep", "show"), ("report",), ("db", "backup"), ("burnin", "run"), ("finding", "ack")]:
        assert expected in words
    assert len(PARAMS) > 150
