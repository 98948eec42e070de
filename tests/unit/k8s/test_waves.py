"""--max-unavailable: its forms, and waves that never take more of a rack or pool than it may lose."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetctl.errors import InputError
from fleetctl.k8s.waves import MaxUnavailable, parse_max_unavailable, plan_waves


@pytest.mark.parametrize(("text", "want"), [("2", MaxUnavailable(count=2)), ("5%", MaxUnavailable(percent=5)),
                                            ("100%", MaxUnavailable(percent=100)), (" 1 ", MaxUnavailable(count=1))])  # fmt: skip
def test_forms(text: str, want: MaxUnavailable) -> None:
    assert parse_max_unavailable(text) == want


@pytest.mark.parametrize("text", ["0", "0%", "101%", "-1", "", "%", "5 %", "²", "\u0661", "1.5", "99999999999", "5%%", "nan"])
def test_bad_forms_are_one_line_naming_the_option(text: str) -> None:
    with pytest.raises(InputError) as e:
        parse_max_unavailable(text)
    assert "--max-unavailable" in str(e.value) and "\n" not in str(e.value)


def test_a_percentage_rounds_down_and_is_at_least_one() -> None:
    assert MaxUnavailable(percent=5).of(1000) == 50
    assert MaxUnavailable(percent=5).of(39) == 1
    assert MaxUnavailable(percent=50).of(3) == 1


def test_waves_per_rack_and_pool() -> None:
    groups = {f"r1-{i}": ["rack:r1", "pool:a"] for i in range(4)} | {f"r2-{i}": ["rack:r2", "pool:a"] for i in range(4)}
    plan = plan_waves(groups, {"rack:r1": 4, "rack:r2": 4, "pool:a": 8}, MaxUnavailable(count=2))
    assert plan.refused == {}
    # Two of a rack at once, and the pool (8 nodes, may lose 2) binds harder: two per wave in all.
    assert [len(w) for w in plan.waves] == [2, 2, 2, 2]
    assert sorted(s for w in plan.waves for s in w) == sorted(groups)


def test_what_is_out_already_counts_and_a_full_group_refuses_with_figures() -> None:
    groups = {"a1": ["rack:a"], "a2": ["rack:a"], "b1": ["rack:b"]}
    plan = plan_waves(groups, {"rack:a": 10, "rack:b": 10}, MaxUnavailable(count=1), {"rack:a": 1})
    assert plan.waves == [["b1"]]
    assert set(plan.refused) == {"a1", "a2"} and "1 are out already" in plan.refused["a1"]


@given(st.dictionaries(st.text("abc", min_size=1, max_size=3), st.lists(st.sampled_from(["g1", "g2", "g3"]), min_size=1, max_size=3,
                                                                          unique=True), max_size=30),
       st.integers(1, 5))  # fmt: skip
def test_no_wave_ever_exceeds_any_group(groups: dict[str, list[str]], n: int) -> None:
    sizes = {g: 10 for g in ("g1", "g2", "g3")}
    plan = plan_waves(groups, sizes, MaxUnavailable(count=n))
    for wave in plan.waves:
        for g in sizes:
            assert sum(g in groups[s] for s in wave) <= n
    assert sorted(s for w in plan.waves for s in w) == sorted(groups)
