"""No ANSI escape codes where there is no terminal, and none under NO_COLOR (issue #25, item 16).

`make demo > log` carried bold codes (the demo's own headings), and rich's own
NO_COLOR handling drops colours but keeps bold. A pseudo-terminal shows the
styling is there for a terminal, so the NO_COLOR case is not vacuous.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FLEETCTL = str(Path(sys.executable).with_name("fleetctl"))
ESC = "\x1b["


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "PY_COLORS")}
    return {**env, "COLUMNS": "200", **extra}


def _in_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """What ``args`` writes to a pseudo-terminal (stdout and stderr both)."""
    main, other = pty.openpty()
    try:
        proc = subprocess.Popen(args, stdout=other, stderr=other, stdin=subprocess.DEVNULL, env=env)
    finally:
        os.close(other)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the terminal's other end closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main)
        proc.wait()
    return b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The example site in a database of this module's own (one import for every test here): its FLEETCTL_DB."""
    folder = tmp_path_factory.mktemp("noansi")
    db = str(folder / "fleet.db")
    done = subprocess.run([FLEETCTL, "inventory", "import", str(REPO / "inventory")],
                          env=_env(FLEETCTL_DB=db, FLEETCTL_DATA_DIR=str(folder / "data")), capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.parametrize("args", [["site", "list"], ["rack", "show", "rack-12"], ["server", "show", "nosuch"]])
def test_a_pipe_gets_no_escape_codes(imported: str, args: list[str]) -> None:
    done = subprocess.run([FLEETCTL, *args], env=_env(FLEETCTL_DB=imported), capture_output=True, text=True)
    assert done.stdout or done.stderr
    assert ESC not in done.stdout and ESC not in done.stderr, (done.stdout[:300], done.stderr[:300])


def test_a_terminal_gets_styling_and_no_color_takes_it_away(imported: str) -> None:
    styled = _in_a_terminal([FLEETCTL, "site", "list"], _env(FLEETCTL_DB=imported))
    assert "tyo1" in styled and ESC in styled  # the table's bold header: a terminal is styled
    plain = _in_a_terminal([FLEETCTL, "site", "list"], _env(FLEETCTL_DB=imported, NO_COLOR="1"))
    assert "tyo1" in plain
    assert ESC not in plain, plain[:300]


def test_the_demos_headings_are_plain_into_a_file(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetctl import demo

    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    demo.step("1. A heading")  # captured: not a terminal, as `make demo > log`
    out = capsys.readouterr().out
    assert "== 1. A heading" in out and ESC not in out and "\x1b" not in out


def test_use_color_reads_the_stream_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetctl.term import use_color

    class Tty:
        def isatty(self) -> bool:
            return True

    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    assert use_color(Tty()) is True
    assert use_color(object()) is False  # no isatty: not a terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert use_color(object()) is True
    monkeypatch.setenv("NO_COLOR", "1")  # wins over FORCE_COLOR
    assert use_color(Tty()) is False
