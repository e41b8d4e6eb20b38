"""A task's leaderboard as values: how each bundle is scored, and the best of them ranked.

Scoring is a function of one row and its task's definition (`TaskScoring`): the metric the task
ranks by, the row's value of it, whether its dataset revision is stale, and its 95% interval
where the metric is a proportion. The all-tasks table keeps those beside each row, so a new
bundle never changes another bundle's row. Ranking needs the task's rows together, but only
those few columns of them (`rank_order`, on Arrow columns): the full rows are read for the best
ones only (`TaskBoard`), which is all the task's table and the card show. Both are drawn from
the one `TaskBoard`, so the viewer and the card always rank alike.
"""

from __future__ import annotations

import hashlib
import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from bundler.hub.leaderboard.rows import BoardRow, metric_columns
from bundler.hub.repo.paths import task_config_name
from bundler.hub.tasks.definitions import TaskDefinition

INTERVALS = "wilson-95, holding the score"
"""How a proportion's interval is computed, among the facts its rows are scored by: the
intervals were once left a rounding error short of a perfect score (and above a score of 0),
so a task whose rows were scored so is scored again by its next commit."""

RANK_COLUMNS = ["bundle_id", "published_at", "stale", "score", "ci_low", "ci_high"]
"""What ranking reads of each row of a task: its score and what orders ties."""


@dataclass(frozen=True)
class RowScore:
    """What the task's definition makes of one row, kept beside it in the all-tasks table."""

    ranking_metric: str | None = None
    score: float | None = None
    stale: bool = False
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class TaskScoring:
    """How a task scores its bundles. When the maintainers defined the task
    (`bundler.hub.tasks.definitions`), by the defined metric, in its direction (`higher` or
    `lower` is better); otherwise, as a fallback the card warns about, by `fallback`: the first
    numeric metric of the earliest-published bundle that has one (`first_metric`), higher
    first. A bundle whose dataset revision the definition no longer accepts is stale."""

    definition: TaskDefinition | None = None
    fallback: str | None = None

    @property
    def metric(self) -> str | None:
        return self.definition.metric if self.definition is not None else self.fallback

    @property
    def direction(self) -> Literal["higher", "lower"]:
        return self.definition.direction if self.definition is not None else "higher"

    @property
    def by_intervals(self) -> bool:
        """Whether the metric is a declared proportion: each entry then has a 95% Wilson
        interval, and ranks go by the intervals."""
        return self.definition is not None and self.definition.metric_kind == "proportion"

    @property
    def digest(self) -> str:
        """What the scores depend on, in a few bytes: rows scored under another digest are
        scored again."""
        accepted = sorted(self.definition.revisions) if self.definition is not None else []
        facts = [self.metric, self.direction, self.by_intervals, accepted]
        facts += [INTERVALS] if self.by_intervals else []
        return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]

    def stale(self, row: BoardRow) -> bool:
        """Whether `row` ran on a dataset revision the definition no longer accepts (a
        definition that lists none accepts any)."""
        if self.definition is None or not self.definition.revisions:
            return False
        return row.resolved_revision not in self.definition.revisions

    def value(self, row: BoardRow) -> float | None:
        """The row's value of the ranking metric: its first numeric metric of that name."""
        if self.metric is None:
            return None
        return next(
            (m.number for m in row.metrics if m.name == self.metric and m.number is not None), None
        )

    def interval(self, row: BoardRow, value: float | None) -> tuple[float, float] | None:
        """The 95% Wilson score interval of `value`, n the rows present; None where the task
        ranks by value, or the value is no proportion."""
        if not self.by_intervals or value is None or not 0 <= value <= 1 or row.rows_present < 1:
            return None
        return wilson_interval(value, row.rows_present)

    def score(self, row: BoardRow) -> RowScore:
        value = self.value(row)
        low, high = self.interval(row, value) or (None, None)
        return RowScore(self.metric, value, self.stale(row), low, high)


def first_metric(rows_by_date: Iterable[BoardRow]) -> str | None:
    """The first numeric metric (in metrics.json order) of the earliest row that has one."""
    for row in rows_by_date:
        for metric in row.metrics:
            if metric.number is not None:
                return metric.name
    return None


