"""Every `fleetctl ...` command shown in the docs exists (issue #13).

The commands are taken from the code blocks of docs/*.md and README.md (a
continued line joined; several commands on a line, `$(...)` and `<(...)`
included). Two checks:

- every command: its nouns and verbs name real commands (`a|b` alternatives
  each), and every option shown (`--name`, `-o`) is one the command takes, as
  `--help` would list it; no lab needed. A syntax line (`NOUN VERB [ARGS]`,
  `TARGET...`) is checked this way only.
- the concrete examples of read-only commands (list, show, status, check,
  --dry-run ...) run against a lab of the example site: they may find
  problems (exit 1) or refuse a value (exit 2, as the docs show on purpose),
  but never fail as a usage error of the CLI itself ("No such command",
  "No such option") or with an internal error (exit 3). The rest is in SKIPPED
  with the reason.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]

# Where a command starts on a line: its beginning (after a prompt, variables
# set for it, `time`), or after ; && || ( $( <(. Output shown in a block
# ("... and 8 more: fleetctl sweep show", "another fleetctl process") is not a command.
_START = re.compile(r"(?:^|;|&&|\|\||\$\(|<\(|\()\s*(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:time\s+)?fleetctl(?=\s|$)")
_END = re.compile(r"\s*;|\s(?:&&|\|\||2?>)|\)\s*(?:<|&&|;|$)|\s*&\s*$")


@dataclass(frozen=True)
class Shown:
    where: str  # docs/bmc.md:24
    text: str  # the command without `fleetctl`
    env: bool = False  # run with variables set for it (FLEETCTL_DB=... fleetctl ...)

    def __str__(self) -> str:
        return f"{self.where}: fleetctl {self.text}"


def shown_commands() -> list[Shown]:
    found: list[Shown] = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        in_block = False
        i = 0
        while i < len(lines):
            line, start = lines[i], i + 1
            i += 1
            if line.lstrip().startswith("```"):
                in_block = not in_block
                continue
            if not in_block:
                continue
            while line.rstrip().endswith("\\") and i < len(lines):
                line = line.rstrip()[:-1] + " " + lines[i].strip()
                i += 1
            text = line.strip()
            for m in _START.finditer(text):
                rest = text[m.end() :]
                end = _END.search(rest)
                command = (rest[: end.start()] if end else rest).strip()
                found.append(Shown(f"{doc.relative_to(REPO)}:{start}", command, env="=" in m.group(0).split("fleetctl")[0]))
    return found


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote in a syntax line
        return text.split("#", 1)[0].split()


def _placeholder(token: str) -> bool:
    """NOUN, VERB, TARGET..., [ARGS]: a syntax line's stand-ins, not names."""
    bare = token.strip("[]().")
    return (bool(bare) and bare.upper() == bare and any(c.isalpha() for c in bare)) or token.endswith("...")


def _option_names(token: str) -> list[str]:
    """`[--apply`, `(--access`, `--mncore|--gpu`, `--set=X`: the option names in a token."""
    names = []
    for part in token.strip("[]()").split("|"):
        part = part.strip("[]()").split("=", 1)[0]
        if re.fullmatch(r"--?[A-Za-z][A-Za-z0-9-]*", part):
            names.append(part)
    return names


def _root() -> Any:
    import typer

    from fleetctl.cli.app import app

    return typer.main.get_command(app)


def _params(cmd: Any) -> dict[str, Any]:
    out = {"--help": None}
    for p in cmd.params:
        for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]:
            if o.startswith("-"):
                out[o] = p
    return out


def problems_of(shown: Shown, root: Any) -> list[str]:
    """What in one shown command does not exist: an unknown noun or verb, an option the command does not take."""
    return _walk(_tokens(shown.text), root, ["fleetctl"])


