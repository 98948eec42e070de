"""The table models' base class and shared column helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import Column, DateTime
from sqlmodel import SQLModel

# Re-exported: defined below the layers, so that what only needs the time need not import SQLModel.
from fleetctl.times import utcnow as utcnow

if TYPE_CHECKING:
    from sqlalchemy import Table


class TableModel(SQLModel):
    """The base of every table model: SQLModel, with the class's Table
    (``Server.__table__``, set by the metaclass) declared for the type checker."""

    if TYPE_CHECKING:
        __table__: ClassVar[Table]


def tz_column(*, nullable: bool = True, default: Any = None, index: bool = False) -> Any:
    """A timestamp column that keeps its time zone on PostgreSQL and SQLite alike."""
    return Column(DateTime(timezone=True), nullable=nullable, default=default, index=index)
