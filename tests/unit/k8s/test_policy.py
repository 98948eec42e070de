"""The Kubernetes policy as data (#22 items 4, 5): the default, a site's file, and every bad file as one line with its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from fleetctl.errors import InputError
from fleetctl.k8s.policy import DEFAULT_POLICY, ENV, Policy, load


def test_the_default_policy() -> None:
    p = load(None)
    assert p == Policy() and p.source == "default"
    assert (p.condition, p.taint, p.breaker.pool, p.breaker.share) == ("FleetctlHealthy", "fleetctl.io/unfit", "rack", 0.1)
    # Unfit: a board missing or failing, uncorrectable memory errors; not a BMC that does not answer, nor a warning.
    assert p.unfit_rule("accel.present", "critical") and p.unfit_rule("gpu.memory", "critical") and p.unfit_rule("accel.health", "critical")
    assert not p.unfit_rule("bmc.reachable", "critical") and not p.unfit_rule("gpu.memory", "warning")
    assert p.owns("fleetctl.io/rack") and p.owns("topology.kubernetes.io/zone") and not p.owns("topology.kubernetes.io/region")
    assert not p.owns("example.com/fleetctl.io/rack")
    # Every key the default names is a key a file may set.
    assert Policy.model_validate(DEFAULT_POLICY) == p


@pytest.mark.parametrize(("size", "allowed"), [(0, 1), (4, 1), (10, 1), (19, 1), (20, 2), (100, 10), (1000, 100)])
def test_the_breaker_s_bound(size: int, allowed: int) -> None:
    assert Policy().breaker.allowed(size) == allowed


def test_a_site_s_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text("unfit:\n- {check: 'gpu.*', status: [critical, warning]}\n"
                 "breaker: {pool: 'label:example.com/pool', share: 0.25, at_least: 0}\n"
                 "labels: {prefix: example.org/, zone: false}\n")  # fmt: skip
    p = load(f)
    assert p.source == str(f) and p.unfit_rule("gpu.xid", "warning") and not p.unfit_rule("accel.present", "critical")
    assert p.breaker.label == "example.com/pool" and p.breaker.allowed(4) == 1 and p.breaker.allowed(3) == 0
    assert p.owns("example.org/rack") and not p.owns("fleetctl.io/rack") and not p.owns("topology.kubernetes.io/zone")
    monkeypatch.setenv(ENV, str(f))
    assert load(None) == p  # the variable names it when --policy is not given


BAD = [
    ("shares", "breaker:\n  pool: rack\n  shares: 0.5\n", 3, "breaker.shares: not a policy key"),
    ("top", "condition: FleetctlHealthy\ntaints: x\n", 2, "taints: not a policy key"),
    ("source", "source: mine\n", 1, "source: not a policy key"),
    ("share", "breaker:\n  share: 2\n", 2, "breaker.share: Input should be less than or equal to 1"),
    ("ready", "condition: Ready\n", 1, "condition: 'Ready' is the kubelet's own condition"),
    ("camel", "condition: fleetctl healthy\n", 1, "condition: 'fleetctl healthy': a condition type is one CamelCase word"),
    ("maint", "taint: fleetctl.io/maintenance\n", 1, "the drain's taint"),
    ("pool", "breaker: {pool: switch}\n", 1, "breaker.pool: 'switch': use rack, or label:KEY"),
    ("status", "unfit:\n- check: psu\n  status: [fatal]\n", 3, "unfit.0.status.0"),
    ("prefix", "labels:\n  prefix: kubernetes.io/\n", 2, "Kubernetes' own"),
    ("list", "- condition: X\n", 1, "a policy file is a mapping"),
    ("yaml", "breaker: [\n", 2, "malformed YAML"),
]


@pytest.mark.parametrize(("case", "text", "line", "expected"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_is_one_line_naming_the_file_line_and_key(tmp_path: Path, case: str, text: str, line: int, expected: str) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as e:
        load(f)
    msg = str(e.value)
    assert e.value.exit_code == 2 and "\n" not in msg, msg
    assert f"{f}:{line}" in msg and expected in msg, msg


@pytest.mark.parametrize("case", ["missing", "binary", "folder"])
def test_an_unreadable_file_is_one_line(tmp_path: Path, case: str) -> None:
    f = tmp_path / "policy.yaml"
    if case == "binary":
        f.write_bytes(b"condition: A\n\xff\xfe\n")
    elif case == "folder":
        f.mkdir()
    with pytest.raises(InputError) as e:
        load(f)
    assert e.value.exit_code == 2 and "\n" not in str(e.value) and str(f) in str(e.value)


API_CASES = json.loads((Path(__file__).resolve().parents[2] / "data" / "k8s" / "labels" / "apimachinery-validation-cases.json").read_text())


@pytest.mark.parametrize("key", API_CASES["qualified_name"]["valid"])
def test_a_key_the_api_takes_is_a_taint_and_a_pool_label(key: str) -> None:
    p = Policy.model_validate({"taint": key, "breaker": {"pool": f"label:{key}"}})
    assert p.taint == key and p.breaker.label == key


@pytest.mark.parametrize("key", API_CASES["qualified_name"]["invalid"])
def test_a_key_the_api_refuses_is_refused(key: str) -> None:
    with pytest.raises(ValidationError):
        Policy.model_validate({"taint": key})
    with pytest.raises(ValidationError):
        Policy.model_validate({"breaker": {"pool": f"label:{key}"}})


def test_a_device_or_a_huge_file_is_no_policy_and_is_never_read_whole(tmp_path: Path) -> None:
    from fleetctl.k8s.policy import MAX_POLICY_BYTES

    for dev in ("/dev/full", "/dev/zero"):  # read whole, either would fill the memory
        with pytest.raises(InputError, match="not a regular file"):
            load(dev)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * MAX_POLICY_BYTES + "\n")
    with pytest.raises(InputError, match="MiB: larger than any file"):
        load(big)