def _walk(tokens: list[str], cmd: Any, path: list[str]) -> list[str]:
    problems: list[str] = []
    params = _params(cmd)
    subs = getattr(cmd, "commands", None)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok == "|":
            nxt = tokens[i] if i < len(tokens) else ""
            if not nxt.lstrip("[(").startswith("-"):
                return problems  # a shell pipe: `fleetctl lab status -o json | python3 -c ...`
            continue  # `--list | --host NAME`: alternatives
        if tok in ("[", "]", "...", "--"):
            continue
        names = _option_names(tok)
        if names:
            if subs is not None and "run" in subs and any(n not in params for n in names):
                return problems + _walk(tokens[i - 1 :], subs["run"], path)  # `burnin --mncore rack-12`: the default verb
            for name in names:
                if name not in params:
                    problems.append(f"{' '.join(path)}: no option {name}")
            p = params.get(names[-1])
            takes_value = p is not None and not getattr(p, "is_flag", False) and not getattr(p, "count", False)
            if takes_value and "=" not in tok and "|" not in tok and i < len(tokens):
                i += 1  # its value
            continue
        if subs is None:
            continue  # an argument of a leaf command
        choices = [c for c in tok.strip("[]()").split("|") if c]
        if choices and all(c in subs for c in choices):
            rest = tokens[i:]
            # `burnin list | show [RUN] [--board SERIAL] | report [--html FILE]`: each verb with its own arguments.
            cuts = [j for j, t in enumerate(rest) if t == "|" and j + 1 < len(rest) and rest[j + 1] in subs]
            if cuts and len(choices) == 1 and getattr(subs[choices[0]], "commands", None) is None:
                problems += _walk(rest[: cuts[0]], subs[choices[0]], [*path, choices[0]])
                for a, b in zip(cuts, [*cuts[1:], len(rest)], strict=True):
                    problems += _walk(rest[a + 2 : b], subs[rest[a + 1]], [*path, rest[a + 1]])
                return problems
            for c in choices:
                problems += _walk(rest, subs[c], [*path, c])
            return problems
        if "run" in subs and not _placeholder(tok):  # `sweep rack-12`: the default verb
            return problems + _walk(tokens[i - 1 :], subs["run"], path)
        if _placeholder(tok):
            return problems  # `fleetctl NOUN VERB [ARGS]`: nothing more to check
        return [*problems, f"{' '.join(path)}: no command {tok!r}"]
    return problems


def test_the_docs_show_commands() -> None:
    shown = shown_commands()
    assert len(shown) > 200, len(shown)
    texts = [s.text.split("#")[0].strip() for s in shown]
    assert "sweep diff" in texts and "db info" in texts  # `$ `-prompted, and after a variable set for it
    assert "inventory export" in texts  # inside <( ... )
    assert not any("process holds" in t or t.startswith("the core") for t in texts)  # output and prose are not commands


def test_every_command_and_option_shown_exists() -> None:
    root = _root()
    wrong = [f"{s}\n    {p}" for s in shown_commands() for p in problems_of(s, root)]
    assert not wrong, "the docs show commands or options that do not exist:\n" + "\n".join(wrong)


def test_the_checker_sees_a_wrong_command_and_option() -> None:
    root = _root()
    assert problems_of(Shown("x", "server enroll NAME"), root) == ["fleetctl server: no command 'enroll'"]
    assert problems_of(Shown("x", "power status|on|wake TARGET..."), root) == ["fleetctl power: no command 'status|on|wake'"]
    assert problems_of(Shown("x", "server list [--rack R] [--colour C]"), root) == ["fleetctl server list: no option --colour"]
    assert problems_of(Shown("x", "burnin --mncore|--gpux rack-12"), root) == ["fleetctl burnin: no option --gpux"]
    assert problems_of(Shown("x", "burnin list | show [RUN] [--boards S] | report"), root) == ["fleetctl burnin show: no option --boards"]
    assert problems_of(Shown("x", "lab status -o json | python3 -c 'print(1)'"), root) == []
    assert problems_of(Shown("x", "[--debug] [--db PATH_OR_URL] NOUN VERB [ARGS]"), root) == []
    assert problems_of(Shown("x", "sweep all --textfile /tmp/x"), root) == []


