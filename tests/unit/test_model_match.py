"""Matching a BMC's Manufacturer and Model against the declared hardware models (server inspect, issue #13)."""

from __future__ import annotations

from types import SimpleNamespace

from fleetctl.inventory.schema import ModelSpec, ServerSpec
from fleetctl.workflows.inspect import compare, match_model, same_model, same_vendor

MODELS = [
    ModelSpec(name="mn-server-2", kind="server", vendor="Preferred Networks", model="MN-Server 2", height=2),
    ModelSpec(name="mn-server-2-1u", kind="server", vendor="Preferred Networks", model="MN-Server 2 (1U)", height=1),
    ModelSpec(name="gpu-8x-a100", kind="server", vendor="Supermicro", model="AS-4124GO-NART", height=4),
    ModelSpec(name="r640", kind="server", vendor="Dell", model="PowerEdge R640", height=1),
    ModelSpec(name="dcs-7050sx3", kind="switch", vendor="Arista", model="DCS-7050SX3-48YC8", ports=["Ethernet1"]),
    ModelSpec(name="unidentified", kind="server", vendor="unknown", model="unknown", height=1),
]


def test_vendor_and_model_compare_without_case_punctuation_or_company_suffixes() -> None:
    assert same_vendor("Dell", "Dell Inc.")
    assert same_vendor("Supermicro", "Super Micro Computer, Inc.")
    assert same_vendor("Preferred Networks", "PREFERRED NETWORKS, INC.")
    assert not same_vendor("Dell", "HPE")
    assert not same_vendor("", "")
    assert same_model("PowerEdge R640", "poweredge  r640")
    assert same_model("AS-4124GO-NART", "AS 4124GO NART")
    assert not same_model("MN-Server 2", "MN-Server 2 (1U)")


def test_one_declared_model_matches() -> None:
    assert match_model("Dell Inc.", "PowerEdge R640", MODELS).name == "r640"
    assert match_model("Preferred Networks", "MN-Server 2 (1U)", MODELS).name == "mn-server-2-1u"
    # No manufacturer reported: the model string alone decides.
    assert match_model(None, "AS-4124GO-NART", MODELS).name == "gpu-8x-a100"


def test_a_switch_model_or_another_vendor_never_matches_a_server() -> None:
    m = match_model("Arista", "DCS-7050SX3-48YC8", MODELS)
    assert m.name is None and m.new is not None and m.new["name"] == "arista-dcs-7050sx3-48yc8"
    m = match_model("Lenovo", "PowerEdge R640", MODELS)
    assert m.name is None and m.new is not None and m.new["vendor"] == "Lenovo"


def test_no_match_proposes_a_new_model_with_the_boards_found() -> None:
    boards = [SimpleNamespace(kind="mncore2")] * 4
    m = match_model("Preferred Networks", "MN-Server 3", MODELS, boards=boards)
    assert m.new == {"name": "preferred-networks-mn-server-3", "kind": "server", "vendor": "Preferred Networks",
                     "model": "MN-Server 3", "height": 1, "boards": {"kind": "mncore2", "count": 4}}  # fmt: skip
    ModelSpec.model_validate(m.new)  # a model an import would take
    # Boards of two kinds: no boards spec guessed.
    m = match_model("Lab", "Mixed", MODELS, boards=[SimpleNamespace(kind="gpu"), SimpleNamespace(kind="mncore2")])
    assert m.new is not None and "boards" not in m.new


def test_a_proposed_name_never_takes_a_declared_one() -> None:
    models = [*MODELS, ModelSpec(name="acme-x1", kind="switch", vendor="Acme", model="X1 switch", ports=["p1"])]
    m = match_model("Acme", "X1", models)
    assert m.new is not None and m.new["name"] == "acme-x1-2"
    long = match_model("A" * 100, "B" * 100, MODELS)
    assert long.new is not None and len(long.new["name"]) <= 63
    ModelSpec.model_validate(long.new | {"vendor": "A", "model": "B"})


def test_several_matches_or_no_model_are_problems_not_guesses() -> None:
    twins = [*MODELS, ModelSpec(name="r640-gpu", kind="server", vendor="Dell", model="PowerEdge R640", height=1)]
    m = match_model("Dell Inc.", "PowerEdge R640", twins)
    assert m.name is None and m.new is None and m.problem is not None and "r640, r640-gpu" in m.problem
    m = match_model("Dell Inc.", "  ", MODELS)
    assert m.problem == "the BMC reports no model"


def _facts(**kw):  # type: ignore[no-untyped-def]
    base = {"serial": "SN123", "manufacturer": "Dell Inc.", "model": "PowerEdge R640", "boards": [], "nics": []}
    return SimpleNamespace(**(base | kw))


def test_compare_fills_the_placeholders_and_reports_no_drift() -> None:
    declared = ServerSpec(name="new-01", serial="UNKNOWN-new-01", model="unidentified", position=1)
    r, ed = compare(declared, MODELS[-1], _facts(), MODELS)
    assert r.drift == [] and r.filled == ["serial SN123", "model r640"]
    assert (ed["fill_serial"], ed["model"], ed["new_model"], ed["serial"]) == ("SN123", "r640", None, None)
    # A BMC that reports no serial leaves it open: that is said.
    r, ed = compare(declared, MODELS[-1], _facts(serial=None), MODELS)
    assert ed["fill_serial"] is None and r.drift == ["serial: not declared, and the BMC reports none"]


def test_compare_keeps_a_declared_serial_and_model() -> None:
    declared = ServerSpec(name="r-01", serial="SN999", model="r640", position=1)
    r, ed = compare(declared, MODELS[3], _facts(model="Something Else"), MODELS)
    assert r.drift == ["serial: declared SN999, BMC reports SN123"] and ed["serial"] == "SN123"
    assert ed["model"] is None and ed["fill_serial"] is None and r.filled == []


def test_without_the_declared_models_a_placeholder_model_is_drift() -> None:
    # Provisioning's inspection step compares without the models: it must not go on with a model it does not know.
    declared = ServerSpec(name="new-01", serial="UNKNOWN-new-01", model="unidentified", position=1)
    r, ed = compare(declared, MODELS[-1], _facts())
    assert r.drift == ["model: not identified yet; `fleetctl server inspect new-01` reads it from the BMC"]
    assert ed["model"] is None and ed["fill_serial"] == "SN123"
