"""Fixtures for the inventory tests (helpers and the BASE site live in invtest_sites.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# --import-mode=importlib puts no test folder on sys.path; the helper module
# has a name of its own so it cannot clash with another folder's helpers.
sys.path.insert(0, str(Path(__file__).parent))

from invtest_sites import BASE


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    """Write a site file into tmp_path/sites (or a named sub-folder); returns its path."""

    def _write(text: str, name: str = "site.yaml", folder: str = "sites") -> Path:
        d = tmp_path / folder
        d.mkdir(parents=True, exist_ok=True)
        p = d / name
        p.write_text(text, encoding="utf-8")
        return p

    return _write


@pytest.fixture
def export(cli):  # type: ignore[no-untyped-def]
    """The whole inventory as YAML, through the CLI."""

    def _export(fmt: str = "yaml") -> str:
        r = cli("inventory", "export", "--output", fmt)
        assert r.code == 0, r.err
        return r.out

    return _export


@pytest.fixture
def base_loaded(db_url, cli, write):  # type: ignore[no-untyped-def]
    """BASE imported into a fresh store on each backend."""
    r = cli("inventory", "import", str(write(BASE, "base.yaml", "base")))
    assert r.code == 0, r.err
    return db_url
