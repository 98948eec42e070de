"""Burn-in criteria and levels as data (``criteria.yaml`` beside this module, or a site's copy)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetctl.errors import InputError

DEFAULT_FILE = Path(__file__).with_name("criteria.yaml")
ENV = "FLEETCTL_BURNIN_CRITERIA"
KINDS = ("mncore", "gpu")  # what --mncore / --gpu select
LEVELS = ("quick", "standard", "extended")
BOARD_KINDS = {"mncore": ("mncore2", "mncore"), "gpu": ("gpu",)}

Severity = Literal["fail", "degraded", "note", "by_fraction", "by_limit"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Level(_Model):
    seconds: float = Field(gt=0)
    dcgm_level: int | None = Field(default=None, ge=1, le=4)


class Criteria(_Model):
    golden_throughput: float | None = Field(default=None, gt=0)
    unit: str = ""
    pass_fraction: float = Field(default=0.9, gt=0, le=1)
    fail_fraction: float = Field(default=0.6, gt=0, le=1)
    temp_warn_c: float | None = None
    temp_max_c: float | None = None
    power_max_w: float | None = None
    corrected_errors_max: int | None = Field(default=None, ge=0)
    retired_pages_max: int | None = Field(default=None, ge=0)
    severity: dict[str, Severity] = Field(default_factory=dict)

    def severity_of(self, criterion: str) -> str:
        return self.severity.get(criterion, "fail")


class CriteriaFile(_Model):
    levels: dict[str, dict[str, Level]] = Field(default_factory=dict)
    kinds: dict[str, Criteria] = Field(default_factory=dict)
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)
    source: str = ""

    def level(self, kind: str, level: str) -> Level:
        try:
            return self.levels[kind][level]
        except KeyError:
            raise InputError(f"{self.source}: no level {level!r} for {kind} boards", field="--level") from None

    def for_board(self, board_kind: str, model: str | None) -> Criteria:
        """The criteria of one board: its kind's, with its hardware model's keys on top."""
        base = self.kinds.get(board_kind) or Criteria()
        over = self.models.get(model or "") or {}
        if not over:
            return base
        return Criteria.model_validate({**base.model_dump(), **over, "severity": {**base.severity, **over.get("severity", {})}})


def load(path: str | os.PathLike[str] | None = None) -> CriteriaFile:
    """The criteria from ``path``, ``$FLEETCTL_BURNIN_CRITERIA`` or the bundled file.

    Raises:
        InputError: the file cannot be read, is not YAML, or has an unknown
            key or a wrong value (named by its path in the file).
    """
    import yaml

    file = Path(path or os.environ.get(ENV) or DEFAULT_FILE)
    try:
        data = yaml.safe_load(file.read_text())
    except OSError as e:
        raise InputError(f"{file}: cannot read the burn-in criteria: {e.strerror or e}", field="--criteria") from e
    except yaml.YAMLError as e:
        raise InputError(f"{file}: not valid YAML: {str(e).splitlines()[0]}", field="--criteria") from e
    if not isinstance(data, dict):
        raise InputError(f"{file}: expected a mapping (levels, kinds, models)", field="--criteria")
    if file != DEFAULT_FILE:  # a site's copy: keys it leaves out keep the bundled values
        base = yaml.safe_load(DEFAULT_FILE.read_text())
        for key in ("levels", "kinds", "models"):
            merged = dict(base.get(key) or {})
            for k, v in (data.get(key) or {}).items():
                merged[k] = {**merged.get(k, {}), **v} if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
            data[key] = merged
    try:
        out = CriteriaFile.model_validate({**data, "source": str(file)})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{file}: {where}: {first['msg']}", field="--criteria") from e
    for name, over in out.models.items():  # a model's keys must make valid criteria on top of any kind
        try:
            Criteria.model_validate({**Criteria().model_dump(), **over})
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(f"{file}: models.{name}.{where}: {first['msg']}", field="--criteria") from e
    return out
