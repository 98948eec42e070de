"""The three distributions declare their licence as an SPDX expression (issue #25, item 16).

``project.license`` as a table (``{ text = "..." }``) makes setuptools 77 and later print a deprecation screen
on every install; a string needs setuptools 77 to build, so the build requirement says so.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECTS = [REPO / "pyproject.toml", REPO / "drivers" / "pyproject.toml", REPO / "lab" / "pyproject.toml"]


@pytest.mark.parametrize("path", PYPROJECTS, ids=["fleetctl", "drivers", "lab"])
def test_the_licence_is_an_spdx_string_and_the_build_can_read_it(path: Path) -> None:
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    assert doc["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in doc["project"].get("classifiers", []))  # refused beside an SPDX licence
    (setuptools,) = [r for r in doc["build-system"]["requires"] if r.startswith("setuptools")]
    m = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools.replace(" ", ""))
    assert m and int(m.group(1)) >= 77, setuptools
