"""What a board must show, as data (each accelerator driver's defaults, or a site's copy), and the rules that read it.

One set of criteria judges a reading wherever it is read: burn-in
(``verdict.evaluate``) and the sweep's host checks (``sweep.host_checks``)
call the same ``Criteria.judge_*`` functions on the same file, the site's copy
included (``--criteria FILE`` or ``$FLEETCTL_BURNIN_CRITERIA``). A limit is
reached *at* its value: ``retired_pages_fail: 63`` fails a board with 63
retired pages (DOMAIN.md: "retired pages >= 63 fail"), ``temp_warn_c: 85``
marks one at 85 C.

The defaults of a board kind are data its driver ships
(:meth:`fleetctl.interfaces.accel.AccelDriver.criteria`, a YAML file beside
the driver): its burn-in levels, its thresholds, the severity of each rule.
``criteria.yaml`` beside this module documents the keys and adds nothing of
its own; a site's copy is laid over the drivers' defaults key by key. A board
kind a driver registers needs no edit here: its levels make it a kind burn-in
serves, its thresholds judge its boards in burn-in and the sweep alike.

Board kinds have one vocabulary (:data:`BOARD_KIND_NAMES`), the inventory's:
site files, the BMC rules, the lab, the criteria and ``fleetctl burnin
--kind`` all say ``mncore2``, ``mncore`` or ``gpu``. Older spellings are read
through :data:`OLD_SPELLINGS` and :func:`burnin_kind`, never guessed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from fleetctl.errors import DriverError, InputError
from fleetctl.files import FileRefused, read_capped
from fleetctl.interfaces.accel import BoardEvent

DEFAULT_FILE = Path(__file__).with_name("criteria.yaml")
ENV = "FLEETCTL_BURNIN_CRITERIA"
LEVELS = ("quick", "standard", "extended")

#: The board kinds the inventory's schema knows (``accelerator_board.kind``, ``hardware_model.board_kind``), as the
#: site files and the BMC's board rules name them: data, so that criteria naming them are read even where no driver
#: is installed. Any kind an accelerator driver registers joins them (:func:`board_kinds`).
BOARD_KIND_NAMES: dict[str, str] = {
    "mncore2": "MN-Core 2 board",
    "mncore": "first-generation MN-Core board",
    "gpu": "GPU",
}
#: The name a board kind's burn-in runs are stored under (``burnin_run.kind``) where it is not the board kind itself:
#: the runs of mncore2 boards were always kept as ``mncore``, and stay so (history, what is due). A kind a driver
#: brings is stored under its own name.
BURNIN_WORKLOADS: dict[str, str] = {"mncore2": "mncore"}
#: Older spellings of a burn-in's board kind, each with what it always selected: ``fleetctl burnin --mncore`` and
#: ``levels.mncore`` in a criteria file ran the MN-Core 2 workload (they never served first-generation boards).
OLD_SPELLINGS: dict[str, str] = {"--mncore": "mncore2", "--gpu": "gpu", "levels.mncore": "mncore2"}
#: Criteria keys renamed, with how an old value is read: ``retired_pages_max: N`` (fail above N) is
#: ``retired_pages_fail: N + 1`` (fail at N + 1 or more), the same boards failing.
RENAMED_KEYS = {"retired_pages_max": ("retired_pages_fail", lambda v: None if v is None else int(v) + 1)}

#: The stored run names that are not a board kind, and the board kinds each stands for (``mncore``: mncore2's runs).
WORKLOAD_BOARDS: dict[str, tuple[str, ...]] = {w: tuple(k for k, v in BURNIN_WORKLOADS.items() if v == w)
                                               for w in dict.fromkeys(BURNIN_WORKLOADS.values())}  # fmt: skip
BOARD_KINDS = WORKLOAD_BOARDS
#: The verdict a criterion gives when the kind's ``severity`` does not name it (the rest: fail), as the shipped drivers'
#: maps give them, so a driver's criteria need name only what it judges otherwise.
DEFAULT_SEVERITY = {"retired_pending": "degraded", "xid_other": "degraded", "diag_warn": "degraded", "power": "degraded",
                    "corrected_errors": "degraded", "throughput": "by_fraction", "temperature": "by_limit", "firmware": "note"}  # fmt: skip

Severity = Literal["fail", "degraded", "note", "by_fraction", "by_limit"]


def board_kinds() -> list[str]:
    """Every board kind of the vocabulary: :data:`BOARD_KIND_NAMES`, and any an accelerator driver registers
    (entry-point group ``fleetctl.accel``, keyed by board kind), so a third kind needs no edit here."""
    from fleetctl.plugins import driver_names

    return list(dict.fromkeys([*BOARD_KIND_NAMES, *driver_names("accel")]))


def unloadable_drivers() -> dict[str, str]:
    """The board kinds whose registered accelerator driver cannot be loaded, and why (their boards get no defaults)."""
    return dict(_drivers()[1])


def _drivers() -> tuple[list[Any], dict[str, str]]:
    """(kind, driver) of every board kind an accelerator driver registers, and the kinds whose driver cannot be loaded.

    A driver that cannot be imported (a broken install, a third party's bug) costs its own kind its defaults, not every
    kind's burn-in and sweep: :func:`burnin_kind` names it when that kind is asked for.
    """
    from fleetctl.plugins import accel_driver, driver_names

    loaded: list[Any] = []
    broken: dict[str, str] = {}
    for kind in driver_names("accel"):
        try:
            loaded.append((kind, accel_driver(kind)))
        except Exception as e:  # noqa: BLE001 - any import error of a plug-in is that kind's, said when it is used
            broken[kind] = f"{type(e).__name__}: {e}"
    return loaded, broken


def driver_defaults() -> dict[str, dict[str, Any]]:
    """The criteria the registered accelerator drivers ship (:meth:`~fleetctl.interfaces.accel.AccelDriver.criteria`):
    each board kind's levels and criteria from the driver registered for that kind, the hardware models' keys from any.

    Raises:
        InputError: a driver's criteria cannot be read (naming its file).
    """
    out: dict[str, dict[str, Any]] = {"levels": {}, "kinds": {}, "models": {}}
    read: dict[type, Any] = {}  # a driver serving several kinds is read once
    for kind, drv in _drivers()[0]:
        if type(drv) not in read:
            try:
                read[type(drv)] = drv.criteria() or {}
            except DriverError as e:
                raise InputError(f"board kind {kind}: {e}", field="--criteria") from e
        data = read[type(drv)]
        for section in ("levels", "kinds"):
            got = (data.get(section) or {}).get(kind)
            if got is not None:
                out[section][kind] = got
        for model, keys in (data.get("models") or {}).items():
            out["models"].setdefault(model, keys)
    return out


def burnable_kinds() -> list[str]:
    """The board kinds burn-in serves: those whose driver gives burn-in levels."""
    return list(driver_defaults()["levels"])


def burnin_workload(kind: str) -> str:
    """The name a board kind's runs are stored under (:data:`BURNIN_WORKLOADS`; a kind a driver brings: its own)."""
    return BURNIN_WORKLOADS.get(kind, kind)


def burnin_kind(spelling: str) -> str:
    """The board kind a burn-in selection means: a board kind, or an older spelling (``--mncore``) of one.

    Raises:
        InputError: not a board kind of the vocabulary, or one without a burn-in (no driver gives it levels).
    """
    kind = OLD_SPELLINGS.get(spelling, spelling)
    known = board_kinds()
    burnable = burnable_kinds()
    if kind not in known:
        raise InputError(f"{spelling!r} is not a board kind: use {', '.join(burnable) or 'none (no accelerator driver installed)'}",
                         field="--kind")  # fmt: skip
    broken = unloadable_drivers()
    if kind in broken:
        raise InputError(f"{kind}: its accelerator driver cannot be loaded ({broken[kind]})", field="--kind")
    if kind not in burnable:
        about = f" ({BOARD_KIND_NAMES[kind]})" if kind in BOARD_KIND_NAMES else ""
        raise InputError(f"{kind}{about}: no burn-in for this kind; burn-in serves {', '.join(burnable) or 'none'}",
                         field="--kind")  # fmt: skip
    return kind


def board_kind_of_run(stored: str) -> str:
    """The board kind a stored run's ``kind`` stands for (``mncore`` is mncore2's; any other: itself)."""
    boards = WORKLOAD_BOARDS.get(stored) or ()
    return boards[0] if len(boards) == 1 else stored


class _Model(BaseModel):
    # No .nan or .inf: a NaN limit compares false with every reading (temp_max_c: .nan never fails a board) and an
    # infinite one is never reached; either switches a check off without saying so (issue #25).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Level(_Model):
    seconds: float = Field(gt=0)
    dcgm_level: int | None = Field(default=None, ge=1, le=4)


@dataclass(frozen=True)
class Judgement:
    """What one rule made of one reading: the criterion, the verdict it gives (fail, degraded, note), why, the figures."""

    criterion: str
    severity: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


_XID = re.compile(r"\bXid\s+(\d+)", re.IGNORECASE)


def xid_code(line: str) -> int | None:
    """The Xid number of a kernel line or of burn-in's ``Xid 79 (during the run): ...``; None if it names none."""
    m = _XID.search(line)
    return int(m.group(1)) if m else None


class Criteria(_Model):
    golden_throughput: float | None = Field(default=None, gt=0)
    unit: str = ""
    pass_fraction: float = Field(default=0.9, gt=0, le=1)
    fail_fraction: float = Field(default=0.6, gt=0, le=1)
    temp_warn_c: float | None = None
    temp_max_c: float | None = None
    power_max_w: float | None = None
    corrected_errors_max: int | None = Field(default=None, ge=0)
    retired_pages_fail: int | None = Field(default=None, ge=1)
    uncorrected_errors_fail: int | None = Field(default=None, ge=1)
    link_judges_generation: bool = True
    xid_critical: tuple[int, ...] | None = None
    severity: dict[str, Severity] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _bounds_agree(self, info: ValidationInfo) -> Criteria:
        """Refuse bounds that contradict each other (a board below fail_fraction passing, a warning above the failure).

        A model's keys are checked alone where the file is read (which kind a model's boards are is the inventory's
        word), and on top of its kind's criteria when a board is judged (:meth:`CriteriaFile.for_board`).
        """
        if isinstance(info.context, dict) and info.context.get("partial"):
            return self
        if self.fail_fraction > self.pass_fraction:
            raise ValueError(f"fail_fraction {self.fail_fraction:g} is above pass_fraction {self.pass_fraction:g} (below"
                             " fail_fraction fails, at pass_fraction or more passes): give fail_fraction <= pass_fraction")  # fmt: skip
        if self.temp_warn_c is not None and self.temp_max_c is not None and self.temp_warn_c > self.temp_max_c:
            raise ValueError(f"temp_warn_c {self.temp_warn_c:g} is above temp_max_c {self.temp_max_c:g}: give temp_warn_c <= temp_max_c")
        return self

    def severity_of(self, criterion: str) -> str:
        return self.severity.get(criterion, DEFAULT_SEVERITY.get(criterion, "fail"))

    # --- the rules: each reading judged the same in burn-in and in the sweep ----------------------------------

    def judge_retired_pages(self, pages: int | None) -> Judgement | None:
        """Retired memory pages (single + double bit): ``retired_pages_fail`` or more fails (DOMAIN.md: >= 63)."""
        if pages is None or self.retired_pages_fail is None or pages < self.retired_pages_fail:
            return None
        return Judgement("memory_retired", self.severity_of("memory_retired"),
                         f"{pages} retired memory pages (fails at {self.retired_pages_fail}): replace the board",
                         {"retired_pages": pages})  # fmt: skip

    def judge_retired_pending(self, pending: bool | None) -> Judgement | None:
        """Pages waiting to be retired (a reset retires them)."""
        if not pending:
            return None
        return Judgement("retired_pending", self.severity_of("retired_pending"),
                         "memory pages pending retirement (a reset retires them)", {"retired_pending": True})  # fmt: skip

    def judge_uncorrected_errors(self, count: int | None) -> Judgement | None:
        """Uncorrected ECC errors now (volatile, since the driver loaded): ``uncorrected_errors_fail`` or more."""
        if count is None or self.uncorrected_errors_fail is None or count < self.uncorrected_errors_fail:
            return None
        return Judgement("uncorrected_errors", self.severity_of("uncorrected_errors"), f"{count} uncorrected ECC errors",
                         {"ecc_uncorrected": count})  # fmt: skip

    def judge_temperature(self, temp_c: float | None) -> Judgement | None:
        """A temperature: at ``temp_warn_c`` or more degraded, at ``temp_max_c`` or more fail (``severity.temperature: by_limit``)."""
        if temp_c is None or self.temp_warn_c is None or temp_c < self.temp_warn_c:
            return None
        sev = "fail" if self.temp_max_c is not None and temp_c >= self.temp_max_c else "degraded"
        if self.severity_of("temperature") != "by_limit":
            sev = self.severity_of("temperature")
        limits = f"warn at {self.temp_warn_c:g} C" + (f", fail at {self.temp_max_c:g} C" if self.temp_max_c is not None else "")
        return Judgement("temperature", sev, f"reached {temp_c:g} C ({limits})", {"max_temp_c": temp_c})

    def judge_link(self, gen: int | None, max_gen: int | None, width: int | None, max_width: int | None,
                   when: str = "") -> Judgement | None:  # fmt: skip
        """A PCIe link below its capability: width always; generation where ``link_judges_generation``.

        A width of 0 (a link that is down) counts as below. NVIDIA GPUs lower their link generation when idle
        (a recorded RTX 4080 SUPER at idle: Gen1 of Gen4, ``tests/data/criteria/SOURCES.md``), so for them only the
        width says a link is degraded.
        """
        narrow = width is not None and max_width is not None and width < max_width
        slow = self.link_judges_generation and gen is not None and max_gen is not None and gen < max_gen
        if not (narrow or slow):
            return None
        at = f" {when}" if when else ""
        return Judgement("link_degraded", self.severity_of("link_degraded"),
                         f"PCIe link{at}: Gen{gen} x{width} of Gen{max_gen} x{max_width}",
                         {"link_gen": gen, "link_width": width, "max_link_gen": max_gen, "max_link_width": max_width})  # fmt: skip

    def judge_xid(self, code: int | None, line: str, critical: bool | None = None) -> Judgement:
        """An event in the kernel log (an NVIDIA Xid, a driver's RAS event): critical (``severity.xid``) when its code is
        one of ``xid_critical``; without that list, when the driver says so (``critical``) or says nothing; one whose
        code cannot be read always. Any other: ``severity.xid_other``. (The criteria keys keep the names they were
        given for Xids, the first such events; they judge any kind's.)"""
        if code is None:
            judged_critical = True
        elif self.xid_critical is not None:
            judged_critical = code in self.xid_critical
        else:
            judged_critical = critical is not False
        criterion = "xid" if judged_critical else "xid_other"
        return Judgement(criterion, self.severity_of(criterion), f"kernel: {line.strip()[:200]}", {"xid": code, "line": line.strip()})

    def judge_event(self, event: BoardEvent) -> Judgement:
        """A board event as :meth:`judge_xid` judges it (its message is the line)."""
        return self.judge_xid(event.code, event.message, event.critical)


class CriteriaFile(_Model):
    levels: dict[str, dict[str, Level]] = Field(default_factory=dict)
    kinds: dict[str, Criteria] = Field(default_factory=dict)
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)
    source: str = ""

    def level(self, kind: str, level: str) -> Level:
        """A level of a board kind's burn-in (``kind`` may be the engine's workload name: ``mncore`` is ``mncore2``'s)."""
        key = kind if kind in self.levels else next((k for k in WORKLOAD_BOARDS.get(kind, ()) if k in self.levels), kind)
        try:
            return self.levels[key][level]
        except KeyError:
            raise InputError(f"{self.source}: no level {level!r} for {key} boards", field="--level") from None

    def for_board(self, board_kind: str, model: str | None) -> Criteria:
        """The criteria of one board: its kind's, with its hardware model's keys on top."""
        base = self.kinds.get(board_kind) or Criteria()
        over = self.models.get(model or "") or {}
        if not over:
            return base
        try:
            return Criteria.model_validate({**base.model_dump(), **over, "severity": {**base.severity, **over.get("severity", {})}})
        except ValidationError as e:
            raise InputError(f"{self.source}: models.{model}: {_message(e)} (on the criteria of {board_kind} boards)",
                             field="--criteria") from e  # fmt: skip


