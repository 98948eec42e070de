"""Draining one node as ``kubectl drain`` does, bounded, with its result as data.

Which pods go, and which refuse the drain, are kubectl's rules
(k8s.io/kubectl/pkg/drain/filters.go, read at kubernetes/kubernetes
121817a592d75c16803aea4852820986fc185c73, applied in its order; the first
rule that decides a pod decides it):

1. a pod a DaemonSet controls that has not finished is left (kubectl with
   ``--ignore-daemonsets``: its controller would put it back at once, the
   cordon notwithstanding). kubectl also reads the DaemonSet and refuses an
   orphan's pod without ``--force``; fleetctl does not read DaemonSets (one
   request per pod saved) and leaves such a pod too;
2. a mirror pod (a static pod's, the kubelet's own) is left: the API cannot
   evict it;
3. a pod with local data (an ``emptyDir`` volume) that has not finished
   refuses the drain unless ``delete_emptydir_data`` (its data goes with it);
4. a pod no controller manages that has not finished refuses the drain
   unless ``force`` (nothing would bring it back);
5. every other pod is evicted through the Eviction API, naming its uid (only
   that incarnation of the name).

One deliberate difference: a pod already terminating is not evicted again but
waited for (kubectl sends it another eviction, which the API accepts and
ignores); a resumed drain finds the pods its first pass evicted this way.

A refusal is one line naming the pods, and nothing is evicted (the caller
checks with :func:`plan_pods` before it cordons). An eviction a budget refuses
(429) is asked again after ``retry_s`` (kubectl: 5 s) until the node's
deadline; then the evicted pods are waited for (the node's pods read every
``poll_s``, kubectl's 1 s) until the same deadline. Every loop has a bound, the
deadline, and sleeps between its passes. Past the deadline the result is a
:class:`DrainTimeout` carrying it, never a bare exception.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fleetctl.errors import EXIT_PROBLEMS, EXIT_USAGE, FleetError
from fleetctl.interfaces.k8s import Budget, ClusterClient, Pod, with_budgets

#: Seconds between two reads of the node's pods while waiting for the evicted ones to go (kubectl's interval).
POLL_S = 1.0
#: kubectl's pause before asking again for an eviction a budget refused.
RETRY_S = 5.0

# kubectl's own words for each refusal and each pod left (filters.go), so an operator who knows kubectl reads them so.
DAEMONSET = "DaemonSet-managed"
MIRROR = "mirror pod"
LOCAL_DATA = "Pods with local storage (use --delete-emptydir-data to override)"
UNMANAGED = "Pods that declare no controller (use --force-drain to override)"

Verdict = Literal["evict", "leave", "refuse", "going"]


class MaintenanceRefused(FleetError):
    """A node cannot be drained as asked (pods with local data, pods no controller manages, a node held by a live job).

    Exit 2: nothing was evicted, and the node was not cordoned by this refusal.
    """

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, refused: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.refused = tuple(refused)  # (namespace/name, why)


@dataclass(frozen=True)
class DrainResult:
    """What one drain did: plain values (journaled, shown, sent in a Temporal history)."""

    node: str
    evicted: tuple[str, ...] = ()  # namespace/name of the pods evicted by this pass
    going: tuple[str, ...] = ()  # pods already terminating when this pass came (a resumed drain's): waited for
    left: tuple[tuple[str, str], ...] = ()  # (pod, why): DaemonSet and mirror pods
    blocked: tuple[tuple[str, str], ...] = ()  # (pod, budget or the API's message): still refused when the deadline came
    remaining: tuple[str, ...] = ()  # evicted pods still on the node when the deadline came
    waited_s: float = 0.0
    done: bool = False

    def summary(self) -> dict[str, Any]:
        """The journal's and ``-o json``'s form."""
        return {"node": self.node, "evicted": list(self.evicted), "going": list(self.going), "left": [list(p) for p in self.left],
                "blocked": [list(p) for p in self.blocked], "remaining": list(self.remaining),
                "waited_s": round(self.waited_s, 3), "done": self.done}  # fmt: skip

    def why_not(self) -> str:
        """One line: what held the drain past its deadline."""
        if self.blocked:
            names = ", ".join(f"{p} ({b})" for p, b in self.blocked[:3])
            return f"{len(self.blocked)} pod(s) still refused by their disruption budget: {names}{' ...' if len(self.blocked) > 3 else ''}"
        if self.remaining:
            names = ", ".join(self.remaining[:3])
            return f"{len(self.remaining)} evicted pod(s) still on the node: {names}{' ...' if len(self.remaining) > 3 else ''}"
        return "not drained"


class DrainTimeout(FleetError):
    """A node not drained within its timeout (a budget held, pods slow to go): exit 1, the result attached.

    The node stays cordoned, with the ``fleetctl.io/maintenance`` taint naming the job.
    """

    exit_code = EXIT_PROBLEMS

    def __init__(self, message: str, *, result: DrainResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class PodPlan:
    """What a drain would do to each pod of a node (kubectl's filters, no request sent)."""

    evict: tuple[Pod, ...] = ()
    going: tuple[Pod, ...] = ()
    left: tuple[tuple[Pod, str], ...] = ()
    refused: tuple[tuple[Pod, str], ...] = ()

    def refusal(self, node: str) -> str:
        """The one line of a refusal: each rule's pods, named."""
        by_why: dict[str, list[str]] = {}
        for p, why in self.refused:
            by_why.setdefault(why, []).append(f"{p.namespace}/{p.name}")
        parts = [f"{why}: {', '.join(names[:5])}{f' and {len(names) - 5} more' if len(names) > 5 else ''}" for why, names in by_why.items()]
        return f"node {node}: cannot drain: {'; '.join(parts)}"


def _finished(p: Pod) -> bool:
    return p.phase in ("Succeeded", "Failed")


def verdict(p: Pod, *, delete_emptydir_data: bool, force: bool) -> tuple[Verdict, str]:
    """One pod's verdict and why, by kubectl's filters in kubectl's order (see the module's doc)."""
    if p.terminating:
        return "going", "terminating"
    if p.owner_kind == "DaemonSet" and not _finished(p):  # kubectl: "any finished pod can be removed"
        return "leave", DAEMONSET
    if p.mirror:
        return "leave", MIRROR
    if p.local_data and not _finished(p) and not delete_emptydir_data:
        return "refuse", LOCAL_DATA
    if p.owner_kind is None and not _finished(p) and not force:
        return "refuse", UNMANAGED
    return "evict", ""


def plan_pods(pods: Sequence[Pod], *, delete_emptydir_data: bool = False, force: bool = False) -> PodPlan:
    """Each pod's verdict (:func:`verdict`), grouped; no request."""
    evict: list[Pod] = []
    going: list[Pod] = []
    left: list[tuple[Pod, str]] = []
    refused: list[tuple[Pod, str]] = []
    for p in pods:
        v, why = verdict(p, delete_emptydir_data=delete_emptydir_data, force=force)
        if v == "evict":
            evict.append(p)
        elif v == "going":
            going.append(p)
        elif v == "leave":
            left.append((p, why))
        else:
            refused.append((p, why))
    return PodPlan(tuple(evict), tuple(going), tuple(left), tuple(refused))


def _name(p: Pod) -> str:
    return f"{p.namespace}/{p.name}"


def drain(
    client: ClusterClient,
    node: str,
    *,
    timeout_s: float,
    delete_emptydir_data: bool = False,
    force: bool = False,
    grace_s: int | None = None,
    retry_s: float = RETRY_S,
    poll_s: float = POLL_S,
    say: Callable[[str], None] | None = None,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainResult:
    """Evict the node's pods (kubectl's rules) and wait for them to go, within ``timeout_s`` in all.

    The node is expected cordoned already (else the pods evicted may come back to it).

    Raises:
        MaintenanceRefused: (exit 2) pods with local data without ``delete_emptydir_data``, pods no controller manages
            without ``force``; nothing was evicted.
        DrainTimeout: (exit 1) the deadline came first: a budget still refusing, or evicted pods still on the node.
        K8sError: the cluster did not answer, or answered an error other than an eviction's 429, 404 or 409.
    """
    start = now()
    deadline = start + max(0.0, timeout_s)
    retry_s, poll_s = max(retry_s, 0.001), max(poll_s, 0.001)
    pods = client.pods(node)
    plan = plan_pods(pods, delete_emptydir_data=delete_emptydir_data, force=force)
    if plan.refused:
        raise MaintenanceRefused(plan.refusal(node), refused=[(_name(p), why) for p, why in plan.refused])
    budgets: dict[str, tuple[str, ...]] = {}
    if plan.evict:
        found: list[Budget] = client.budgets()
        budgets = {_name(p): p.budgets for p in with_budgets(plan.evict, found)}

    # Evict: each pod once per round; a round's refusals are asked again after retry_s. Bounded by the deadline, and by
    # the number of rounds the deadline allows (a clock that does not move cannot make this loop endless).
    pending = {_name(p): p for p in plan.evict}
    evicted: list[str] = []
    gone: dict[str, str] = {_name(p): p.uid for p in plan.going}
    blocked: dict[str, str] = {}
    rounds = 0
    max_rounds = math.ceil(max(0.0, timeout_s) / retry_s) + 1
    while pending:
        rounds += 1
        for key, p in list(pending.items()):
            answer = client.evict(p.namespace, p.name, uid=p.uid or None, grace_s=grace_s)
            if answer.outcome == "blocked":
                blocked[key] = ", ".join(budgets.get(key, ())) or answer.message
                continue
            pending.pop(key)
            blocked.pop(key, None)
            if answer.outcome == "evicted":
                evicted.append(key)
                gone[key] = p.uid
        if not pending:
            break
        left_s = deadline - now()
        if left_s <= 0 or rounds >= max_rounds:
            break
        if say is not None:
            held = sorted({b for k in pending for b in (budgets.get(k) or (blocked[k],))})
            say(f"node {node}: {len(pending)} pod(s) refused by {', '.join(held[:3])}; asking again in {min(retry_s, left_s):g} s")
        sleep(min(retry_s, left_s))

    # Wait for the evicted (and already terminating) pods to leave the node: the same incarnation (uid) only.
    remaining = dict(gone)
    polls = 0
    max_polls = math.ceil(max(0.0, timeout_s) / poll_s) + 1
    while remaining and not pending:
        on = {_name(p): p.uid for p in client.pods(node)}
        remaining = {k: uid for k, uid in remaining.items() if k in on and (not uid or on[k] == uid)}
        polls += 1
        if not remaining:
            break
        left_s = deadline - now()
        if left_s <= 0 or polls >= max_polls:
            break
        sleep(min(poll_s, left_s))

    result = DrainResult(
        node=node,
        evicted=tuple(evicted),
        going=tuple(_name(p) for p in plan.going),
        left=tuple((_name(p), why) for p, why in plan.left),
        blocked=tuple((k, blocked.get(k, "")) for k in pending),
        remaining=tuple(sorted(remaining)) if not pending else (),
        waited_s=max(0.0, now() - start),
        done=not pending and not remaining,
    )
    if not result.done:
        raise DrainTimeout(f"node {node}: not drained within {timeout_s:g} s: {result.why_not()}", result=result)
    return result
