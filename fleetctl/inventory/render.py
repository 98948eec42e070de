"""Write an inventory as site files: YAML (the format people edit) or JSON.

The output is deterministic (sorted by natural name order, keys in schema
order), so export -> import into an empty store -> export is byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from fleetctl.inventory.schema import SiteFile

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _FlowList(list[Any]):
    pass


class _FlowDict(dict[Any, Any]):
    pass


class _SiteDumper(_Dumper):  # type: ignore[misc,valid-type]
    pass


_SiteDumper.add_representer(_FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_SiteDumper.add_representer(_FlowDict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=True))
_SiteDumper.add_representer(dict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=False))


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _style(value: Any, in_list: bool = False) -> Any:
    """Lists of scalars and small flat list items in flow style; the rest block."""
    if isinstance(value, dict):
        out = {k: _style(v) for k, v in value.items()}
        flat = all(_scalar(v) or isinstance(v, _FlowList) for v in out.values())
        return _FlowDict(out) if in_list and flat and len(out) <= 8 else out
    if isinstance(value, list):
        if all(_scalar(v) for v in value):
            return _FlowList(value)
        return [_style(v, in_list=True) for v in value]
    return value


def to_document(inv: SiteFile) -> dict[str, Any]:
    data = inv.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
    for model in data.get("models", []):
        model.setdefault("height", 1)  # a device's size is worth reading even when 1U
    return data


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.dump(_style(data), Dumper=_SiteDumper, sort_keys=False, allow_unicode=True, width=120)


def dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_folder(inv: SiteFile, folder: Path, fmt: str = "yaml") -> list[Path]:
    """One file for the models and one per site."""
    folder.mkdir(parents=True, exist_ok=True)
    dump = dump_yaml if fmt == "yaml" else dump_json
    ext = "yaml" if fmt == "yaml" else "json"
    data = to_document(inv)
    written = []
    if data.get("models") or data.get("bios_profiles"):
        p = folder / f"models.{ext}"
        head = {k: data[k] for k in ("bios_profiles", "models") if data.get(k)}
        p.write_text(dump(head), encoding="utf-8")
        written.append(p)
    for site in data.get("sites", []):
        p = folder / f"site-{site['name']}.{ext}"
        p.write_text(dump({"sites": [site]}), encoding="utf-8")
        written.append(p)
    return written
