"""Burn-in criteria files are validated (issue #25, item 6): exit 2 and one line naming the file, its line and the key.

The hostile files are hand-made, each the smallest file showing one of the issue's findings.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fleetctl.burnin import criteria as crit
from fleetctl.errors import InputError

REPO = Path(__file__).resolve().parents[3]
SHIPPED = [*sorted((REPO / "drivers" / "fleetctl_drivers" / "accel").glob("*.criteria.yaml")), crit.DEFAULT_FILE]

HOSTILE: dict[str, tuple[bytes, str]] = {
    # name: (the file, what the one line must say after "FILE:")
    "kinds-not-a-mapping": (b"kinds: 7\n", "1: kinds: expected a mapping of board kind to its criteria, not int"),
    "levels-a-list": (b"levels: [1, 2]\n", "1: levels: expected a mapping of board kind to its levels, not list"),
    "models-a-string": (b"models: m1\n", "1: models: expected a mapping of hardware model to its criteria, not str"),
    "binary": (bytes(range(256)) * 4, "2: not UTF-8 text (byte 0x80)"),  # after the first 0x0a
    "control-characters": (b"kinds:\n  gpu:\x00\x01\x02\n", "not valid YAML"),
    "nan-limit": (b"kinds:\n  gpu:\n    temp_max_c: .nan\n", "3: kinds.gpu.temp_max_c: Input should be a finite number"),
    "inf-limit": (b"kinds:\n  gpu:\n    temp_warn_c: .inf\n", "3: kinds.gpu.temp_warn_c: Input should be a finite number"),
    "inf-seconds": (b"levels:\n  gpu:\n    quick: {seconds: .inf}\n", "3: levels.gpu.quick.seconds: Input should be a finite number"),
    "nan-in-a-model": (b"models:\n  m1:\n    pass_fraction: .nan\n", "3: models.m1.pass_fraction: Input should be a finite number"),
    "fractions-crossed": (b"kinds:\n  gpu:\n    pass_fraction: 0.5\n    fail_fraction: 0.9\n",
                          "2: kinds.gpu: fail_fraction 0.9 is above pass_fraction 0.5"),
    # Crossed with the driver's default: nvidia.criteria.yaml fails below 0.6.
    "pass-below-the-defaults-fail": (b"kinds:\n  gpu:\n    pass_fraction: 0.5\n",
                                     "2: kinds.gpu: fail_fraction 0.6 is above pass_fraction 0.5"),
    "warn-above-max": (b"kinds:\n  gpu:\n    temp_warn_c: 95\n    temp_max_c: 90\n", "2: kinds.gpu: temp_warn_c 95 is above temp_max_c 90"),
    "duplicate-key": (b"kinds:\n  gpu:\n    temp_warn_c: 70\n    temp_warn_c: 95\n", "4: duplicate key 'temp_warn_c'"),
    "duplicate-kind": (b"kinds:\n  gpu: {temp_warn_c: 70}\n  gpu: {temp_warn_c: 95}\n", "3: duplicate key 'gpu'"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_bad_criteria_file_is_exit_2_and_one_line(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from fleetctl.cli.app import main

    content, says = HOSTILE[name]
    f = tmp_path / f"{name}.yaml"
    f.write_bytes(content)
    monkeypatch.setattr(sys, "argv", ["fleetctl", "burnin", "--kind", "gpu", "--criteria", str(f), "--dry-run"])
    with pytest.raises(SystemExit) as done:
        main()
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2, err
    assert len(err.splitlines()) == 1, err
    expected = f"{f}:{says}" if says[0].isdigit() else f"{f}: {says}"  # with the line where the file has one
    assert expected in err, err


def test_a_merge_may_give_a_key_again(tmp_path: Path) -> None:
    """A key a YAML merge brings is not a duplicate when the mapping gives it again (that is what merges are for)."""
    f = tmp_path / "c.yaml"
    f.write_text("kinds:\n  gpu:\n    <<: {temp_warn_c: 70, temp_max_c: 80}\n    temp_warn_c: 75\n")
    got = crit.load(f).for_board("gpu", None)
    assert (got.temp_warn_c, got.temp_max_c) == (75, 80)


def test_a_models_keys_crossing_its_kinds_are_refused_when_a_board_is_judged(tmp_path: Path) -> None:
    """Which kind a model's boards are is the inventory's word: its keys are checked on top of that kind's criteria."""
    f = tmp_path / "c.yaml"
    f.write_text("models:\n  hot-model:\n    temp_warn_c: 101\n")  # the GPU's temp_max_c is 100
    loaded = crit.load(f)
    says = r"models\.hot-model: temp_warn_c 101 is above temp_max_c 100: .* \(on the criteria of gpu boards\)"
    with pytest.raises(InputError, match=says):
        loaded.for_board("gpu", "hot-model")


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_criteria_file_loads(path: Path) -> None:
    """The drivers' defaults and the bundled file pass the schema (duplicates, finite numbers, bounds) as a site copy."""
    loaded = crit.load(path)
    for kind, c in loaded.kinds.items():
        assert c.fail_fraction <= c.pass_fraction, kind
        for model in loaded.models:
            loaded.for_board(kind, model)
