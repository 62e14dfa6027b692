"""Turning a query result into columns. Kept apart so the fast path can change alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from gpugap.report.database import Database


def read_frame(db: Database, sql: str, columns: list[str]) -> pd.DataFrame:
    cursor = db.conn.execute(sql)
    rows = cursor.fetchall()
    if not rows:
        return pd.DataFrame({c: pd.Series([], dtype="int64") for c in columns})
    return pd.DataFrame.from_records(rows, columns=columns)
