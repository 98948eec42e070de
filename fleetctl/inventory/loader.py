"""Load site files, keeping the line of every key so errors can point at it.

PyYAML's C parser does the parsing; our constructor records, for every
mapping and sequence it builds, the line of each key or item in a side table
keyed by the object's id. A validation error's location path (from pydantic,
or from our own checks) is then walked through the data to find its line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetctl.errors import InputError

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Loc = tuple[str | int, ...]


class _LineLoader(_Base):  # type: ignore[misc,valid-type]
    pass


@dataclass
class Source:
    """One loaded file: its data and where each piece of it came from."""

    path: str
    data: Any
    lines: dict[int, dict[Any, int]] = field(default_factory=dict)
    start: dict[int, int] = field(default_factory=dict)

    def line_of(self, loc: Loc) -> int | None:
        """The line of the deepest element of ``loc`` that exists in the file."""
        node = self.data
        line = self.start.get(id(node))
        for part in loc:
            table = self.lines.get(id(node))
            if table is None:
                break
            if isinstance(node, dict) and part in node:
                line = table.get(part, line)
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                line = table.get(part, line)
                node = node[part]
            else:
                break
        return line

    def where(self, loc: Loc) -> str:
        line = self.line_of(loc)
        return f"{self.path}:{line}" if line else self.path


def _make_loader(source: Source) -> type:
    lines, start = source.lines, source.start

    class Loader(_LineLoader):
        def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
            if not isinstance(node, yaml.MappingNode):
                return super().construct_mapping(node, deep=deep)
            self.flatten_mapping(node)
            mapping: dict[Any, Any] = {}
            table: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    raise InputError(
                        "a mapping key must be a plain value", location=f"{source.path}:{key_node.start_mark.line + 1}"
                    ) from None
                if key in mapping:
                    raise InputError(
                        f"duplicate key {key!r}", location=f"{source.path}:{key_node.start_mark.line + 1}"
                    )
                mapping[key] = self.construct_object(value_node, deep=True)
                table[key] = key_node.start_mark.line + 1
            lines[id(mapping)] = table
            start[id(mapping)] = node.start_mark.line + 1
            return mapping

        def construct_sequence(self, node, deep=False):  # type: ignore[no-untyped-def]
            items = [self.construct_object(child, deep=True) for child in node.value]
            lines[id(items)] = {i: child.start_mark.line + 1 for i, child in enumerate(node.value)}
            start[id(items)] = node.start_mark.line + 1
            return items

    Loader.add_constructor("tag:yaml.org,2002:map", lambda loader, node: loader.construct_mapping(node))
    Loader.add_constructor("tag:yaml.org,2002:seq", lambda loader, node: loader.construct_sequence(node))
    # Timestamps stay strings: a firmware version like 2024-01-02 is a name, not a date.
    Loader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node))
    return Loader


def load_text(text: str, path: str) -> Source:
    source = Source(path=path, data=None)
    try:
        source.data = yaml.load(text, Loader=_make_loader(source))  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}:{mark.line + 1}" if mark else path
        raise InputError(f"malformed YAML: {e.problem or e.context}", location=where) from e
    except yaml.YAMLError as e:
        raise InputError(f"malformed YAML: {e}", location=path) from e
    if source.data is None:
        source.data = {}
    if not isinstance(source.data, dict):
        raise InputError("a site file is a mapping with 'models' and/or 'sites'", location=f"{path}:1")
    return source


def site_file_paths(path: Path) -> list[Path]:
    """A file, or every ``*.yaml``/``*.yml`` file below a folder, sorted."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        if not files:
            raise InputError("no .yaml site files in this folder", location=str(path))
        return files
    if not path.exists():
        raise InputError("no such file or folder", location=str(path))
    return [path]


def load_path(path: Path) -> list[Source]:
    sources = []
    for p in site_file_paths(path):
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read: {e}", location=str(p)) from e
        sources.append(load_text(text, str(p)))
    return sources
