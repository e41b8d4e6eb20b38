"""The board orders what it shows (issue 37, 6): across tasks, setups that tie in mean rank go by
their mean score, each task's in its direction, then by model name; charts are sized to their
entries, a proportion's axis ends at 1, and bars are named by the model's name as recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from factory import make_row

from bundler.hub.leaderboard.overview import overview
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.tasks.definitions import TaskDefinition

PROPORTION = TaskDefinition(
    hf_repo_id="GPTNT/expert-VQA", split="test", metric="em.acc", metric_kind="proportion"
)


def entry(player: str, task: str, metrics: dict[str, dict[str, float]], rows: int) -> TableRow:
    return make_row(player, task=task, metrics=metrics, rows_present=rows, expected_rows=rows)


def boards(rows: Sequence[TableRow], definitions: dict[str, TaskDefinition]) -> list[TaskBoard]:
    tasks = sorted({row.task_name for row in rows})
    return [
        TaskBoard.of(task, [r for r in rows if r.task_name == task], definitions[task])
        for task in tasks
    ]


def test_ties_at_forty_rows_go_by_mean_score_then_by_model_name() -> None:
    # At 40 rows every Wilson interval here overlaps every other: each entry is ranked 1.
    scores = {"zeta": 0.425, "alpha": 0.275, "mid-b": 0.35, "mid-a": 0.35}
    rows = [entry(p, t, {"em": {"acc": s}}, 40) for p, s in scores.items() for t in ("t1", "t2")]
    found = overview(boards(rows, {"t1": PROPORTION, "t2": PROPORTION}))
    assert {entry.rank for setup in found.setups for entry in setup.entries.values()} == {1}
    assert [setup.model_name for setup in found.setups] == ["zeta", "mid-a", "mid-b", "alpha"]
    assert [setup.mean_score for setup in found.setups] == pytest.approx([1.0, 0.5, 0.5, 0.0])


def test_a_lower_is_better_task_counts_turned_round_and_each_task_on_its_own_scale() -> None:
    # An error rate, lower better, beside an accuracy: every interval overlaps on both tasks,
    # so every setup has mean rank 1.
    rows = [
        entry(player, task, {metric: {"rate": score}}, 40)
        for player, accuracy, errors in (("a", 0.30, 0.30), ("b", 0.40, 0.45), ("c", 0.35, 0.25))
        for task, metric, score in (("t1", "em", accuracy), ("t2", "err", errors))
    ]
    accuracy = PROPORTION.model_copy(update={"metric": "em.rate"})
    errors = PROPORTION.model_copy(update={"metric": "err.rate", "direction": "lower"})
    found = overview(boards(rows, {"t1": accuracy, "t2": errors}))
    assert {setup.mean_rank for setup in found.setups} == {1.0}
    # t1 scaled: a 0, c 0.5, b 1; t2 turned round: c 1, a 0.75, b 0. Read the wrong way, b's
    # 0.45 errors would put it first.
    scores = {setup.model_name: setup.mean_score for setup in found.setups}
    assert scores == pytest.approx({"c": 0.75, "b": 0.5, "a": 0.375})
    assert [setup.model_name for setup in found.setups] == ["c", "b", "a"]
