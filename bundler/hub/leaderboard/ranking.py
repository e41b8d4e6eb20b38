"""A task's leaderboard as values: its bundles ranked, and its metric columns.

Both the task's table (`bundler.hub.leaderboard.tables`) and the card's board
(`bundler.hub.leaderboard.card`) are drawn from the one `TaskBoard`, so the viewer and the card
always rank alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from bundler.hub.leaderboard.rows import BundleRow, metric_columns
from bundler.hub.repo.paths import task_config_name
from bundler.hub.tasks.definitions import TaskDefinition


@dataclass(frozen=True)
class TaskBoard:
    """One task's leaderboard: its bundles best first, and its metric columns.

    `columns` is the union of the bundles' metric columns, in the order they first appear
    when the bundles are taken earliest published first, each in its metrics.json order, with
    the ranking column moved first. When the maintainers defined the task
    (`bundler.hub.tasks.definitions`), the ranking column is the defined metric's, in its direction
    (`higher` or `lower` is better); otherwise, as a fallback the card warns about, the first
    numeric metric of the earliest-published bundle that has one, higher first. Rows are
    ordered by it, bundles without it last, then by publication date and bundle id; stale rows
    (a dataset revision the definition no longer accepts) come after every current one.
    """

    task: str
    rows: list[BundleRow]
    columns: list[str]
    names: dict[str, str]
    values: dict[str, dict[str, float]]
    definition: TaskDefinition | None = None

    @classmethod
    def of(
        cls, task: str, rows: Sequence[BundleRow], definition: TaskDefinition | None = None
    ) -> TaskBoard:
        by_date = sorted(rows, key=lambda row: (row.published, row.bundle_id))
        names: dict[str, str] = {}
        values: dict[str, dict[str, float]] = {}
        for row in by_date:
            metrics = metric_columns(row)
            values[row.bundle_id] = {metric.column: metric.value for metric in metrics}
            for metric in metrics:
                names.setdefault(metric.column, metric.name)
        columns = list(names)
        if definition is not None:
            defined = [column for column, name in names.items() if name == definition.metric]
            ranking = defined[0] if defined else None
            sign = -1.0 if definition.direction == "higher" else 1.0
        else:
            ranking, sign = next(iter(names), None), -1.0
        if ranking is not None:
            columns = [ranking, *(column for column in columns if column != ranking)]

        def rank_key(row: BundleRow) -> tuple[bool, bool, float, datetime, str]:
            score = values[row.bundle_id].get(ranking) if ranking is not None else None
            stale = is_stale(row, definition)
            return (stale, score is None, sign * (score or 0.0), row.published, row.bundle_id)

        ranked = sorted(by_date, key=rank_key)
        return cls(task, ranked, columns, names, values, definition)

    def stale(self, row: BundleRow) -> bool:
        return is_stale(row, self.definition)

    @property
    def config(self) -> str:
        return task_config_name(self.task)

    @property
    def sort_column(self) -> str | None:
        """The ranking column; None when no bundle has it (a defined metric none reports)."""
        if not self.columns:
            return None
        first = self.columns[0]
        if self.definition is not None and self.names[first] != self.definition.metric:
            return None
        return first

    @property
    def direction(self) -> str:
        return self.definition.direction if self.definition is not None else "higher"

    @property
    def complete(self) -> int:
        """Bundles of the task whose coverage is complete."""
        return sum(row.coverage == "complete" for row in self.rows)

    def mapped(self, columns: Sequence[str]) -> list[tuple[str, str]]:
        """(column, metric name) for those of `columns` that are not the metric's name."""
        return [(column, self.names[column]) for column in columns if column != self.names[column]]

    def value(self, row: BundleRow, column: str | None) -> float | None:
        return None if column is None else self.values[row.bundle_id].get(column)

    def ranks(self) -> list[int | None]:
        """Competition ranks (1, 1, 3) by the ranking column; rows without it get none."""
        ranks: list[int | None] = []
        previous: float | None = None
        for position, row in enumerate(self.rows, start=1):
            score = self.value(row, self.sort_column)
            if score is None:
                ranks.append(None)
            elif score == previous:
                ranks.append(ranks[-1])
            else:
                ranks.append(position)
            previous = score
        return ranks


def is_stale(row: BundleRow, definition: TaskDefinition | None) -> bool:
    """Whether `row` ran on a dataset revision its task's definition no longer accepts (a
    definition that lists none accepts any)."""
    if definition is None or not definition.revisions:
        return False
    return row.resolved_revision not in definition.revisions
