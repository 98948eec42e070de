"""docs/lab.md says what the lab's CLI does (issue #25, item 15).

Every option of every `fleetctl lab` command is named in docs/lab.md (`lab
fault --board` was not), and the board-fault section does not give the tools'
own PASS as burn-in's verdict on a `slow` board, which the shipped criteria
fail (half the golden throughput is below fail_fraction).
"""

from __future__ import annotations

import re
from pathlib import Path

import typer.main
from fleetctl_lab.cli import app

from fleetctl.burnin import criteria as crit

DOC = (Path(__file__).resolve().parents[3] / "docs" / "lab.md").read_text(encoding="utf-8")


def test_every_option_of_every_lab_command_is_in_the_docs() -> None:
    group = typer.main.get_command(app)
    missing = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and opt != "--output" and not re.search(rf"{re.escape(opt)}\b", DOC):
                    missing.append(f"lab {name} {opt}")
    assert not missing, missing
    assert re.search(r"fleetctl lab fault \S+.* --board \S+ --set fault=", DOC)


def test_a_slow_board_is_documented_as_the_criteria_judge_it() -> None:
    loaded = crit.load()
    for kind in ("mncore2", "gpu", "amd-instinct"):
        # The lab's slow fault halves the throughput: below fail_fraction is a fail, for every kind the lab serves.
        assert loaded.for_board(kind, None).fail_fraction > 0.5, kind
    row = re.search(r"^\| `slow` \| fail \(throughput\) \| fail \(throughput\) \| fail \(throughput\) \|$", DOC, re.MULTILINE)
    assert row, "the verdict table's slow row"
    gpu_mncore = re.search(r"^\| `slow` \|.*\|$", DOC, re.MULTILINE)
    assert gpu_mncore and not gpu_mncore.group().rstrip("| ").endswith("PASS"), gpu_mncore