def rank_order(
    table: pa.Table, scoring: TaskScoring, limit: int | None = None
) -> tuple[list[str], list[int | None]]:
    """The bundle ids of one task's best `limit` rows (all when None), best first, and their
    ranks; `table` holds RANK_COLUMNS of the task's rows.

    Rows are ordered by score, rows without one last, then by publication date and bundle id;
    stale rows come after every current one. Ranks are competition ranks (1, 1, 3) by the
    score; where the task ranks by intervals, they go as Chatbot Arena's: 1 + the entries
    whose whole interval lies above this one's (below, where lower is better), stale entries
    after every current one, entries no interval separates sharing a rank (ties), none for an
    entry without an interval. An entry's rank depends only on the entries ordered before it,
    so the best rows are ranked from their own columns."""
    descending = "descending" if scoring.direction == "higher" else "ascending"
    keys = [("stale", "ascending"), ("score", descending)]
    keys += [("published_at", "ascending"), ("bundle_id", "ascending")]
    order = pc.sort_indices(table, sort_keys=keys)  # nulls last, whatever the order
    if not scoring.by_intervals:
        best = table.take(order[:limit] if limit is not None else order)
        return best.column("bundle_id").to_pylist(), _competition_ranks(best)
    ranked = table.take(order)
    arena = _arena_ranks(ranked, scoring.direction)
    stale = ranked.column("stale").to_pylist()
    places = sorted(
        range(len(arena)), key=lambda i: (stale[i], arena[i] is None, arena[i] or 0, i)
    )[:limit]
    ids = ranked.column("bundle_id").to_pylist()
    return [ids[i] for i in places], [arena[i] for i in places]


def _competition_ranks(best: pa.Table) -> list[int | None]:
    ranks: list[int | None] = []
    previous: float | None = None
    for position, score in enumerate(best.column("score").to_pylist(), start=1):
        if score is None:
            ranks.append(None)
        elif score == previous:
            ranks.append(ranks[-1])
        else:
            ranks.append(position)
        previous = score
    return ranks


def _arena_ranks(ranked: pa.Table, direction: str) -> list[int | None]:
    stale = ranked.column("stale").to_pylist()
    lows, highs = ranked.column("ci_low").to_pylist(), ranked.column("ci_high").to_pylist()
    ranks: list[int | None] = [None] * len(stale)
    offset = 0
    for group in (False, True):
        members = [i for i, s in enumerate(stale) if s is group and lows[i] is not None]
        if direction == "higher":
            bounds = sorted(lows[i] for i in members)
            for i in members:
                ranks[i] = offset + 1 + len(bounds) - bisect_right(bounds, highs[i])
        else:
            bounds = sorted(highs[i] for i in members)
            for i in members:
                ranks[i] = offset + 1 + bisect_left(bounds, lows[i])
        offset += len(members)
    return ranks


