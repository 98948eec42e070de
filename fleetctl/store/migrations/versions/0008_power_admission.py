"""power admissions: a rack's budget and stagger shared by every process and worker

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 04:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "power_admission",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("rack", sa.String(), nullable=False),
        sa.Column("server", sa.String(), nullable=False),
        sa.Column("peak_w", sa.Integer(), nullable=False),
        sa.Column("start_at", sa.Float(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
    )
    op.create_index("ix_power_admission_rack", "power_admission", ["rack"])


def downgrade() -> None:
    op.drop_index("ix_power_admission_rack", table_name="power_admission")
    op.drop_table("power_admission")
