"""What the scheduler is told after a sweep, as data: the policy (docs/kubernetes.md, "Verdicts the scheduler sees").

A policy says which findings make a node unfit (a ``NoSchedule`` taint), the
node condition every swept node carries, how much of a pool one sweep may
taint before the circuit breaker holds every new taint back, and which label
keys fleetctl owns. The default is :data:`DEFAULT_POLICY`; a site's own is a
YAML file given by ``--policy FILE`` or ``$FLEETCTL_K8S_POLICY``, validated
with extra keys forbidden: a bad key is one line naming the file, its line and
the key (exit 2), before anything is read from or written to a cluster.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fleetctl.errors import InputError
from fleetctl.files import FileRefused, read_capped

#: The variable naming a policy file when ``--policy`` is not given.
ENV = "FLEETCTL_K8S_POLICY"

#: K3's drain taint (fleetctl.k8s.maintenance): a policy may never name it, the verdicts never touch it.
MAINTENANCE_TAINT = "fleetctl.io/maintenance"

# The API's rules: a condition type is a CamelCase word (a qualified name, in practice CamelCase, as the kubelet's
# and Node Problem Detector's are); a taint or label key is an optional DNS-subdomain prefix and a name of at most 63.
_CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE = re.compile(rf"^({_PREFIX}/)?{_NAME}$")


def qualified_name(key: str) -> bool:
    """A label or taint key the API accepts: an optional DNS-subdomain prefix of at most 253 and /, a name of at most 63."""
    prefix, sep, name = key.rpartition("/")
    return bool(_KEY_RE.match(key)) and len(name) <= 63 and (not sep or len(prefix) <= 253)

#: The default policy: every key a policy file may set, with its value.
#: NOTE: the unfit checks are the ones that say a board cannot run a job (missing, failing, lost from the OS or the
#: device plugin, uncorrectable memory errors): a BMC that does not answer or a warm fan is no reason to stop jobs.
DEFAULT_POLICY: dict[str, Any] = {
    "condition": "FleetctlHealthy",
    "unhealthy": ["critical"],
    "taint": "fleetctl.io/unfit",
    "unfit": [
        {"check": "accel.present", "status": ["critical"]},
        {"check": "accel.health", "status": ["critical"]},
        {"check": "accel.host_boards", "status": ["critical"]},
        {"check": "gpu.memory", "status": ["critical"]},
        {"check": "gpu.xid", "status": ["critical"]},
        {"check": "k8s.accelerators", "status": ["critical"]},
    ],
    "breaker": {"pool": "rack", "share": 0.1, "at_least": 1},
    "labels": {"prefix": "fleetctl.io/", "zone": True},
}

Severity = Literal["warning", "unknown", "critical"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UnfitRule(_Strict):
    """Findings of this check (a name, or a pattern such as ``gpu.*``) at one of these statuses make a node unfit."""

    check: str = Field(min_length=1)
    status: tuple[Severity, ...] = ("critical",)


class Breaker(_Strict):
    """One sweep may taint at most ``max(at_least, floor(share x pool size))`` nodes of a pool, or it taints none.

    ``pool``: ``rack`` (the inventory's rack) or ``label:KEY`` (the nodes sharing a value of that node label, e.g.
    ``label:node.kubernetes.io/instance-type`` or a node pool's label).
    """

    pool: str = "rack"
    share: float = Field(0.1, ge=0.0, le=1.0)
    at_least: int = Field(1, ge=0)

    @field_validator("pool")
    @classmethod
    def _pool(cls, v: str) -> str:
        if v == "rack":
            return v
        kind, sep, key = v.partition(":")
        if kind != "label" or not sep or not qualified_name(key):
            raise ValueError(f"{v!r}: use rack, or label:KEY with a node label key")
        return v

    @property
    def label(self) -> str | None:
        """The node label key naming the pools; None: the rack."""
        return self.pool.partition(":")[2] or None

    def allowed(self, size: int) -> int:
        """How many nodes of a pool of ``size`` may carry the unfit taint at once."""
        return max(self.at_least, math.floor(self.share * size + 1e-9))


class Labels(_Strict):
    """The label keys fleetctl owns: every key under ``prefix``, and ``topology.kubernetes.io/zone`` with ``zone``."""

    prefix: str = "fleetctl.io/"
    zone: bool = True

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not v.endswith("/") or not re.fullmatch(_PREFIX, v[:-1]) or len(v) > 254:
            raise ValueError(f"{v!r}: a DNS subdomain followed by / (fleetctl.io/)")
        if v[:-1] in ("kubernetes.io", "k8s.io") or v[:-1].endswith((".kubernetes.io", ".k8s.io")):
            raise ValueError(f"{v!r}: the kubernetes.io and k8s.io prefixes are Kubernetes' own")
        return v


class Policy(_Strict):
    """The policy in force (``source``: the file it was read from, or ``default``)."""

    condition: str = DEFAULT_POLICY["condition"]
    #: An open (not acknowledged) finding at one of these statuses sets the condition False (and any unfit finding does).
    unhealthy: tuple[Severity, ...] = ("critical",)
    taint: str = DEFAULT_POLICY["taint"]
    unfit: tuple[UnfitRule, ...] = tuple(UnfitRule(**r) for r in DEFAULT_POLICY["unfit"])
    breaker: Breaker = Breaker()
    labels: Labels = Labels()
    source: str = "default"

    @field_validator("condition")
    @classmethod
    def _condition(cls, v: str) -> str:
        if not _CAMEL.match(v):
            raise ValueError(f"{v!r}: a condition type is one CamelCase word (FleetctlHealthy)")
        if v in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"):
            raise ValueError(f"{v!r} is the kubelet's own condition")
        return v

    @field_validator("taint")
    @classmethod
    def _taint(cls, v: str) -> str:
        if not qualified_name(v):
            raise ValueError(f"{v!r}: not a taint key (an optional DNS prefix, /, a name of at most 63 characters)")
        if v == MAINTENANCE_TAINT:
            raise ValueError(f"{v!r} is the drain's taint; the verdicts need a key of their own")
        return v

    def unfit_rule(self, check: str, status: str) -> bool:
        """Does a finding of ``check`` at ``status`` make its node unfit?"""
        return any(status in r.status and fnmatch.fnmatchcase(check, r.check) for r in self.unfit)

    def owns(self, key: str) -> bool:
        """Is this label key fleetctl's (``k8s sync`` may add, change and remove it)?"""
        return key.startswith(self.labels.prefix) or (self.labels.zone and key == ZONE)


#: The well-known zone label (kubernetes.io's topology labels): fleetctl sets it to the server's site.
ZONE = "topology.kubernetes.io/zone"


#: The keys of each part of a policy file, for the message naming a key that is none of them.
_KEYS: dict[tuple[str, ...], str] = {
    (): "condition, unhealthy, taint, unfit, breaker, labels",
    ("unfit", "*"): "check, status",
    ("breaker",): "pool, share, at_least",
    ("labels",): "prefix, zone",
}


def _message(e: ValidationError) -> tuple[tuple[Any, ...], str]:
    err = e.errors()[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        section = tuple("*" if isinstance(p, int) else p for p in err["loc"][:-1])
        keys = _KEYS.get(section, _KEYS[()])
        msg = f"not a policy key (here: {keys}; docs/kubernetes.md)"
    return tuple(err["loc"]), msg


#: A policy is a page of YAML; anything larger is not one (and is never read whole).
MAX_POLICY_BYTES = 1024 * 1024


def load(path: str | os.PathLike[str] | None = None) -> Policy:
    """The policy from ``path``, else ``$FLEETCTL_K8S_POLICY``, else the default.

    Raises:
        InputError: (exit 2) the file cannot be read, is not a YAML mapping, or has an unknown key or a bad value:
            one line naming the file, the line and the key.
    """
    raw_path = path if path is not None else (os.environ.get(ENV, "").strip() or None)
    if raw_path is None:
        return Policy()
    file = Path(raw_path)
    if str(raw_path) == "":
        raise InputError("an empty path is no policy file", field="--policy")
    try:
        raw = read_capped(file, MAX_POLICY_BYTES)  # /dev/full or /dev/zero given as the policy would be read forever
    except FileRefused as e:
        raise InputError(f"{file}: {e}: a policy file is YAML", field="--policy") from e
    except OSError as e:
        raise InputError(f"{file}: cannot read the policy: {e.strerror or e}", field="--policy") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(f"{file}:{line}: not UTF-8 text: a policy file is YAML", field="--policy") from e
    return parse(text, str(file))


def parse(text: str, name: str) -> Policy:
    """A policy from its YAML text (``name``: the file, for messages). Raises InputError as :func:`load`."""
    from fleetctl.inventory.loader import load_text

    try:
        source = load_text(text, name)  # the site files' loader: it keeps every key's line
    except InputError as e:
        msg = str(e)
        if "a site file is a mapping" in msg:
            msg = f"{name}:1: a policy file is a mapping (condition, unhealthy, taint, unfit, breaker, labels)"
        raise InputError(msg, field="--policy") from e
    data = source.data
    if not isinstance(data, Mapping):
        raise InputError(f"{name}:1: a policy file is a mapping (condition, unhealthy, taint, unfit, breaker, labels)", field="--policy")
    try:
        policy = Policy.model_validate(data)
        if "source" in data:  # the loader's own field, not a file's key
            raise ValidationError.from_exception_data("Policy", [{"type": "extra_forbidden", "loc": ("source",), "input": data["source"]}])
        return policy.model_copy(update={"source": name})
    except ValidationError as e:
        loc, msg = _message(e)
        where = ".".join(str(p) for p in loc)
        raise InputError(f"{source.where(loc)}: {where}: {msg}", field="--policy") from e
