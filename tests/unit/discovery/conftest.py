"""Fixtures of the discovery tests; the servers themselves are in discovery_servers.py (a name no other test folder uses)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_here = str(Path(__file__).resolve().parent)
if _here not in sys.path:
    sys.path.insert(0, _here)

from discovery_servers import ServiceRoots, make_cert  # noqa: E402


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path, str]:
    return make_cert(tmp_path)


@pytest.fixture
def roots(tls_files: tuple[Path, Path, str]) -> Iterator[ServiceRoots]:
    """An unstarted ServiceRoots; the test sets behaviours and calls start(addresses)."""
    cert, key, fp = tls_files
    srv = ServiceRoots(cert, key, fp)
    yield srv
    if getattr(srv, "_thread", None) is not None:
        srv.stop()
