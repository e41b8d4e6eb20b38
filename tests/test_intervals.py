"""Scores with their uncertainty: a task whose metric is a declared proportion gives each entry
its 95% Wilson score interval, and ranks go as Chatbot Arena's (1 + the entries whose whole
interval lies above). Every expected value is computed here independently: the interval as
the set of proportions a two-sided z-test at 95% would not reject (solved by bisection, not
by the closed form the bundler uses), and the ranks by comparing every pair."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, make_row
from helpers import run_cli
from hubserver import HubServer
from test_card_refresh import card_text
from test_upload import make_bundles, publish, table_rows

from bundler.hub.leaderboard.ranking import TaskBoard, wilson_interval
from bundler.hub.repo.paths import task_table
from bundler.hub.tasks.definitions import TaskDefinition

Z = 1.959963984540054


def not_rejected(p_hat: float, n: int, p: float) -> bool:
    """Whether a score test at 95% keeps `p` as the true proportion after `p_hat` of `n`."""
    return abs(p_hat - p) <= Z * math.sqrt(p * (1 - p) / n) if 0 < p < 1 else p_hat == p


def by_bisection(p_hat: float, n: int) -> tuple[float, float]:
    def edge(inside: float, outside: float) -> float:
        for _ in range(200):
            middle = (inside + outside) / 2
            inside, outside = (
                (middle, outside) if not_rejected(p_hat, n, middle) else (inside, middle)
            )
        return inside

    return edge(p_hat, 0.0), edge(p_hat, 1.0)


@pytest.mark.parametrize(
    ("score", "rows", "published"),
    [(0.824, 500, (0.7882, 0.8549)), (0.95, 40, (0.8350, 0.9862)), (0.5, 64, None), (0.0, 7, None)],
)
def test_the_interval_is_the_score_tests_acceptance_region(
    score: float, rows: int, published: tuple[float, float] | None
) -> None:
    low, high = wilson_interval(score, rows)
    expected = by_bisection(score, rows)
    assert low == pytest.approx(expected[0], abs=1e-9) and high == pytest.approx(
        expected[1], abs=1e-9
    )
    if published is not None:  # the worked examples of the interval's literature
        assert (round(low, 4), round(high, 4)) == published


DEFINITION = TaskDefinition(
    hf_repo_id="GPTNT/expert-VQA", split="test", metric="em.acc", metric_kind="proportion"
)


def arena(entries: dict[str, tuple[float, int]], direction: str) -> dict[str, int]:
    """Chatbot Arena's rule, pair by pair."""
    bounds = {name: by_bisection(p, n) for name, (p, n) in entries.items()}

    def beats(a: str, b: str) -> bool:
        return bounds[a][0] > bounds[b][1] if direction == "higher" else bounds[a][1] < bounds[b][0]

    return {name: 1 + sum(beats(other, name) for other in entries) for name in entries}


@pytest.mark.parametrize("direction", ["higher", "lower"])
def test_ranks_go_by_the_intervals_and_overlapping_ones_tie(direction: str) -> None:
    entries = {
        "a": (0.90, 500), "b": (0.88, 500), "c": (0.80, 500), "d": (0.95, 10), "e": (0.60, 2000),
    }  # fmt: skip
    rows = [
        make_row(name, metrics={"em": {"acc": p}}, rows_present=n, expected_rows=n)
        for name, (p, n) in entries.items()
    ]
    board = TaskBoard.of("t", rows, DEFINITION.model_copy(update={"direction": direction}))
    ranked = {row.player_name: rank for row, rank in zip(board.rows, board.ranks(), strict=True)}
    assert ranked == arena(entries, direction)
    assert [ranked[row.player_name] for row in board.rows] == sorted(ranked.values())
    assert len(set(ranked.values())) < len(entries)  # some no interval separates: ties


def test_a_metric_not_declared_a_proportion_keeps_its_rank_by_value() -> None:
    rows = [make_row(n, metrics={"em": {"acc": p}}) for n, p in (("a", 0.9), ("b", 0.88))]
    plain = DEFINITION.model_copy(update={"metric_kind": "score"})
    board = TaskBoard.of("t", rows, plain)
    assert board.ranks() == [1, 2] and board.interval(board.rows[0]) is None


def test_a_proportion_task_gets_intervals_in_its_table_and_on_its_card(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    spec = RunSpec(task="alpha", model="m", rows=4, metrics={"em": {"acc": 0.75}})
    publish(make_bundles(tmp_path, [spec]), repo_id)
    defined = run_cli(
        "tasks", "define", "alpha", "--repo", repo_id, "--dataset", spec.hf_repo_id,
        "--split", "test", "--metric", "em.acc", "--metric-kind", "proportion",
        env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert defined.returncode == 0, defined.stderr
    (row,) = table_rows(hub, repo_id, task_table("alpha"))
    low, high = by_bisection(0.75, 4)
    assert row["ci_low"] == pytest.approx(low) and row["ci_high"] == pytest.approx(high)
    assert f"0.750 [{low:.3f}, {high:.3f}]" in card_text(hub, repo_id)
    assert "ties that no interval separates" in card_text(hub, repo_id)
