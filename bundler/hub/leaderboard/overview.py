"""The card's view across tasks: player setups by tasks, each cell a setup's ranking score on a
task, drawn from the task boards alone (`TaskBoard`), so it ranks as they do.

A setup is a player and its capabilities (`<player>_<fp8>`, the bundle's folder). Its entry
on a task is its best-placed bundle there that has a rank, among the task's best
OVERVIEW_DEPTH (what a commit reads of every task: the card is drawn from every task's best
rows, never from all of them). The overview shows OVERVIEW_ROWS
setups: those ranked on the most tasks, then by the lowest mean of those ranks, then by the
highest mean score (`Setup.mean_score`), then by model name and setup: at 40 rows a proportion's
Wilson intervals often all overlap, every entry of a task shares rank 1, and the scores are
what still tells the setups apart.
Its columns are at most OVERVIEW_TASKS tasks, in the card's order: where more tasks are
ranked, those on which most of the shown setups are ranked (then by name). So it stays a few
kilobytes however many bundles and tasks the leaderboard holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import BoardRow

OVERVIEW_ROWS = 20
"""Setups the overview shows at most."""
OVERVIEW_TASKS = 20
"""Tasks (columns) the overview shows at most; every task's board is on the card."""
OVERVIEW_DEPTH = 20
"""The best entries of each task a setup's entry is found among."""


@dataclass(frozen=True)
class Entry:
    """A setup's best-placed ranked bundle on one task."""

    row: BoardRow
    rank: int
    score: float | None
    stale: bool
    scaled: float | None = None
    """The score on the task's scale from 0 (the worst of the overview's entries there) to 1
    (the best), in the task's direction (`Setup.mean_score`); None for no finite score."""

    @property
    def marked(self) -> bool:
        """Not a complete run on a pinned, still accepted dataset revision: as a board marks
        it."""
        return self.stale or self.row.coverage != "complete" or not self.row.key.is_pinned


@dataclass
class Setup:
    """One player setup's entries, by task."""

    name: str
    model_name: str
    entries: dict[str, Entry] = field(default_factory=dict)

    @property
    def mean_rank(self) -> float:
        return sum(entry.rank for entry in self.entries.values()) / len(self.entries)

    @property
    def mean_score(self) -> float | None:
        """The mean of its entries' scaled scores (`Entry.scaled`); None where none has one.

        Raw scores are not averaged: tasks score on their own scales (a proportion in [0, 1]
        beside, say, a latency in seconds, lower better), so the mean would be one task's.
        Each task's scores are scaled from the worst of its entries found here (0) to the best
        (1), turned round where lower is better, so that every task weighs alike; where all of
        a task's entries score alike, each is 1."""
        scaled = [entry.scaled for entry in self.entries.values() if entry.scaled is not None]
        return sum(scaled) / len(scaled) if scaled else None

    def order(self) -> tuple[int, float, float, str, str]:
        score = self.mean_score
        return (
            -len(self.entries),
            self.mean_rank,
            math.inf if score is None else -score,  # none: after every score
            self.model_name,
            self.name,
        )


@dataclass(frozen=True)
class Overview:
    tasks: list[str]
    """The columns: tasks with a ranking metric, in the card's order, at most OVERVIEW_TASKS."""
    setups: list[Setup]
    """The rows, best first, at most OVERVIEW_ROWS."""
    setups_ranked: int
    """Setups among the best OVERVIEW_DEPTH of any task: how many the overview leaves out is
    this less its rows."""
    tasks_ranked: int


def overview(
    boards: Sequence[TaskBoard], rows: int = OVERVIEW_ROWS, tasks: int = OVERVIEW_TASKS
) -> Overview:
    """The overview of these boards (see the module docstring)."""
    ranked = [board for board in boards if board.sort_column is not None]
    setups: dict[str, Setup] = {}
    for board in ranked:
        best_rows = zip(board.rows[:OVERVIEW_DEPTH], board.ranks()[:OVERVIEW_DEPTH], strict=True)
        for row, rank in best_rows:
            if rank is None:
                continue
            name = row.bundle_id.split("/", 1)[0]  # its player_dir, without parsing the id
            setup = setups.setdefault(name, Setup(name, row.model_name))
            if board.task not in setup.entries:
                score = board.value(row, board.sort_column)
                setup.entries[board.task] = Entry(row, rank, score, board.stale(row))
    for board in ranked:
        on_task = [setup for setup in setups.values() if board.task in setup.entries]
        scores = [setup.entries[board.task].score for setup in on_task]
        for setup, scaled in zip(on_task, _scaled(board.direction, scores), strict=True):
            setup.entries[board.task] = replace(setup.entries[board.task], scaled=scaled)
    best = sorted(setups.values(), key=Setup.order)[:rows]
    names = [board.task for board in ranked]
    covered = {task: sum(task in setup.entries for setup in best) for task in names}
    kept = set(sorted(names, key=lambda task: (-covered[task], task))[:tasks])
    return Overview([task for task in names if task in kept], best, len(setups), len(ranked))


def _scaled(direction: str, scores: list[float | None]) -> list[float | None]:
    """Each of a task's `scores` on the scale `Entry.scaled` says: 0 the worst finite one, 1
    the best, by `direction`; 1 for every one where they all score alike; None for none."""
    finite = [score for score in scores if score is not None and math.isfinite(score)]
    if not finite:
        return [None] * len(scores)
    low, high = min(finite), max(finite)
    scaled: list[float | None] = []
    for score in scores:
        if score is None or not math.isfinite(score):
            scaled.append(None)
        elif high == low:
            scaled.append(1.0)
        else:
            up = (score / 2 - low / 2) / (high / 2 - low / 2)  # halved: finite at any scale
            scaled.append(up if direction == "higher" else 1.0 - up)
    return scaled
