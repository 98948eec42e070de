"""health sweep: runs, per-target verdicts, findings, open problems, cursors, acks

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 18:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _ts(name: str, nullable: bool = True, index: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable, index=index)


def upgrade() -> None:
    op.create_table(
        "sweep_run",
        sa.Column("id", sa.Integer(), primary_key=True),
        _ts("started_at", nullable=False),
        _ts("finished_at"),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("level", sa.String(), nullable=False),
        sa.Column("selector", sa.String(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("servers", sa.Integer(), nullable=False),
        sa.Column("switches", sa.Integer(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("worst_new", sa.String(), nullable=True),
    )
    op.create_index("ix_sweep_run_started_at", "sweep_run", ["started_at"])
    op.create_table(
        "sweep_target",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("sweep_run.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("site", sa.String(), nullable=True),
        sa.Column("rack", sa.String(), nullable=True),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("elapsed", sa.Float(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.UniqueConstraint("run_id", "kind", "name", name="uq_sweep_target"),
    )
    op.create_index("ix_sweep_target_name", "sweep_target", ["name"])
    op.create_table(
        "finding",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("sweep_run.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("check", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        _ts("first_seen", nullable=False),
        _ts("last_seen", nullable=False),
        sa.Column("new", sa.Boolean(), nullable=False),
        sa.Column("ack_id", sa.Integer(), nullable=True),
        sa.UniqueConstraint("run_id", "kind", "target", "check", "subject", name="uq_finding"),
    )
    op.create_index("ix_finding_key", "finding", ["kind", "target", "check", "subject"])
    op.create_table(
        "finding_state",
        sa.Column("kind", sa.String(), primary_key=True),
        sa.Column("target", sa.String(), primary_key=True),
        sa.Column("check", sa.String(), primary_key=True),
        sa.Column("subject", sa.String(), primary_key=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        _ts("first_seen", nullable=False),
        _ts("last_seen", nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
    )
    op.create_table(
        "sweep_cursor",
        sa.Column("kind", sa.String(), primary_key=True),
        sa.Column("target", sa.String(), primary_key=True),
        sa.Column("value", sa.JSON(), nullable=False),
        _ts("updated_at", nullable=False),
    )
    op.create_table(
        "finding_ack",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("check", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        _ts("created_at", nullable=False),
        _ts("until"),
        _ts("ended_at"),
        sa.Column("ended_why", sa.String(), nullable=True),
    )
    op.create_index("ix_finding_ack_target", "finding_ack", ["target"])


def downgrade() -> None:
    for name in ("finding_ack", "sweep_cursor", "finding_state", "finding", "sweep_target", "sweep_run"):
        op.drop_table(name)
