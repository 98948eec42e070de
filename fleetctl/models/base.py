"""Shared column helpers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime


def utcnow() -> datetime:
    return datetime.now(UTC)


def tz_column(*, nullable: bool = True, default: Any = None, index: bool = False) -> Any:
    """A timestamp column that keeps its time zone on PostgreSQL and SQLite alike."""
    return Column(DateTime(timezone=True), nullable=nullable, default=default, index=index)
