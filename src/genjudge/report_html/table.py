"""A table as the page shows it (every cell a string), shared by the page's sections."""

from __future__ import annotations

from dataclasses import dataclass

MAX_TABLE_ROWS = 500


@dataclass
class Table:
    """A table as the page shows it: every cell a string (None shows as empty); the page lists the first
    `limit` rows and says how many there are."""

    head: list[str]
    rows: list[list[str]]
    cls: str = ""
    limit: int = MAX_TABLE_ROWS

    def __post_init__(self):
        self.rows = [["" if c is None else str(c) for c in r] for r in self.rows]

    @property
    def shown(self) -> list[list[str]]:
        return self.rows[: self.limit]

    def column(self, name: str) -> list[str]:
        i = self.head.index(name)
        return [r[i] for r in self.rows]
