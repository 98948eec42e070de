"""board identity: serial plus position, for boards that share a serial (NVIDIA GB200/GB300 modules)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 19:40:00

A board's serial was unique alone. NVIDIA GB200/GB300 trays report one serial
per superchip module, shared by its two GPUs, so a board is now (serial,
position): ``position`` is NULL for a serial of the board's own (unique alone,
by a partial index, since two NULLs never collide in a unique constraint) and
1.. among boards that share one.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# 0001 created the serial's unique constraint without a name. PostgreSQL named
# it by its own rule; SQLite has no name at all, so batch mode is given a naming
# convention that names the reflected constraint (Alembic's documented way to
# drop an unnamed constraint on SQLite).
_PG_SERIAL_UNIQUE = "accelerator_board_serial_key"
_SQLITE_NAMES = {"uq": "uq_%(table_name)s_%(column_0_name)s"}
_ALONE = sa.text("position IS NULL")


def _serial_unique_name(dialect: str) -> str:
    """The name of the serial's unique constraint as this database has it (the convention's where it has none)."""
    for uc in sa.inspect(op.get_bind()).get_unique_constraints("accelerator_board"):
        if uc["column_names"] == ["serial"]:
            return uc["name"] or "uq_accelerator_board_serial"
    return _PG_SERIAL_UNIQUE if dialect == "postgresql" else "uq_accelerator_board_serial"


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    with op.batch_alter_table("accelerator_board", naming_convention=_SQLITE_NAMES if dialect == "sqlite" else None) as batch_op:
        batch_op.add_column(sa.Column("position", sa.Integer(), nullable=True))
        batch_op.drop_constraint(_serial_unique_name(dialect), type_="unique")
        batch_op.create_unique_constraint("uq_board_serial_position", ["serial", "position"])
        batch_op.create_check_constraint("ck_board_position", "position >= 1")
    op.create_index("uq_board_serial_alone", "accelerator_board", ["serial"], unique=True,
                    sqlite_where=_ALONE, postgresql_where=_ALONE)  # fmt: skip


def downgrade() -> None:
    # Boards sharing a serial cannot be kept under a unique serial: refuse rather than lose them.
    shared = op.get_bind().execute(sa.text("SELECT count(*) FROM accelerator_board WHERE position IS NOT NULL")).scalar()
    if shared:
        raise RuntimeError(f"{shared} boards share a serial (position set); remove them before going below revision 0009")
    op.drop_index("uq_board_serial_alone", table_name="accelerator_board")
    with op.batch_alter_table("accelerator_board") as batch_op:
        batch_op.drop_constraint("ck_board_position", type_="check")
        batch_op.drop_constraint("uq_board_serial_position", type_="unique")
        batch_op.drop_column("position")
        batch_op.create_unique_constraint(_PG_SERIAL_UNIQUE, ["serial"])
