"""Schema migrations: an inventory made by an older fleetctl upgrades in place."""

from __future__ import annotations

from sqlalchemy import create_engine, text


def test_upgrade_from_the_first_schema_keeps_the_data(db_url, cli):  # type: ignore[no-untyped-def]
    from alembic import command

    from fleetctl.store import HEAD, alembic_config, current_revision, reset_engines

    # Bring a fresh database down to revision 0001 (the first release's schema).
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("SELECT 1"))
    from fleetctl.store import get_engine

    get_engine(db_url)  # at head
    reset_engines()
    with engine.begin() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0001")
    assert current_revision(engine) == "0001"
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO site (name, description) VALUES ('old', 'made by 0001')"))
    engine.dispose()
    # Any command upgrades it on first use, and the data is still there.
    r = cli("site", "list", "--output", "json")
    assert r.code == 0, r.err
    assert "made by 0001" in r.out
    assert current_revision(create_engine(db_url)) == HEAD
    r = cli("db", "info")
    assert f"revision: {HEAD}" in r.out


def test_0004_adds_site_provisioning_in_place_and_downgrades(db_url, cli, tmp_path):  # type: ignore[no-untyped-def]
    """A 0003 inventory (sites without provisioning) upgrades, takes the block, and 0004 goes back down cleanly."""
    import json

    from alembic import command
    from sqlalchemy import inspect

    from fleetctl.store import HEAD, alembic_config, current_revision, get_engine, reset_engines

    def columns() -> set[str]:
        with engine.connect() as conn:
            return {c["name"] for c in inspect(conn).get_columns("site")}

    def to(revision: str, how=command.downgrade) -> None:  # type: ignore[no-untyped-def]
        with engine.begin() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            how(cfg, revision)

    get_engine(db_url)  # at head
    reset_engines()
    engine = create_engine(db_url)
    to("0003")
    assert current_revision(engine) == "0003" and "provisioning" not in columns()
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO site (name, description) VALUES ('old', 'made by 0003')"))
    # First use upgrades it: the old site is there, with no provisioning settings.
    r = cli("site", "show", "old", "--output", "json")
    assert r.code == 0, r.err
    shown = json.loads(r.out)
    assert (shown["description"], shown["provisioning"]) == ("made by 0003", None)
    assert current_revision(engine) == HEAD and "provisioning" in columns()
    site = tmp_path / "old.yaml"
    site.write_text("sites:\n- name: old\n  description: made by 0003\n  provisioning:\n    vlan: 200\n    boot: pxe\n")
    r = cli("inventory", "import", str(site))
    assert r.code == 0, r.err
    assert json.loads(cli("site", "show", "old", "--output", "json").out)["provisioning"]["vlan"] == 200
    # Down to 0003 drops the column and keeps the site; up again, and it is empty.
    reset_engines()
    to("0003")
    assert "provisioning" not in columns()
    to("0004", command.upgrade)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT description, provisioning FROM site WHERE name = 'old'")).one() == ("made by 0003", None)
    engine.dispose()
