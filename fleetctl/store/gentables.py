"""Write fleetctl/store/tables.py: the schema as light SQLAlchemy Core tables.

The read-only commands (`server list`, `rack show`, ...) run on every
operator keystroke; importing SQLModel (and with it pydantic and the ORM) costs
them more than their query. tables.py describes the same tables with
``sqlalchemy.table()``/``column()`` and nothing else. It is generated from
the SQLModel metadata, and tests/unit/test_tables.py fails when it is stale:

    python -m fleetctl.store.gentables > fleetctl/store/tables.py
"""

from __future__ import annotations

import sys


def render() -> str:
    from sqlalchemy import JSON, Boolean, DateTime, Float, Integer
    from sqlmodel import SQLModel

    import fleetctl.models  # noqa: F401

    def type_of(col) -> str:  # type: ignore[no-untyped-def]
        t = col.type
        if isinstance(t, DateTime):
            return "DateTime(timezone=True)" if t.timezone else "DateTime()"
        if isinstance(t, JSON):
            return "JSON()"
        if isinstance(t, Boolean):
            return "Boolean()"
        if isinstance(t, Integer):
            return "Integer()"
        if isinstance(t, Float):
            return "Float()"
        return "String()"

    lines = [
        '"""The schema as light Core tables for the read path. GENERATED: do not edit.',
        "",
        "Regenerate with: python -m fleetctl.store.gentables > fleetctl/store/tables.py",
        '"""',
        "",
        "from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, String, column, table",
        "",
        "__all__ = [",
    ]
    names = sorted(SQLModel.metadata.tables)
    lines += [f'    "{n}",' for n in names] + ["]", ""]
    for name in names:
        t = SQLModel.metadata.tables[name]
        lines.append(f"{name} = table(")
        lines.append(f'    "{name}",')
        for col in t.columns:
            lines.append(f'    column("{col.name}", {type_of(col)}),')
        lines.append(")")
        lines.append("")
    lines.append("# Keep the imports used whatever the schema holds.")
    lines.append("_TYPES = (JSON, Boolean, DateTime, Float, Integer, String)")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
