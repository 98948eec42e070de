"""The power-on planner: budgets, already-on servers, stagger (no BMC needed)."""

from fleetctl.workflows.power import plan_power_on


def test_budget_counts_servers_already_on_and_staggers_per_rack():
    plan = plan_power_on(
        [("a1", "A", 1000), ("a2", "A", 1000), ("a3", "A", 1000), ("b1", "B", 5000), ("b2", "B", 5000)],
        already_on={"A": [("a0", 1500)]},
        budgets={"A": 3600, "B": None},
        stagger_s=2.0,
    )
    starts = {s.server: s.start_s for s in plan.slots}
    assert starts == {"a1": 0.0, "a2": 2.0, "a3": None, "b1": 0.0, "b2": 2.0}
    refused = next(s for s in plan.slots if s.server == "a3")
    assert "3500" not in refused.reason and "4500 W" in refused.reason and "3600 W budget" in refused.reason
    assert plan.rack_draw_w == {"A": 3500, "B": 10000}


def test_a_server_without_power_figures_counts_as_zero_and_never_blocks():
    plan = plan_power_on([("x", "R", None)], already_on={}, budgets={"R": 0}, stagger_s=1)
    assert plan.start_of("x") == 0.0
