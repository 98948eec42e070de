"""Load site files, keeping the line of every key so errors can point at it.

PyYAML's C parser does the parsing; our constructor records, for every
mapping and sequence it builds, the line of each key or item in a side table
keyed by the object's id. A validation error's location path (from pydantic,
or from our own checks) is then walked through the data to find its line.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetctl.errors import InputError
from fleetctl.files import FileRefused, read_capped

_CParser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Loc = tuple[str | int, ...]


@dataclass
class Source:
    """One loaded file: its data and where each piece of it came from.

    ``lines`` maps ``id(container)`` to an array: the container's own line,
    then the line of each of its keys or items, in order. Compact on purpose:
    a 10,000-server file has a million of them.
    """

    path: str
    data: Any
    lines: dict[int, array[int]] = field(default_factory=dict)
    text: str | None = None

    def release(self) -> None:
        """Drop the parsed data once validated; lines are found again on demand.

        Only an error needs a line, and for a 10,000-server file the data and
        its line table are a few hundred megabytes held for nothing.
        """
        self.data = None
        self.lines = {}

    def line_of(self, loc: Loc) -> int | None:
        """The line of the deepest element of ``loc`` that exists in the file."""
        if self.data is None and self.text is not None:
            self.data = _build(self.text, self)
        node = self.data
        table = self.lines.get(id(node))
        line = table[0] if table else None
        for part in loc:
            table = self.lines.get(id(node))
            if table is None:
                break
            if isinstance(node, dict) and part in node:
                line = table[1 + list(node).index(part)]
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                line = table[1 + part]
                node = node[part]
            else:
                break
        return line

    def where(self, loc: Loc) -> str:
        line = self.line_of(loc)
        return f"{self.path}:{line}" if line else self.path


class _Scalars(yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """PyYAML's own rules for plain scalars (YAML 1.1: ints, floats, bools, null)."""

    def __init__(self) -> None:
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


# Aliases share the anchored object (nothing is copied while parsing), but
# whatever walks the data (validation, export) walks every alias again: a
# "billion laughs" document of a few hundred bytes is a billion values to them.
# So the values reached through aliases are counted as they would be expanded,
# and a document is refused once they outnumber both this bound and
# ALIAS_RATIO times the values written in it. Defaults shared by 10,000
# servers (`<<: *defaults`) stay well below it.
ALIAS_LIMIT = 1_000_000
ALIAS_RATIO = 10
_MERGE_TAG = "tag:yaml.org,2002:merge"
# A plain `<<` in a mapping's key position is YAML's merge key; a quoted
# '<<' is the text, and stays a key of its own (which the schema refuses).
_MERGE_KEY = object()

_STR = "tag:yaml.org,2002:str"
_KNOWN = {
    "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", _STR,
}  # fmt: skip


