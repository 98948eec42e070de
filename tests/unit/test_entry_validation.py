"""Issue #13: bad values are refused where they enter (options, environment, site files).

Each test asserts exit 2, one line naming the option, variable or file:line,
and, for the inventory, that nothing was stored.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "inventory"))

from invtest_sites import BASE, line_of, replace_once


def _one_line_error(r) -> str:  # type: ignore[no-untyped-def]
    assert r.code == 2, (r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


@pytest.fixture
def loaded(tmp_path, cli):  # type: ignore[no-untyped-def]
    """BASE imported into the test's SQLite store; returns a function giving the export."""
    base = tmp_path / "base.yaml"
    base.write_text(BASE, encoding="utf-8")
    assert cli("inventory", "import", str(base)).code == 0

    def export() -> str:
        r = cli("inventory", "export")
        assert r.code == 0, r.err
        return str(r.out)

    return export


def _import(tmp_path, cli, text: str, name: str = "bad.yaml"):  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path, cli("inventory", "import", str(path))


# -- site files: control characters ------------------------------------------


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f"], ids=["nul", "bel", "esc", "del"])
def test_control_character_names_file_line_and_column(tmp_path, cli, loaded, char):
    before = loaded()
    text = replace_once(BASE, "      serial: SER-2\n", f"      serial: SER{char}-2\n")
    path, r = _import(tmp_path, cli, text)
    err = _one_line_error(r)
    line = line_of(text, f"serial: SER{char}")
    assert f"{path}:{line}:18: control character U+{ord(char):04X}" in err, err
    assert loaded() == before