def _message(e: ValidationError) -> str:
    """The first error's message, without pydantic's "Value error, " in front of our own."""
    return str(e.errors()[0]["msg"]).removeprefix("Value error, ")


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing a key given twice in one mapping (the second would silently win).

    A key a merge (``<<: *defaults``) brings may be given again: that is what a merge is for.
    """

    file = ""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
            except TypeError:
                continue  # a key that cannot be a dict key: PyYAML's own error says so below
            if dup:
                raise InputError(f"{self.file}:{key_node.start_mark.line + 1}: duplicate key {key!r}", field="--criteria")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


@dataclass
class _Read:
    """A criteria file as read: its data, and its node tree (for the line of a key)."""

    file: Path
    data: Any
    node: Any

    def line_of(self, loc: tuple[Any, ...]) -> int | None:
        """The line of the deepest element of ``loc`` written in the file (None: nothing of it is)."""
        node, line = self.node, None
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                found = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None)
                if found is None:
                    break
                line, node = found[0].start_mark.line + 1, found[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        return line

    def error(self, loc: tuple[Any, ...], message: str) -> InputError:
        """One line naming the file (and the line, where the key is written in it), the key's path and what is wrong."""
        line = self.line_of(loc)
        where = ".".join(str(p) for p in loc)
        return InputError(f"{self.file}{f':{line}' if line else ''}: {where}: {message}", field="--criteria")


