"""Label and field selectors, as the Kubernetes API parses them.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``, ``a in (x,y)``,
``a notin (x,y)``, joined by commas (k8s.io/apimachinery/pkg/labels).
Field selectors: ``path=value``, ``path==value``, ``path!=value`` joined by
commas, over the fields each kind supports (the API answers 400 for any
other field, so does the stand-in).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Requirement = Callable[[dict[str, str]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|!=|=)\s*([A-Za-z0-9._-]*)\s*$")

#: The fields the API lets a client select on, per resource (a subset of
#: pkg/registry/*/strategy.go's field sets: those fleetctl and kubectl use).
FIELDS: dict[str, tuple[str, ...]] = {
    "pods": ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase", "spec.schedulerName"),
    "nodes": ("metadata.name", "spec.unschedulable"),
}
_DEFAULT_FIELDS = ("metadata.name", "metadata.namespace")


class SelectorError(ValueError):
    """A selector the API would refuse with 400 BadRequest."""


def _split_top(text: str) -> list[str]:
    """Split on the commas outside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def _eq(key: str, value: str, *, negate: bool) -> Requirement:
    return lambda labels: (labels.get(key) == value) != negate


def _exists(key: str, *, negate: bool) -> Requirement:
    return lambda labels: (key in labels) != negate


def _in(key: str, values: set[str], *, negate: bool) -> Requirement:
    return lambda labels: (labels.get(key) in values) != negate


def parse_labels(text: str) -> Requirement:
    """A predicate over a label map. Raises SelectorError."""
    reqs: list[Requirement] = []
    for part in _split_top(text or ""):
        m = _EQ_RE.match(part)
        if m:
            key, op, value = m.groups()
            reqs.append(_eq(key, value, negate=op == "!="))
            continue
        m = _SET_RE.match(part)
        if not m:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
        neg, key, op, values = m.groups()
        if op is None:
            reqs.append(_exists(key, negate=bool(neg)))
            continue
        if neg:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
        reqs.append(_in(key, {v.strip() for v in values.split(",") if v.strip()}, negate=op == "notin"))
    return lambda labels: all(r(labels) for r in reqs)


def _field_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for key in path.split("."):
        cur = cur.get(key) if isinstance(cur, dict) else None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


def _field_eq(path: str, value: str, *, negate: bool) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (_field_value(obj, path) == value) != negate


def parse_fields(text: str, resource: str) -> Callable[[dict[str, Any]], bool]:
    """A predicate over an object. Raises SelectorError for a field the resource does not support."""
    allowed = FIELDS.get(resource, _DEFAULT_FIELDS)
    reqs: list[Callable[[dict[str, Any]], bool]] = []
    for part in _split_top(text or ""):
        m = re.match(r"^\s*([A-Za-z0-9._]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise SelectorError(f"invalid selector: {part.strip()!r}; can't understand {part.strip()!r}")
        path, op, value = m.groups()
        if path not in allowed:
            raise SelectorError(f"field label not supported: {path}")
        reqs.append(_field_eq(path, value, negate=op == "!="))
    return lambda o: all(r(o) for r in reqs)


def match_label_selector(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions) against labels.

    An empty selector matches everything (policy/v1 PodDisruptionBudget
    semantics); a missing one matches nothing.
    """
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), set(expr.get("values") or [])
        if op == "In":
            ok = labels.get(key) in values
        elif op == "NotIn":
            ok = labels.get(key) not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            ok = False  # the API refuses an unknown operator when the object is written
        if not ok:
            return False
    return True
