"""Issue #25 items 11 and 12: every input the issue lists is exit 2 and one line, and nothing is stored.

Item 11 (exit 3, an internal error, before): huge ids and limits, Unicode
superscript digits, huge durations, year-1 dates under a time zone east of
UTC, destinations that are not files (a /proc file, a folder, a device), a
full disk. Item 12 (taken as something else): empty strings read as "none"
or "every", Arabic-Indic digits read as numbers, a duration of 31,700 years.

The rules are the CLI's parameter types (fleetctl/cli/common.py); the
property test over every command is tests/unit/test_cli_fuzz.py.
"""

# ruff: noqa: RUF001  (Arabic-Indic and full-width digits are the point: they must not read as numbers)

from __future__ import annotations

import errno
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HUGE = "99999999999999999999999"


def dump(db: Path) -> list[str]:
    """The whole SQLite database as SQL: equal before and after means nothing was stored."""
    with sqlite3.connect(db) as c:
        return list(c.iterdump())


@pytest.fixture
def fleet(tmp_path, cli) -> Path:  # type: ignore[no-untyped-def]
    """The example site imported into the test's SQLite inventory; returns the database file."""
    r = cli("inventory", "import", str(REPO / "inventory"))
    assert r.code == 0, r.err
    return tmp_path / "fleet.db"