@dataclass(frozen=True)
class TaskBoard:
    """One task's leaderboard: its best bundles in rank order with their ranks, how many it
    has in all, and the metric columns of those shown.

    `columns` is the union of the shown bundles' metric columns, in the order they first
    appear when the bundles are taken earliest published first, each in its metrics.json
    order, with the ranking column moved first.
    """

    task: str
    rows: list[BoardRow]
    ranked: list[int | None]
    total: int
    complete: int
    """Bundles of the task in all, and those whose coverage is complete."""
    scoring: TaskScoring = field(default_factory=TaskScoring)
    columns: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    values: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, task: str, rows: Sequence[BoardRow], definition: TaskDefinition | None = None
    ) -> TaskBoard:
        """The board of every row given (all of a task's)."""
        by_date = sorted(rows, key=lambda row: (row.published, row.bundle_id))
        scoring = TaskScoring(definition, None if definition else first_metric(by_date))
        table = rank_table(rows, scoring)
        ids, ranks = rank_order(table, scoring)
        found = {row.bundle_id: row for row in rows}
        complete = sum(row.coverage == "complete" for row in rows)
        return cls.shown(task, [found[i] for i in ids], ranks, len(rows), complete, scoring)

    @classmethod
    def shown(
        cls,
        task: str,
        rows: list[BoardRow],
        ranks: list[int | None],
        total: int,
        complete: int,
        scoring: TaskScoring,
    ) -> TaskBoard:
        """The board of the best `rows` of a task, ranked (`rank_order`)."""
        names: dict[str, str] = {}
        values: dict[str, dict[str, float]] = {}
        for row in sorted(rows, key=lambda row: (row.published, row.bundle_id)):
            metrics = metric_columns(row)
            values[row.bundle_id] = {metric.column: metric.value for metric in metrics}
            for metric in metrics:
                names.setdefault(metric.column, metric.name)
        columns = list(names)
        ranking = next((c for c, name in names.items() if name == scoring.metric), None)
        if ranking is not None:
            columns = [ranking, *(column for column in columns if column != ranking)]
        return cls(task, rows, ranks, total, complete, scoring, columns, names, values)

    @property
    def definition(self) -> TaskDefinition | None:
        return self.scoring.definition

    def stale(self, row: BoardRow) -> bool:
        return self.scoring.stale(row)

    @property
    def config(self) -> str:
        return task_config_name(self.task)

    @property
    def sort_column(self) -> str | None:
        """The ranking column; None when no bundle shown has it (a defined metric none
        reports)."""
        if not self.columns or self.names[self.columns[0]] != self.scoring.metric:
            return None
        return self.columns[0]

    @property
    def direction(self) -> str:
        return self.scoring.direction

    @property
    def by_intervals(self) -> bool:
        return self.scoring.by_intervals

    def mapped(self, columns: Sequence[str]) -> list[tuple[str, str]]:
        """(column, metric name) for those of `columns` that are not the metric's name."""
        return [(column, self.names[column]) for column in columns if column != self.names[column]]

    def value(self, row: BoardRow, column: str | None) -> float | None:
        return None if column is None else self.values[row.bundle_id].get(column)

    def interval(self, row: BoardRow) -> tuple[float, float] | None:
        """The row's 95% Wilson score interval of its ranking metric, n its rows present."""
        return self.scoring.interval(row, self.value(row, self.sort_column))

    def ranks(self) -> list[int | None]:
        return list(self.ranked)


def rank_table(rows: Iterable[BoardRow], scoring: TaskScoring) -> pa.Table:
    """RANK_COLUMNS of `rows`, scored now (for rows not yet in a table)."""
    cells: dict[str, list[object]] = {name: [] for name in RANK_COLUMNS}
    for row in rows:
        score = scoring.score(row)
        cells["bundle_id"].append(row.bundle_id)
        cells["published_at"].append(row.published_at)
        cells["stale"].append(score.stale)
        cells["score"].append(score.score)
        cells["ci_low"].append(score.ci_low)
        cells["ci_high"].append(score.ci_high)
    types = [pa.string(), pa.string(), pa.bool_(), pa.float64(), pa.float64(), pa.float64()]
    return pa.table(
        {name: pa.array(cells[name], kind) for name, kind in zip(RANK_COLUMNS, types, strict=True)}
    )


Z_95 = 1.959963984540054
"""The standard normal quantile of 0.975: a two-sided 95% interval."""


def wilson_interval(proportion: float, rows: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of `proportion` observed over `rows` (E. B. Wilson, 1927):
    unlike p ± z·sqrt(p(1-p)/n) it stays within [0, 1] and is not empty at 0 or 1.

    It always holds the proportion, as the exact interval does: in floating point the closed
    form gives 1 over 10 rows an upper bound of 0.9999999999999999 and 0 over 100 a lower
    bound of 3.5e-18, an interval beside its own score (a negative error bar on the chart,
    which matplotlib refuses), so each bound is clamped to the proportion."""
    z2_n = z * z / rows
    centre = (proportion + z2_n / 2) / (1 + z2_n)
    half = z * math.sqrt(proportion * (1 - proportion) / rows + z2_n / (4 * rows)) / (1 + z2_n)
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return min(low, proportion), max(high, proportion)
