"""A small command grammar with the abbreviation rules of switch CLIs.

Commands are patterns such as ``show interfaces <intf> switchport`` or
``switchport trunk allowed vlan add <vlans>``. Keywords may be abbreviated
to any unique prefix (``sh int st``); an abbreviation that fits two keywords
is ambiguous; a line that stops early is incomplete. Parameters:
``<intf>`` (``Ethernet1``, ``Et1``, ``eth 1``), ``<num>``, ``<vlan>``
(1-4094), ``<vlans>`` (``10,20-30``), ``<word>``, ``<text>`` (the rest of
the line, as typed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OK, INVALID, INCOMPLETE, AMBIGUOUS = "ok", "invalid", "incomplete", "ambiguous"

_INTF_PREFIXES = {"ethernet": "Ethernet", "management": "Management", "port-channel": "Port-Channel", "vlan": "Vlan"}
_INTF_RE = re.compile(r"^([a-z-]+?)(\d+(?:/\d+)*)$", re.IGNORECASE)
_NUM_RE = re.compile(r"^\d+(?:/\d+)*$")


def parse_vlans(text: str) -> list[int] | None:
    """``10,20-22`` -> [10, 20, 21, 22]; None if it is not a VLAN list."""
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m:
            return None
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if not (1 <= a <= b <= 4094):
            return None
        out.update(range(a, b + 1))
    return sorted(out)


def format_vlans(vlans: list[int]) -> str:
    """[10, 20, 21, 22] -> ``10,20-22``."""
    out: list[str] = []
    vs = sorted(set(vlans))
    i = 0
    while i < len(vs):
        j = i
        while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
            j += 1
        out.append(str(vs[i]) if i == j else f"{vs[i]}-{vs[j]}")
        i = j + 1
    return ",".join(out)


def _intf_name(word: str, number: str | None = None) -> str | None:
    if number is None:
        m = _INTF_RE.match(word)
        if not m:
            return None
        word, number = m.group(1), m.group(2)
    w = word.lower()
    for full, canon in _INTF_PREFIXES.items():
        if full.startswith(w) and (w != "e" or full == "ethernet"):
            return f"{canon}{number}"
    return None


@dataclass
class Node:
    keywords: dict[str, Node] = field(default_factory=dict)
    params: list[tuple[str, Node]] = field(default_factory=list)
    handler: Callable[..., Any] | None = None


@dataclass
class Match:
    status: str
    handler: Callable[..., Any] | None = None
    args: list[Any] = field(default_factory=list)
    depth: int = 0  # tokens consumed before the failure
    choices: list[str] = field(default_factory=list)


class Grammar:
    def __init__(self) -> None:
        self.root = Node()

    def add(self, pattern: str, handler: Callable[..., Any]) -> None:
        node = self.root
        for tok in pattern.split():
            if tok.startswith("<"):
                for ptype, child in node.params:
                    if ptype == tok:
                        node = child
                        break
                else:
                    child = Node()
                    node.params.append((tok, child))
                    node = child
            else:
                node = node.keywords.setdefault(tok, Node())
        node.handler = handler

    def match(self, line: str) -> Match:
        toks = [(m.group(0), m.start()) for m in re.finditer(r"\S+", line)]
        return self._walk(self.root, toks, 0, [], line)

    def _walk(self, node: Node, toks: list[tuple[str, int]], i: int, args: list[Any], line: str) -> Match:
        if i == len(toks):
            if node.handler is not None:
                return Match(OK, node.handler, args, i)
            return Match(INCOMPLETE, depth=i)
        word = toks[i][0]
        low = word.lower()
        best = Match(INVALID, depth=i)
        cands = [low] if low in node.keywords else [k for k in node.keywords if k.startswith(low)]
        if len(cands) > 1:
            return Match(AMBIGUOUS, depth=i, choices=sorted(cands))
        if cands:
            r = self._walk(node.keywords[cands[0]], toks, i + 1, args, line)
            if r.status == OK:
                return r
            best = r
        for ptype, child in node.params:
            for value, used in self._param(ptype, toks, i, line):
                r = self._walk(child, toks, i + used, [*args, value], line)
                if r.status == OK:
                    return r
                if r.depth > best.depth or (best.status == INVALID and r.depth == best.depth):
                    best = r
        return best

    @staticmethod
    def _param(ptype: str, toks: list[tuple[str, int]], i: int, line: str) -> list[tuple[Any, int]]:
        word = toks[i][0]
        if ptype == "<text>":
            return [(line[toks[i][1]:].rstrip(), len(toks) - i)]
        if ptype == "<word>":
            return [(word, 1)]
        if ptype == "<num>":
            return [(int(word), 1)] if word.isdigit() else []
        if ptype == "<vlan>":
            return [(int(word), 1)] if word.isdigit() and 1 <= int(word) <= 4094 else []
        if ptype == "<vlans>":
            v = parse_vlans(word)
            return [(v, 1)] if v else []
        if ptype == "<intf>":
            out = []
            name = _intf_name(word)
            if name:
                out.append((name, 1))
            if i + 1 < len(toks) and word.isalpha() and _NUM_RE.match(toks[i + 1][0]):
                name = _intf_name(word, toks[i + 1][0])
                if name:
                    out.append((name, 2))
            return out
        raise ValueError(f"unknown parameter type {ptype}")