def _read(file: Path) -> _Read:
    """Read a criteria file: UTF-8 YAML, one document, no key twice in a mapping.

    Raises:
        InputError: it cannot be read, is not UTF-8 text (a binary file) or not YAML, or repeats a key.
    """
    try:
        raw = read_capped(file, 1024 * 1024)  # a page of YAML; /dev/zero would be read forever
    except FileRefused as e:
        raise InputError(f"{file}: {e}: a criteria file is YAML", field="--criteria") from e
    except OSError as e:
        raise InputError(f"{file}: cannot read the burn-in criteria: {e.strerror or e}", field="--criteria") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(f"{file}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x}): a criteria file is YAML",
                         field="--criteria") from e  # fmt: skip
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)  # its reader refuses control characters already
        loader.file = str(file)
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f":{mark.line + 1}" if mark else ""
        raise InputError(f"{file}{at}: not valid YAML: {e.problem or e.context}", field="--criteria") from e
    except yaml.YAMLError as e:
        raise InputError(f"{file}: not valid YAML: {str(e).splitlines()[0]}", field="--criteria") from e
    finally:
        if loader is not None:
            loader.dispose()
    return _Read(file, data, node)


def _upgrade(file: Path, where: str, mapping: Any) -> Any:
    """``mapping`` (a kind's or a model's criteria) with renamed keys read as their new names (:data:`RENAMED_KEYS`)."""
    if not isinstance(mapping, dict):
        return mapping
    out = dict(mapping)
    for old, (new, convert) in RENAMED_KEYS.items():
        if old not in out:
            continue
        if new in out:
            raise InputError(f"{file}: {where}: give {new} or the older {old}, not both", field="--criteria")
        try:
            out[new] = convert(out.pop(old))
        except (TypeError, ValueError):
            raise InputError(f"{file}: {where}.{old}: not a number", field="--criteria") from None
    return out