# What is not run against the lab, and why; the rest of the concrete examples
# (no NOUN, TARGET... or [OPTION] stand-ins) are read-only and run. Keys: the
# command's first words.
SKIPPED: dict[str, str] = {
    "lab": "the fixture starts and stops the lab; `lab fault` changes what the others would see",
    "exporter": "serves /metrics until stopped",
    "worker": "needs a Temporal server",
    "db": "upgrade, backup and restore migrate or replace the database (tests/unit/test_db_backup.py, docs/operations.md)",
    "provision": "provisions hosts (minutes); `provision --dry-run` runs",
    "burnin": "burns in boards (minutes); its --dry-run runs",
    "firmware update": "flashes firmware; its --dry-run runs",
    "sweep": "a whole-fleet sweep is minutes against a lab (tests/e2e/test_sweep_cli.py); `sweep list|show|diff|checks` run",
    "report": "needs a finished sweep (tests/e2e/test_report.py)",
    "finding": "needs a finding of a sweep",
    "power": "changes power state; `power status` and --dry-run run",
    "boot set": "changes the boot override; --dry-run runs",
    "media": "inserts and ejects images; `media show` runs",
    "bios set": "stages BIOS settings; --dry-run runs",
    "bios apply-profile": "stages a BIOS profile; --dry-run runs",
    "switch vlan": "configures a switch port; --dry-run runs",
    "switch apply-plan": "configures switch ports; --dry-run runs",
    "switch poll": "polls SNMP for --interval seconds (tests/e2e/test_cli_switch.py)",
    "inventory import": "replaces the inventory; --dry-run runs",
    "server add": "adds servers (tests/e2e/test_enroll.py, test_cli_inventory.py); --dry-run runs",
    "server set": "changes the inventory; --dry-run runs",
    "server remove": "changes the inventory; --dry-run runs",
    "server set-state": "moves a server's state",
    "server unlock": "breaks a lock",
    "board set": "changes the inventory",
    "board remove": "changes the inventory",
    "board rma": "needs an RMA of a burn-in",
    "rack set": "changes the inventory; --dry-run runs",
    "site": "site add/set/remove change the inventory; `site list|show` run",
    "jobs show": "needs a job id of the reader's own run",
}
READ_ONLY = ("list", "show", "status", "check", "checks", "diff", "facts", "ports", "info", "acks", "inspect", "health",
             "verify-cabling", "export")  # fmt: skip


def runnable(shown: Shown) -> tuple[list[str] | None, str]:
    """The arguments to run a shown command with, or None and why not."""
    if shown.env:
        return None, "runs with variables set for it (a database of its own)"
    words = _tokens(shown.text)
    if not words or any(_placeholder(w) or w in ("|", "[", "]") or w.startswith(("[", "(", "$")) for w in words):
        return None, "a syntax line: checked against --help only"
    if any(w.startswith("/") for w in words):
        return None, "reads or writes a path of the reader's machine (/tmp, /srv)"
    dry = "--dry-run" in words
    for key, why in SKIPPED.items():
        head = key.split()
        if words[: len(head)] == head and not (dry and key not in ("lab", "db", "exporter", "worker")):
            if key in ("sweep", "site", "power", "media") and words[1:2] and words[1] in READ_ONLY:
                break  # the read-only verbs of these run
            return None, why
    if not dry and not any(w in READ_ONLY for w in words[:3]):
        return None, "changes something, and shows no --dry-run"
    return words, ""


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    from tests_helpers_bmc import lab_up, serve  # (path set in conftest)

    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.2",
               *serve(["mn-tyo1-r12-01", "mn-tyo1-r12-02", "gpu-tyo1-r12-17", "gpu-tyo1-r12-19"]))  # fmt: skip
    assert r.code == 0, r.err
    yield
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


_CLI_MISUSE = ("No such command", "No such option", "unexpected extra argument", "Missing option", "Missing argument")


@pytest.mark.slow
@pytest.mark.heavy  # minutes long: `make test-heavy` runs the heavy ones alone
def test_the_read_only_examples_run_against_a_lab(lab, cli, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)  # a command that writes a file writes it here
    ran, failed = 0, []
    for shown in shown_commands():
        args, _ = runnable(shown)
        if args is None:
            continue
        r = cli(*args)
        ran += 1
        misuse = [m for m in _CLI_MISUSE if m in r.err]
        if r.code == 3 or misuse:
            failed.append(f"{shown}\n    exit {r.code}: {r.err.strip()[:300]}")
    assert ran >= 40, ran
    assert not failed, "the docs show commands the CLI does not take:\n" + "\n".join(failed)


def test_every_command_is_run_or_skipped_with_a_reason() -> None:
    for shown in shown_commands():
        args, why = runnable(shown)
        assert args is not None or why, shown
