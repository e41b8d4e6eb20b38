"""A task's leaderboard as values: its bundles ranked, and its metric columns.

Both the task's table (`bundler.hub.leaderboard.tables`) and the card's board
(`bundler.hub.leaderboard.card`) are drawn from the one `TaskBoard`, so the viewer and the card
always rank alike.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
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
    arena: dict[str, int | None] | None = None
    """Each bundle's rank by its interval, where the task ranks by intervals (`by_intervals`)."""

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
        board = cls(task, ranked, columns, names, values, definition)
        if not board.by_intervals:
            return board
        arena = board.arena_ranks()
        order = {row.bundle_id: place for place, row in enumerate(ranked)}

        def arena_key(row: BundleRow) -> tuple[bool, bool, int, int]:
            rank = arena[row.bundle_id]
            return (board.stale(row), rank is None, rank or 0, order[row.bundle_id])

        return replace(board, rows=sorted(ranked, key=arena_key), arena=arena)

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

    @property
    def by_intervals(self) -> bool:
        """Whether the task's metric is a declared proportion: each entry then has a 95%
        Wilson interval, and ranks go by the intervals."""
        return self.definition is not None and self.definition.metric_kind == "proportion"

    def interval(self, row: BundleRow) -> tuple[float, float] | None:
        """The row's 95% Wilson score interval of its ranking metric, n its rows present;
        None where the task ranks by value, or the score is no proportion."""
        score = self.value(row, self.sort_column)
        if not self.by_intervals or score is None or not 0 <= score <= 1 or row.rows_present < 1:
            return None
        return wilson_interval(score, row.rows_present)

    def arena_ranks(self) -> dict[str, int | None]:
        """Ranks as Chatbot Arena ranks: 1 + the entries whose whole interval lies above this
        one's (below, where lower is better), stale entries after every current one; entries
        no interval separates share a rank (ties). None for an entry without an interval."""
        ranks: dict[str, int | None] = {}
        current = [row for row in self.rows if not self.stale(row)]
        stale = [row for row in self.rows if self.stale(row)]
        offset = 0
        for group in (current, stale):
            intervals = {row.bundle_id: self.interval(row) for row in group}
            known = [found for found in intervals.values() if found is not None]
            if self.direction == "higher":
                lows = sorted(low for low, _ in known)
                above = {b: len(lows) - bisect_right(lows, i[1]) for b, i in intervals.items() if i}
            else:
                highs = sorted(high for _, high in known)
                above = {b: bisect_left(highs, i[0]) for b, i in intervals.items() if i}
            ranks |= {b: (offset + 1 + above[b]) if b in above else None for b in intervals}
            offset += len(known)
        return ranks

    def ranks(self) -> list[int | None]:
        """Competition ranks (1, 1, 3) by the ranking column, or by the intervals where the
        task ranks by them (`arena_ranks`); rows without it get none."""
        if self.arena is not None:
            return [self.arena[row.bundle_id] for row in self.rows]
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


def board_scores(boards: Iterable[TaskBoard]) -> dict[str, tuple[str, float | None]]:
    """Each ranked row's ranking metric and its value of it, by bundle id: the all-tasks
    table's flat `ranking_metric` and `score` (a board without a ranking column names none)."""
    return {
        row.bundle_id: (board.names[board.sort_column], board.value(row, board.sort_column))
        for board in boards
        if board.sort_column is not None
        for row in board.rows
    }


def is_stale(row: BundleRow, definition: TaskDefinition | None) -> bool:
    """Whether `row` ran on a dataset revision its task's definition no longer accepts (a
    definition that lists none accepts any)."""
    if definition is None or not definition.revisions:
        return False
    return row.resolved_revision not in definition.revisions


Z_95 = 1.959963984540054
"""The standard normal quantile of 0.975: a two-sided 95% interval."""


def wilson_interval(proportion: float, rows: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of `proportion` observed over `rows` (E. B. Wilson, 1927):
    unlike p ± z·sqrt(p(1-p)/n) it stays within [0, 1] and is not empty at 0 or 1."""
    z2_n = z * z / rows
    centre = (proportion + z2_n / 2) / (1 + z2_n)
    half = z * math.sqrt(proportion * (1 - proportion) / rows + z2_n / (4 * rows)) / (1 + z2_n)
    return max(0.0, centre - half), min(1.0, centre + half)
