import json


def test_example_import_list_roundtrip(example_loaded, cli):
    r = cli("server", "list", "--rack", "rack-12", "--output", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert len(rows) == 19
    assert {"name", "serial", "rack", "position", "state"} <= set(rows[0])
    assert all(row["rack"] == "rack-12" for row in rows)
    again = cli("inventory", "import", "inventory")
    assert again.code == 0 and "nothing to change" in again.out
