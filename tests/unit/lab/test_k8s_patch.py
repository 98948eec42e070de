"""The stand-in's PATCH kinds and selectors, as the Kubernetes API applies them (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest
from fleetctl_lab.k8s.patch import JSON_PATCH, MERGE, STRATEGIC, PatchError, apply_patch
from fleetctl_lab.k8s.selectors import SelectorError, match_label_selector, parse_fields, parse_labels

NODE: dict[str, Any] = {
    "metadata": {"name": "n1", "labels": {"a": "1", "b": "2"}},
    "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]},
}


def test_strategic_merge_merges_conditions_by_type_and_replaces_taints() -> None:
    # status.conditions has patchMergeKey "type"; spec.taints has none, so a list in the patch replaces it (as kubectl taint relies on).
    patch = {"spec": {"taints": [{"key": "y", "effect": "NoExecute"}]},
             "status": {"conditions": [{"type": "FleetctlHealthy", "status": "False", "reason": "BoardMissing"},
                                       {"type": "Ready", "status": "False"}]}}  # fmt: skip
    out = apply_patch(STRATEGIC, NODE, patch)
    assert out["spec"]["taints"] == [{"key": "y", "effect": "NoExecute"}]
    conds = {c["type"]: c["status"] for c in out["status"]["conditions"]}
    assert conds == {"Ready": "False", "DiskPressure": "False", "FleetctlHealthy": "False"}
    assert NODE["status"]["conditions"][0]["status"] == "True"  # the target is not modified in place


def test_strategic_merge_directives() -> None:
    patch = {"metadata": {"labels": {"a": None, "c": "3"}}, "status": {"conditions": [{"type": "DiskPressure", "$patch": "delete"}]},
             "$setElementOrder/conditions": [{"type": "Ready"}]}  # fmt: skip
    out = apply_patch(STRATEGIC + "; charset=utf-8", NODE, patch)
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert [c["type"] for c in out["status"]["conditions"]] == ["Ready"]
    with pytest.raises(PatchError):
        apply_patch(STRATEGIC, NODE, {"status": {"conditions": [{"status": "True"}]}})  # no merge key


def test_merge_patch_replaces_lists_and_deletes_with_null() -> None:
    out = apply_patch(MERGE, NODE, {"spec": {"unschedulable": True}, "status": {"conditions": [{"type": "Ready", "status": "False"}]},
                                    "metadata": {"labels": {"b": None}}})  # fmt: skip
    assert out["spec"]["unschedulable"] is True
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "False"}]
    assert out["metadata"]["labels"] == {"a": "1"}


def test_json_patch_all_or_nothing() -> None:
    out = apply_patch(JSON_PATCH, NODE, [{"op": "add", "path": "/spec/taints/-", "value": {"key": "z", "effect": "NoSchedule"}},
                                         {"op": "replace", "path": "/metadata/labels/a", "value": "9"},
                                         {"op": "remove", "path": "/metadata/labels/b"},
                                         {"op": "test", "path": "/metadata/name", "value": "n1"}])  # fmt: skip
    assert [t["key"] for t in out["spec"]["taints"]] == ["x", "z"]
    assert out["metadata"]["labels"] == {"a": "9"}
    with pytest.raises(PatchError):
        ops = [{"op": "remove", "path": "/metadata/labels/a"}, {"op": "test", "path": "/metadata/name", "value": "n2"}]
        apply_patch(JSON_PATCH, NODE, ops)
    assert NODE["metadata"]["labels"] == {"a": "1", "b": "2"}
    with pytest.raises(ValueError):
        apply_patch("application/json", NODE, {})


def test_label_selectors() -> None:
    labels = {"app": "trainer", "fleetctl.io/gang": "gang-000", "tier": "gpu"}
    cases = {
        "app=trainer": True,
        "app==trainer,tier=gpu": True,
        "app!=trainer": False,
        "fleetctl.io/gang": True,
        "!fleetctl.io/gang": False,
        "tier in (gpu, mncore)": True,
        "tier notin (gpu)": False,
        "tier in (mncore),app=trainer": False,
        "": True,
    }
    for text, want in cases.items():
        assert parse_labels(text)(labels) is want, text
    with pytest.raises(SelectorError):
        parse_labels("app=(")


def test_field_selectors_and_label_selector_objects() -> None:
    pod = {"metadata": {"name": "p", "namespace": "training"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    assert parse_fields("spec.nodeName=n1", "pods")(pod)
    assert not parse_fields("spec.nodeName=n1,status.phase!=Running", "pods")(pod)
    with pytest.raises(SelectorError, match="field label not supported"):
        parse_fields("spec.hostname=n1", "pods")
    labels = {"fleetctl.io/gang": "g", "app": "trainer"}
    assert match_label_selector({}, labels)  # an empty selector selects every pod (policy/v1)
    assert not match_label_selector(None, labels)
    assert match_label_selector({"matchLabels": {"app": "trainer"}, "matchExpressions": [{"key": "fleetctl.io/gang", "operator": "In",
                                                                                          "values": ["g"]}]}, labels)  # fmt: skip
    assert not match_label_selector({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, labels)