@pytest.fixture
def tokyo(monkeypatch) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Local time 9 hours east of UTC: local midnight of 0001-01-01 is in year 0 in UTC."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def refused(r, *words: str) -> str:  # type: ignore[no-untyped-def]
    assert r.code == 2, (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert "internal error" not in r.err and "Traceback" not in r.err
    for w in words:
        assert w in lines[0], lines[0]
    return str(lines[0])


def _folder(tmp_path: Path) -> str:
    (tmp_path / "a-folder").mkdir(exist_ok=True)
    return str(tmp_path / "a-folder")


def _full(tmp_path: Path) -> str:
    # A link to /dev/full, not /dev/full itself: were the rule ever lost, `db backup --force` replaces the link
    # (its folder is ours), never the device node (as root it did replace /dev/full with a regular file).
    link = tmp_path / "full-disk"
    if not link.is_symlink():
        link.symlink_to("/dev/full")
    return str(link)


# (arguments, words the one line must hold); {folder} and {full} are filled per test.
ITEM_11 = [
    (["sweep", "show", HUGE], ["RUN", "less than or equal to"]),
    (["sweep", "show", "²"], ["RUN"]),
    (["finding", "ack", HUGE, "--reason", "known"], ["FINDING", "less than or equal to"]),
    (["finding", "unack", HUGE], ["FINDING", "less than or equal to"]),
    (["burnin", "show", HUGE], ["RUN", "less than or equal to"]),
    (["jobs", "show", HUGE], ["less than or equal to"]),
    (["jobs", "cancel", HUGE], ["less than or equal to"]),
    (["jobs", "list", "--limit", HUGE], ["--limit", "less than or equal to"]),
    (["sweep", "list", "--limit", HUGE], ["--limit", "less than or equal to"]),
    (["burnin", "list", "--limit", HUGE], ["--limit", "less than or equal to"]),
    (["events", "list", "--limit", HUGE], ["--limit", "less than or equal to"]),
    (["finding", "ack", "1", "--reason", "known", "--until", "99999999999d"], ["--until", "longer than"]),
    (["report", "--html", "{out}", "--since", "0001-01-01"], ["--since", "out of range"]),
    (["report", "--html", "/proc/version"], ["--html", "/proc"]),
    (["report", "--html", "{folder}"], ["--html", "folder"]),
    (["burnin", "report", "--html", "{folder}"], ["--html", "folder"]),
    (["db", "backup", "{folder}", "--force"], ["folder"]),
    (["db", "backup", "{full}", "--force"], ["/dev"]),
    (["report", "--html", "{full}"], ["--html", "/dev"]),
    (["burnin", "report", "--html", "{full}"], ["--html", "/dev"]),
]

ITEM_12 = [
    (["finding", "ack", "1", "--reason", "known", "--until", ""], ["--until", "empty"]),
    (["--db", "", "server", "list"], ["--db", "empty"]),
    (["sweep", "diff", "", ""], ["RUN"]),
    (["sweep", "show", ""], ["RUN"]),
    (["burnin", "show", "--board", ""], ["--board", "empty"]),
    (["sweep", "show", "١"], ["RUN"]),
    (["exporter", "--listen", "127.0.0.1:٩٨٧٧"], ["--listen"]),
    (["burnin", "--kind", "gpu", "--duration", "1e12", "--dry-run"], ["--duration", "604800"]),
    (["board", "list", "--server", ""], ["--server", "empty"]),
    (["server", "list", "--rack", ""], ["--rack", "empty"]),
    (["rack", "add", "r-x", "--site", "tyo1", "--height", "٤٢"], ["--height", "whole number"]),
    (["switch", "vlan", "set", "sw", "Ethernet0", "--access", "١٠٠"], ["--access", "whole number"]),
    (["jobs", "cancel", "1", "--wait", "nan"], ["--wait"]),
    (["worker", "--site", "tyo1", "--temporal", "127.0.0.1:٩٨٧٧"], ["--temporal"]),
    (["sweep", "show", "latest~" + HUGE], ["RUN", "less than or equal to"]),
    # Path("") is "." : an empty path wrote the export into the working folder and checked it as site files.
    (["inventory", "export", "--dir", ""], ["--dir", "empty"]),
    (["inventory", "check", ""], ["empty"]),
    (["db", "restore", ""], ["empty"]),
]


@pytest.mark.parametrize(("args", "words"), ITEM_11 + ITEM_12, ids=[" ".join(a)[:60] for a, _ in ITEM_11 + ITEM_12])
def test_listed_input_is_refused_in_one_line(args, words, cli, fleet, tmp_path, tokyo) -> None:  # type: ignore[no-untyped-def]
    fill = {"folder": _folder(tmp_path), "full": _full(tmp_path), "out": str(tmp_path / "report.html")}
    args = [a.format(**fill) if a.startswith("{") else a for a in args]
    before = dump(fleet)
    refused(cli(*args), *words)
    assert dump(fleet) == before
    assert Path("/dev/full").is_char_device()


def test_date_of_year_one_under_tokyo_is_refused_for_acks_too(cli, fleet, tokyo) -> None:  # type: ignore[no-untyped-def]
    refused(cli("finding", "ack", "1", "--reason", "known", "--until", "0001-01-01"), "--until", "out of range")


def test_in_range_values_still_read(cli, fleet, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The rules refuse only what made no sense: the ids, limits, dates and files operators give still work."""
    assert cli("jobs", "list", "--limit", "9223372036854775807").code == 0
    assert "9223372036854775808" in refused(cli("jobs", "list", "--limit", "9223372036854775808"))
    r = cli("jobs", "show", "9223372036854775807")
    assert r.code == 2 and "9223372036854775807" in r.err  # not found: the id was read
    r = cli("sweep", "show", "latest~2")
    assert r.code == 2 and "latest~2" in r.err  # no such run: the reference was read
    r = cli("db", "backup", str(tmp_path / "b.db"))
    assert r.code == 0, r.err
    r = cli("db", "backup", str(tmp_path / "b.db"), "--force")
    assert r.code == 0, r.err


def test_a_full_disk_while_writing_is_one_line(cli, fleet, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The destination passed every check and the disk filled part-way: one line naming the file, exit 2."""
    from fleetctl.store import backup as bk

    def full(src: Path, dest: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(dest))

    monkeypatch.setattr(bk, "_sqlite_backup", full)
    line = refused(cli("db", "backup", str(tmp_path / "b.db")), "cannot write", "No space left on device")
    assert str(tmp_path) in line
    assert not list(tmp_path.glob("*b.db*"))  # no half-written backup left beside it
