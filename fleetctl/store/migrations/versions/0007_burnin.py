"""burn-in: runs, a verdict per board with evidence and telemetry, boards to ship back (RMA)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 21:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _ts(name: str, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "burnin_run",
        sa.Column("id", sa.Integer(), primary_key=True),
        _ts("started_at", nullable=False),
        _ts("finished_at"),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("level", sa.String(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("selector", sa.String(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("servers", sa.JSON(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
    )
    op.create_index("ix_burnin_run_started_at", "burnin_run", ["started_at"])
    op.create_index("ix_burnin_run_state", "burnin_run", ["state"])
    op.create_index("ix_burnin_run_kind", "burnin_run", ["kind"])
    op.create_table(
        "burnin_result",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("burnin_run.id", ondelete="CASCADE"), nullable=False),
        sa.Column("server", sa.String(), nullable=False),
        sa.Column("serial", sa.String(), nullable=True),
        sa.Column("device", sa.String(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("verdict", sa.String(), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("telemetry", sa.JSON(), nullable=False),
        _ts("started_at", nullable=False),
        _ts("finished_at", nullable=False),
        sa.UniqueConstraint("run_id", "server", "device", name="uq_burnin_result"),
    )
    op.create_index("ix_burnin_result_run_id", "burnin_result", ["run_id"])
    op.create_index("ix_burnin_result_server", "burnin_result", ["server"])
    op.create_index("ix_burnin_result_serial", "burnin_result", ["serial"])
    op.create_table(
        "board_rma",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("board_id", sa.Integer(), sa.ForeignKey("accelerator_board.id", ondelete="SET NULL"), nullable=True),
        sa.Column("serial", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("server", sa.String(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        _ts("opened_at", nullable=False),
        _ts("closed_at"),
        sa.Column("closed_reason", sa.String(), nullable=True),
    )
    op.create_index("ix_board_rma_board_id", "board_rma", ["board_id"])
    op.create_index("ix_board_rma_serial", "board_rma", ["serial"])
    op.create_index("ix_board_rma_opened_at", "board_rma", ["opened_at"])


def downgrade() -> None:
    for name in ("board_rma", "burnin_result", "burnin_run"):
        op.drop_table(name)
