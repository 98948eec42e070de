"""How many nodes of a rack or a node pool may be out at once, and the waves that keep to it.

``--max-unavailable`` is a count (``2``) or a percentage of the group's nodes
(``5%``, rounded down and at least 1, as a Deployment's rolling update and
kured's concurrency do). Every server that is a live node belongs to groups
(its rack, and its node pool when the cluster labels one); a wave takes, per
group, at most what the group may lose, less what is already out (cordoned or
not Ready) before the run starts. A group that may lose nothing now refuses
its servers with the figures: the operator decides, nothing is guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetctl.errors import InputError

_FORM = re.compile(r"^(?:[1-9][0-9]{0,5}|(?:100|[1-9][0-9]?)%)$")


@dataclass(frozen=True)
class MaxUnavailable:
    """A count, or a percentage of each group's nodes."""

    count: int | None = None
    percent: int | None = None

    def of(self, total: int) -> int:
        """How many of a group of ``total`` nodes may be out at once (at least 1)."""
        if self.count is not None:
            return self.count
        return max(1, math.floor(total * (self.percent or 0) / 100))

    def __str__(self) -> str:
        return f"{self.percent}%" if self.percent is not None else str(self.count)


def parse_max_unavailable(text: str, *, field: str = "--max-unavailable") -> MaxUnavailable:
    """``N`` (1 to 999999) or ``P%`` (1 to 100); anything else is one line, exit 2."""
    raw = text.strip()
    # ASCII digits only: a superscript or Arabic-Indic digit is no count here (the CLI's input rules).
    if not raw.isascii() or not _FORM.match(raw):
        raise InputError(f"expected a count of nodes (e.g. 2) or a percentage of each rack's or pool's nodes (e.g. 5%), not {text!r}",
                         field=field)  # fmt: skip
    return MaxUnavailable(percent=int(raw[:-1])) if raw.endswith("%") else MaxUnavailable(count=int(raw))


@dataclass(frozen=True)
class WavePlan:
    """The waves (servers by wave, in order), and the servers no wave may take, with why."""

    waves: list[list[str]]
    refused: dict[str, str]


def plan_waves(groups: Mapping[str, Sequence[str]], sizes: Mapping[str, int], limit: MaxUnavailable,
               already_out: Mapping[str, int] | None = None) -> WavePlan:  # fmt: skip
    """Waves of the servers in ``groups`` (server -> its groups: ``rack:r12``, ``pool:train-a``), each wave taking per group
    at most ``limit.of(sizes[group]) - already_out[group]``.

    Servers are taken in name order, so the same inventory gives the same waves (a resumed run finds its own).
    """
    out = already_out or {}
    allowance = {g: limit.of(max(sizes.get(g, 0), 1)) - out.get(g, 0) for gs in groups.values() for g in gs}
    refused: dict[str, str] = {}
    todo: list[str] = []
    for server in sorted(groups):
        full = [g for g in groups[server] if allowance[g] <= 0]
        if full:
            g = full[0]
            refused[server] = (f"{g} may have {limit.of(max(sizes.get(g, 0), 1))} of its {sizes.get(g, 0)} nodes out at once "
                               f"(--max-unavailable {limit}) and {out.get(g, 0)} are out already")  # fmt: skip
        else:
            todo.append(server)
    waves: list[list[str]] = []
    while todo:
        used: dict[str, int] = {}
        wave: list[str] = []
        rest: list[str] = []
        for server in todo:
            if all(used.get(g, 0) < allowance[g] for g in groups[server]):
                for g in groups[server]:
                    used[g] = used.get(g, 0) + 1
                wave.append(server)
            else:
                rest.append(server)
        waves.append(wave)
        todo = rest
    return WavePlan(waves, refused)
