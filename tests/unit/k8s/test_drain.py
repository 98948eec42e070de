"""The drain's rules (kubectl's filters) and its bounded loops, against a scripted cluster and a fake clock (no waiting)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

import pytest

from fleetctl.interfaces.k8s import Budget, ClusterClient, ClusterRef, Condition, Eviction, Node, NodePatch, Pod
from fleetctl.k8s.drain import (
    DAEMONSET,
    LOCAL_DATA,
    MIRROR,
    UNMANAGED,
    DrainTimeout,
    MaintenanceRefused,
    drain,
    plan_pods,
    verdict,
)


def pod(name: str, **kw: Any) -> Pod:
    base: dict[str, Any] = {"namespace": "training", "name": name, "node": "n1", "phase": "Running", "owner_kind": "ReplicaSet",
                            "uid": f"uid-{name}", "labels": {"app": "t"}}  # fmt: skip
    return Pod(**{**base, **kw})


class Clock:
    """A clock that moves only when the drain sleeps: what it slept is recorded."""

    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


class Scripted(ClusterClient):
    """A cluster whose evictions answer from a script per pod; an evicted pod leaves after ``linger`` reads of the pods."""

    def __init__(self, pods: Sequence[Pod], *, blocked: dict[str, int] | None = None, linger: int = 0,
                 budgets: Sequence[Budget] = ()) -> None:  # fmt: skip
        self.ref = ClusterRef("test")
        self.on = {p.name: p for p in pods}
        self.blocked = dict(blocked or {})  # pod -> how many evictions it refuses (-1: always)
        self.linger = linger
        self.leaving: dict[str, int] = {}
        self.evictions: list[tuple[str, str | None, int | None]] = []
        self._budgets = list(budgets)

    @classmethod
    def open(cls, ref: ClusterRef, *, deadline: float = 60, request_timeout: float = 10) -> Self:
        raise NotImplementedError

    def node(self, name: str) -> Node | None:
        return Node(name=name)

    def nodes(self) -> list[Node]:
        return []

    def pods(self, node: str | None = None) -> list[Pod]:
        for name in list(self.leaving):
            self.leaving[name] -= 1
            if self.leaving[name] < 0:
                self.on.pop(name, None)
                del self.leaving[name]
        return list(self.on.values())

    def budgets(self) -> list[Budget]:
        return self._budgets

    def patch_node(self, name: str, patch: NodePatch) -> Node:
        raise NotImplementedError

    def set_condition(self, name: str, condition: Condition) -> Node:
        raise NotImplementedError

    def evict(self, namespace: str, name: str, *, uid: str | None = None, grace_s: int | None = None) -> Eviction:
        self.evictions.append((name, uid, grace_s))
        left = self.blocked.get(name, 0)
        if left != 0:
            self.blocked[name] = left - 1 if left > 0 else left
            return Eviction("blocked", "Cannot evict pod as it would violate the pod's disruption budget.")
        p = self.on[name]
        self.on[name] = p.model_copy(update={"terminating": True})
        self.leaving[name] = self.linger
        return Eviction("evicted")

    def close(self) -> None:
        pass


# --- kubectl's filters --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "flags", "expected"),
    [
        ({"owner_kind": "DaemonSet"}, {}, ("leave", DAEMONSET)),
        ({"owner_kind": "DaemonSet", "local_data": True}, {}, ("leave", DAEMONSET)),  # the DaemonSet rule comes first
        ({"owner_kind": "DaemonSet", "phase": "Failed"}, {}, ("evict", "")),  # kubectl: any finished pod can be removed
        ({"mirror": True, "owner_kind": "Node"}, {}, ("leave", MIRROR)),
        ({"local_data": True}, {}, ("refuse", LOCAL_DATA)),
        ({"local_data": True}, {"delete_emptydir_data": True}, ("evict", "")),
        ({"local_data": True, "phase": "Succeeded"}, {}, ("evict", "")),  # a finished pod's data matters no more
        ({"owner_kind": None}, {}, ("refuse", UNMANAGED)),
        ({"owner_kind": None}, {"force": True}, ("evict", "")),
        ({"owner_kind": None, "phase": "Failed"}, {}, ("evict", "")),
        ({"owner_kind": None, "local_data": True}, {"force": True}, ("refuse", LOCAL_DATA)),  # --force does not cover local data
        ({"terminating": True, "owner_kind": None, "local_data": True}, {}, ("going", "terminating")),
        ({}, {}, ("evict", "")),
    ],
)
def test_kubectls_filters_in_kubectls_order(kw: dict[str, Any], flags: dict[str, bool], expected: tuple[str, str]) -> None:
    opts = {"delete_emptydir_data": False, "force": False, **flags}
    assert verdict(pod("p", **kw), **opts) == expected


def test_a_refusal_names_every_pod_by_rule_and_evicts_nothing() -> None:
    pods = [pod("a", local_data=True), pod("b", owner_kind=None), pod("c"), pod("ds", owner_kind="DaemonSet")]
    plan = plan_pods(pods)
    line = plan.refusal("n1")
    assert line == (f"node n1: cannot drain: {LOCAL_DATA}: training/a; {UNMANAGED}: training/b")
    client = Scripted(pods)
    with pytest.raises(MaintenanceRefused) as e:
        drain(client, "n1", timeout_s=10)
    assert e.value.exit_code == 2 and e.value.refused == (("training/a", LOCAL_DATA), ("training/b", UNMANAGED))
    assert client.evictions == []


# --- the loops ------------------------------------------------------------------------------------------------------


def test_evictions_name_the_uid_and_the_evicted_pods_are_waited_for() -> None:
    clock = Clock()
    client = Scripted([pod("a"), pod("b"), pod("ds", owner_kind="DaemonSet")], linger=2)
    result = drain(client, "n1", timeout_s=30, grace_s=7, poll_s=1.0, now=clock.now, sleep=clock.sleep)
    assert result.done and result.evicted == ("training/a", "training/b")
    assert result.left == (("training/ds", DAEMONSET),)
    assert client.evictions == [("a", "uid-a", 7), ("b", "uid-b", 7)]
    assert clock.slept == [1.0, 1.0]  # two polls found them still terminating, the third found them gone
    assert set(client.on) == {"ds"}


def test_a_refused_eviction_is_asked_again_after_the_pause_until_it_goes() -> None:
    clock = Clock()
    budget = Budget(namespace="training", name="gang-0", match_labels={"app": "t"})
    client = Scripted([pod("a"), pod("b")], blocked={"b": 3}, budgets=[budget])
    said: list[str] = []
    result = drain(client, "n1", timeout_s=60, retry_s=5.0, now=clock.now, sleep=clock.sleep, say=said.append)
    assert result.done and result.evicted == ("training/a", "training/b")
    assert [n for n, _, _ in client.evictions] == ["a", "b", "b", "b", "b"]
    assert clock.slept == [5.0, 5.0, 5.0]
    assert said[0] == "node n1: 1 pod(s) refused by training/gang-0; asking again in 5 s"


def test_a_budget_held_past_the_timeout_is_a_drain_timeout_carrying_the_result() -> None:
    clock = Clock()
    budget = Budget(namespace="training", name="gang-0", match_labels={"app": "t"})
    client = Scripted([pod("a"), pod("b")], blocked={"b": -1}, budgets=[budget])
    with pytest.raises(DrainTimeout) as e:
        drain(client, "n1", timeout_s=12, retry_s=5.0, now=clock.now, sleep=clock.sleep)
    r = e.value.result
    assert e.value.exit_code == 1 and not r.done
    assert r.evicted == ("training/a",) and r.blocked == (("training/b", "training/gang-0"),)
    assert clock.slept == [5.0, 5.0, 2.0]  # the last pause is what is left of the deadline, never more
    assert r.waited_s == 12.0
    assert "not drained within 12 s: 1 pod(s) still refused by their disruption budget: training/b (training/gang-0)" in str(e.value)


def test_pods_slow_to_go_time_out_too() -> None:
    clock = Clock()
    client = Scripted([pod("a")], linger=10_000)
    with pytest.raises(DrainTimeout) as e:
        drain(client, "n1", timeout_s=3, poll_s=1.0, now=clock.now, sleep=clock.sleep)
    assert e.value.result.remaining == ("training/a",) and e.value.result.blocked == ()
    assert sum(clock.slept) == 3.0


def test_a_clock_that_never_moves_still_ends() -> None:
    """Every loop has a bound besides the deadline: a stuck clock cannot make the drain endless."""
    client = Scripted([pod("a")], blocked={"a": -1})
    with pytest.raises(DrainTimeout):
        drain(client, "n1", timeout_s=10, retry_s=1.0, now=lambda: 0.0, sleep=lambda s: None)
    assert len(client.evictions) == 11  # timeout / retry + 1 rounds


def test_terminating_pods_are_waited_for_not_evicted_again() -> None:
    clock = Clock()
    client = Scripted([pod("a", terminating=True), pod("b")])
    client.leaving["a"] = 1
    result = drain(client, "n1", timeout_s=10, poll_s=0.5, now=clock.now, sleep=clock.sleep)
    assert result.done and result.going == ("training/a",) and result.evicted == ("training/b",)
    assert [n for n, _, _ in client.evictions] == ["b"]


def test_a_new_pod_of_the_same_name_is_not_waited_for() -> None:
    """The wait is for the incarnation evicted (its uid): a StatefulSet's replacement of the same name ends it."""
    clock = Clock()
    client = Scripted([pod("web-0")])

    def evict(namespace: str, name: str, *, uid: str | None = None, grace_s: int | None = None) -> Eviction:
        client.on[name] = pod(name, uid="uid-new")  # replaced at once, same name, new uid
        return Eviction("evicted")

    client.evict = evict  # type: ignore[method-assign]
    result = drain(client, "n1", timeout_s=10, now=clock.now, sleep=clock.sleep)
    assert result.done and clock.slept == []
