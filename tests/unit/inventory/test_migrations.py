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