def _build(text: str, source: Source) -> Any:
    """Build the data from the C parser's events, without a node tree.

    PyYAML's loader composes every node (with two marks each) before it
    constructs anything; for a 10,000-server file that costs seconds and
    hundreds of megabytes. Here each event is turned into data at once.
    """
    E = yaml.events
    scalars = _Scalars()
    resolve, lines_tab = scalars.resolve, source.lines
    anchors: dict[str, Any] = {}
    # Each anchor's size once expanded (values in it, itself included); an
    # anchor still open (an alias inside its own node) has none yet.
    sizes: dict[str, int] = {}
    open_anchors: set[str] = set()
    written = 0  # values written in the text
    aliased = 0  # values reached through aliases, counted as expanded
    # Site files repeat the same keys and many values (model names, firmware
    # versions) thousands of times: keep one copy of each short string.
    strings: dict[str, str] = {}
    intern = strings.setdefault
    # Frames: [container, its lines, pending key, key line, start mark, merged keys, expanded size, anchor]
    stack: list[list[Any]] = []
    root: Any = None
    missing = object()

    def where(mark: Any) -> str:
        return f"{source.path}:{mark.line + 1}"

    def merge(frame: list[Any], value: Any, mark: Any) -> None:
        """``<<: *defaults`` or ``<<: [*a, *b]``: keys not already set come from the mapping(s), the first one first."""
        container = frame[0]
        for source_map in value if isinstance(value, list) else [value]:
            if not isinstance(source_map, dict):
                raise InputError("a merge key '<<' takes a mapping or a list of mappings", location=where(mark))
            # A merged key's line is where its value is written (in the anchored mapping).
            source_lines = lines_tab.get(id(source_map))
            for i, (k, v) in enumerate(source_map.items()):
                if k not in container:
                    container[k] = v
                    frame[1].append(source_lines[1 + i] if source_lines is not None else frame[3])
                    frame[5].add(k)

    def add(value: Any, line: int, mark: Any, size: int = 1) -> None:
        nonlocal root
        if not stack:
            root = value
            return
        frame = stack[-1]
        frame[6] += size
        container = frame[0]
        if isinstance(container, list):
            container.append(value)
            frame[1].append(line)
        elif frame[2] is missing:
            try:
                hash(value)
            except TypeError:
                raise InputError("a mapping key must be a plain value", location=where(mark)) from None
            if value in container and value not in frame[5]:
                raise InputError(f"duplicate key {value!r}", location=where(mark))
            frame[2], frame[3] = value, line
        else:
            key = frame[2]
            frame[2] = missing
            if key is _MERGE_KEY:  # YAML merge key
                merge(frame, value, mark)
                return
            if key in frame[5]:  # an explicit key overrides a merged one
                frame[5].discard(key)
                frame[1][1 + list(container).index(key)] = frame[3]
                container[key] = value
                return
            container[key] = value
            frame[1].append(frame[3])

    # Dispatched on the event's exact class (cheaper than isinstance in this
    # loop), which mypy does not narrow on: the fields are read as Any.
    ev: Any
    for ev in yaml.parse(text, Loader=_CParser):
        cls = type(ev)
        if cls is E.ScalarEvent:
            value: Any = ev.value
            if len(value) < 48:
                value = intern(value, value)
            tag = ev.tag
            if tag is None or tag == "!":
                tag = _STR if ev.style or not ev.implicit[0] else resolve(yaml.ScalarNode, value, ev.implicit)
                if tag == _MERGE_TAG and stack and isinstance(stack[-1][0], dict) and stack[-1][2] is missing:
                    value = _MERGE_KEY  # handled in add()
                # Timestamps stay strings (a firmware version like 2024-01-02
                # is a name, not a date).
                if tag not in _KNOWN:
                    tag = _STR
            else:
                if tag.startswith("!!"):
                    tag = "tag:yaml.org,2002:" + tag[2:]
                if tag not in _KNOWN:
                    raise InputError(f"unsupported YAML tag {ev.tag!r}", location=where(ev.start_mark))
            if tag != _STR:
                try:
                    value = scalars.construct_object(yaml.ScalarNode(tag, value), deep=True)
                except (yaml.YAMLError, ValueError) as e:
                    raise InputError(f"{ev.value!r} is not a valid {tag.rsplit(':', 1)[-1]}", location=where(ev.start_mark)) from e
            written += 1
            if ev.anchor:
                anchors[ev.anchor] = value
                sizes[ev.anchor] = 1
            add(value, ev.start_mark.line + 1, ev.start_mark)
        elif cls is E.MappingStartEvent or cls is E.SequenceStartEvent:
            written += 1
            container: Any = {} if cls is E.MappingStartEvent else []
            lines = array("i", (ev.start_mark.line + 1,))
            lines_tab[id(container)] = lines
            if ev.anchor:
                anchors[ev.anchor] = container
                open_anchors.add(ev.anchor)
            stack.append([container, lines, missing, 0, ev.start_mark, set(), 1, ev.anchor])
        elif cls is E.MappingEndEvent or cls is E.SequenceEndEvent:
            frame = stack.pop()
            if frame[7]:
                sizes[frame[7]] = frame[6]
                open_anchors.discard(frame[7])
            add(frame[0], frame[4].line + 1, frame[4], frame[6])
        elif cls is E.AliasEvent:
            name = ev.anchor
            if name not in anchors:
                raise InputError(f"unknown alias *{name}", location=where(ev.start_mark))
            if name in open_anchors:
                raise InputError(f"alias *{name} is inside the node it names (a recursive structure)", location=where(ev.start_mark))
            size = sizes[name]
            aliased += size
            if aliased > ALIAS_LIMIT and aliased > ALIAS_RATIO * written:
                raise InputError(
                    f"aliases expand to more than {ALIAS_LIMIT:,} values (*{name} here); refused, not expanded",
                    location=where(ev.start_mark),
                )
            add(anchors[name], ev.start_mark.line + 1, ev.start_mark, size)
        elif cls is E.DocumentStartEvent and root is not None:
            raise InputError("a site file holds one YAML document", location=where(ev.start_mark))
    return root


# What YAML refuses to read (PyYAML's Reader.NON_PRINTABLE): control characters
# but tab, LF and CR; DEL; C1 controls but NEL; surrogates; U+FFFE/U+FFFF.
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def load_text(text: str, path: str) -> Source:
    # PyYAML reports these with a character offset only: name the line and column.
    bad = _NON_PRINTABLE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        raise InputError(f"control character U+{ord(bad.group()):04X} is not allowed in a site file", location=f"{path}:{line}:{column}")
    source = Source(path=path, data=None, text=text)
    try:
        source.data = _build(text, source)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        loc = f"{path}:{mark.line + 1}" if mark else path
        raise InputError(f"malformed YAML: {e.problem or e.context}", location=loc) from e
    except yaml.YAMLError as e:
        raise InputError(f"malformed YAML: {e}", location=path) from e
    if source.data is None:
        source.data = {}
    if not isinstance(source.data, dict):
        raise InputError("a site file is a mapping with 'models' and/or 'sites'", location=f"{path}:1")
    return source


def site_file_paths(path: Path) -> list[Path]:
    """A file, or every ``*.yaml``/``*.yml``/``*.json`` file below a folder, sorted.

    JSON is YAML to the parser, so `export --dir --output json` reads back.
    """
    try:
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json") and p.is_file())
            if not files:
                raise InputError("no .yaml or .json site files in this folder", location=str(path))
            return files
        if not path.exists():
            raise InputError("no such file or folder", location=str(path))
    except OSError as e:  # a name too long, a folder that cannot be listed
        raise InputError(f"cannot read: {e.strerror or e}", location=str(path)) from e
    return [path]


#: The largest site file read (a site of tens of thousands of servers is tens of MiB at most).
MAX_SITE_FILE_BYTES = 256 * 1024 * 1024


def load_path(path: Path) -> list[Source]:
    sources = []
    for p in site_file_paths(path):
        try:
            raw = read_capped(p, MAX_SITE_FILE_BYTES)
        except FileRefused as e:
            raise InputError(str(e), location=str(p)) from e
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror or e}", location=str(p)) from e
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            # Name the line, as for any other bad input in the file.
            line = raw.count(b"\n", 0, e.start) + 1
            raise InputError(f"not UTF-8 text: byte 0x{raw[e.start]:02x} cannot be decoded", location=f"{p}:{line}") from e
        sources.append(load_text(text, str(p)))
    return sources
