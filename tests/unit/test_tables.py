"""The light read-path tables must describe exactly the SQLModel schema."""

from pathlib import Path


def test_generated_tables_are_current():
    from fleetctl.store.gentables import render

    path = Path(__file__).resolve().parents[2] / "fleetctl" / "store" / "tables.py"
    assert path.read_text() == render(), "stale: python -m fleetctl.store.gentables > fleetctl/store/tables.py"


def test_the_read_path_does_not_import_sqlmodel():
    import subprocess
    import sys

    code = (
        "import sys; import fleetctl.cli.app, fleetctl.inventory.queries, fleetctl.targets; "
        "print(sorted(m for m in ('sqlmodel', 'sqlalchemy.orm', 'fleetctl.models') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out
