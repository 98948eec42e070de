"""BIOS profiles in site files: defined once, named by models, checked, exported."""

from __future__ import annotations

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "inventory"


def test_a_model_naming_an_undefined_profile_is_refused_at_its_line(db_url, cli, tmp_path):  # type: ignore[no-untyped-def]
    text = (
        "models:\n"
        "- name: m1\n"
        "  kind: server\n"
        "  vendor: Acme\n"
        "  model: M1\n"
        "  bios_profile: nowhere\n"
    )
    path = tmp_path / "models.yaml"
    path.write_text(text)
    r = cli("inventory", "import", str(path))
    assert r.code == 2
    assert f"{path}:6: models[0].bios_profile: model 'm1' names BIOS profile 'nowhere', which is not defined" in r.err


def test_profiles_import_change_and_export_round_trip(db_url, cli, tmp_path):  # type: ignore[no-untyped-def]
    assert cli("inventory", "import", str(EXAMPLE)).code == 0
    first = cli("inventory", "export").out
    assert first.startswith("bios_profiles:\n- name: gpu-default")  # sorted, first in the file
    (tmp_path / "one.yaml").write_text(first)
    changed = first.replace("WorkloadProfile: HighPerformanceCompute", "WorkloadProfile: GeneralPowerEfficientCompute")
    (tmp_path / "two.yaml").write_text(changed)
    r = cli("inventory", "import", str(tmp_path / "two.yaml"), "--output", "json")
    assert r.code == 0
    import json

    changes = json.loads(r.out)["changes"]
    assert [(c["action"], c["kind"], c["name"]) for c in changes] == [("change", "bios_profile", "mncore-hpc")]
    assert "WorkloadProfile: GeneralPowerEfficientCompute" in cli("inventory", "export").out
