"""The three PATCH content types the Kubernetes API accepts.

- ``application/merge-patch+json``: RFC 7386 (maps merge, ``null`` deletes,
  lists are replaced).
- ``application/json-patch+json``: RFC 6902 (add, remove, replace, move,
  copy, test).
- ``application/strategic-merge-patch+json``: a merge patch where some lists
  merge by a key instead of being replaced (``patchMergeKey`` in the API's Go
  types), with the ``$patch``, ``$setElementOrder/``,
  ``$deleteFromPrimitiveList/`` and ``$retainKeys`` directives
  (k8s.io/apimachinery/pkg/util/strategicpatch). kubectl cordon, taint and
  drain send this kind.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

#: The lists that merge by key in a strategic merge patch, by their path
#: (the patchMergeKey tags of k8s.io/api/core/v1/types.go and meta/v1).
#: A list not named here (``spec.taints`` among them) is replaced whole.
MERGE_KEYS: dict[str, str] = {
    "metadata.ownerReferences": "uid",
    "status.conditions": "type",
    "status.addresses": "type",
    "status.images": "names",
    "spec.containers": "name",
    "spec.initContainers": "name",
    "spec.volumes": "name",
    "spec.tolerations": "key",
    "spec.template.spec.containers": "name",
    "spec.template.spec.volumes": "name",
}


class PatchError(ValueError):
    """A patch the API would refuse (422 or 400)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise PatchError(f"path not found: /{'/'.join(parts)}")
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError) as e:
                raise PatchError(f"path not found: /{'/'.join(parts)}") from e
        else:
            raise PatchError(f"path not found: /{'/'.join(parts)}")
    return cur


def _add(doc: Any, parts: list[str], value: Any, *, replace: bool) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"replace: path not found: /{'/'.join(parts)}")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
            return doc
        try:
            i = int(last)
        except ValueError as e:
            raise PatchError(f"bad list index {last!r}") from e
        if replace:
            if not 0 <= i < len(parent):
                raise PatchError(f"replace: index {i} out of range")
            parent[i] = copy.deepcopy(value)
        else:
            if not 0 <= i <= len(parent):
                raise PatchError(f"add: index {i} out of range")
            parent.insert(i, copy.deepcopy(value))
    else:
        raise PatchError(f"path not found: /{'/'.join(parts)}")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    try:
        if isinstance(parent, dict):
            return parent.pop(last)
        if isinstance(parent, list):
            return parent.pop(int(last))
    except (KeyError, ValueError, IndexError) as e:
        raise PatchError(f"remove: path not found: /{'/'.join(parts)}") from e
    raise PatchError(f"remove: path not found: /{'/'.join(parts)}")


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902; the whole patch applies or none of it."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"bad JSON patch operation: {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind in ("add", "replace"):
            if "value" not in op:
                raise PatchError(f"{kind} without a value")
            doc = _add(doc, parts, op["value"], replace=kind == "replace")
        elif kind == "remove":
            _remove(doc, parts)
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = _remove(doc, src) if kind == "move" else copy.deepcopy(_walk(doc, src))
            doc = _add(doc, parts, value, replace=False)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise PatchError(f"test failed at {op['path']}")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc


def strategic_merge_patch(target: Any, patch: Any, path: str = "") -> Any:
    """A strategic merge patch of ``target`` (a built-in kind's JSON)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys") or k.startswith("$setElementOrder/"):
            continue  # order hints: the stand-in keeps the target's order
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if isinstance(out.get(field), list) and isinstance(v, list):
                out[field] = [x for x in out[field] if x not in v]
            continue
        sub = f"{path}.{k}" if path else k
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            merged = strategic_merge_patch(out.get(k), v, sub)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        elif isinstance(v, list) and sub in MERGE_KEYS and isinstance(out.get(k), list):
            out[k] = _merge_list(out[k], v, MERGE_KEYS[sub], sub)
        else:
            out[k] = copy.deepcopy(v)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_list(current: list[Any], patch: list[Any], key: str, path: str) -> list[Any]:
    out = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"{path}: a strategic merge list item needs its merge key {key!r}")
        idx = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            out[idx] = strategic_merge_patch(out[idx], item, path)
    return out


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply a PATCH body by its Content-Type. Raises PatchError (and ValueError for an unsupported type)."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == MERGE:
        out = merge_patch(target, patch)
    elif ctype == JSON_PATCH:
        out = json_patch(target, patch)
    elif ctype == STRATEGIC:
        out = strategic_merge_patch(target, patch)
    else:
        raise ValueError(ctype)
    if not isinstance(out, dict):
        raise PatchError("the patched object is not an object")
    return out