def _upgrade_file(file: Path, data: dict[str, Any]) -> dict[str, Any]:
    """A criteria file's mapping in today's vocabulary: renamed keys, and ``levels.mncore`` as ``levels.mncore2``."""
    data = dict(data)
    for section in ("kinds", "models"):
        if isinstance(data.get(section), dict):
            data[section] = {k: _upgrade(file, f"{section}.{k}", v) for k, v in data[section].items()}
    levels = data.get("levels")
    if isinstance(levels, dict):
        levels = dict(levels)
        for spelling, kind in OLD_SPELLINGS.items():
            old = spelling.removeprefix("levels.")
            if not spelling.startswith("levels.") or old not in levels:
                continue
            if kind in levels:
                raise InputError(f"{file}: levels: give {kind} or its older spelling {old}, not both", field="--criteria")
            levels[kind] = levels.pop(old)
        data["levels"] = levels
    return data


def load(path: str | os.PathLike[str] | None = None) -> CriteriaFile:
    """The criteria from ``path``, ``$FLEETCTL_BURNIN_CRITERIA`` or the bundled file.

    Raises:
        InputError: the file cannot be read, is not YAML, names a board kind
            outside the vocabulary, or has an unknown key or a wrong value
            (named by its path in the file).
    """
    file = Path(path or os.environ.get(ENV) or DEFAULT_FILE)
    read = _read(file)
    data = read.data
    if not isinstance(data, dict):
        raise InputError(f"{file}: expected a mapping (levels, kinds, models)", field="--criteria")
    for section, of in (("levels", "board kind to its levels"), ("kinds", "board kind to its criteria"),
                        ("models", "hardware model to its criteria")):  # fmt: skip
        if data.get(section) is not None and not isinstance(data[section], dict):
            raise read.error((section,), f"expected a mapping of {of}, not {type(data[section]).__name__}")
    data = _upgrade_file(file, data)
    known = board_kinds()
    for section in ("levels", "kinds"):
        unknown = sorted(str(k) for k in (data.get(section) or {}) if k not in known)
        if unknown:
            raise InputError(f"{file}: {section}.{unknown[0]}: not a board kind (the board kinds: {', '.join(known)})",
                             field="--criteria")  # fmt: skip
    # The drivers' defaults, the bundled file's keys on them, then (a site's copy) its keys: a key left out keeps the
    # value below it.
    layers = [driver_defaults()]
    if file != DEFAULT_FILE:
        layers.append(_upgrade_file(DEFAULT_FILE, _read(DEFAULT_FILE).data or {}))
    for base in reversed(layers):
        for key in ("levels", "kinds", "models"):
            merged = dict(base.get(key) or {})
            for k, v in (data.get(key) or {}).items():
                merged[k] = {**merged.get(k, {}), **v} if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
            data[key] = merged
    try:
        out = CriteriaFile.model_validate({**data, "source": str(file)})
    except ValidationError as e:
        raise read.error(tuple(e.errors()[0]["loc"]), _message(e)) from e
    for name, over in out.models.items():  # a model's keys must be valid criteria keys (their bounds: see for_board)
        try:
            Criteria.model_validate({**Criteria().model_dump(), **over}, context={"partial": True})
        except ValidationError as e:
            raise read.error(("models", name, *e.errors()[0]["loc"]), _message(e)) from e
    return out


_loaded: dict[tuple[str, float], CriteriaFile] = {}


def current() -> CriteriaFile:
    """The criteria in force for this process (``$FLEETCTL_BURNIN_CRITERIA`` or the bundled file), read once per file version.

    The sweep's host checks read this, so a site's copy set for burn-in judges the sweep too.

    Raises:
        InputError: as :func:`load`.
    """
    file = Path(os.environ.get(ENV) or DEFAULT_FILE)
    try:
        key = (str(file), file.stat().st_mtime)
    except OSError:
        return load()  # names the file that cannot be read
    if key not in _loaded:
        _loaded.clear()
        _loaded[key] = load()
    return _loaded[key]
