"""No value and no name stops the board: a perfect score and a score of 0 get intervals that hold
them (the closed form's rounding once left 1.0 over 10 rows an upper bound below 1, which drew a
negative error bar that matplotlib refused), a score no bar can show (1.7e308, outside [0, 1]
for a proportion) is named without its bar, NaN and infinities are no scores, and a name of any
length and script is written, cut, on the card. A chart that fails to draw never stops a commit:
the tables and card go without it and the run says which and why. End to end against the test
Hub with the real matplotlib (the charts extra), through the console script where an upload's
first bundle is concerned."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, make_row
from helpers import run_cli, run_cli_process, run_python
from hubserver import HubServer
from test_card_refresh import card, card_text, commit_by_hand
from test_charts import PNG_SIGNATURE, published_board
from test_intervals import by_bisection
from test_upload import make_bundles, publish, repo_files, table_rows, upload

from bundler.hub.leaderboard.chart import MAX_DRAWN, chart_bars, chart_png
from bundler.hub.leaderboard.ranking import TaskBoard, TaskScoring, wilson_interval
from bundler.hub.leaderboard.record import BoardRecord
from bundler.hub.repo.paths import README, RECORD, task_chart, task_table
from bundler.hub.tasks.definitions import TaskDefinition

METRIC = "exact_match.accuracy"
PROPORTION = TaskDefinition(
    hf_repo_id=RunSpec().hf_repo_id, split="test", metric=METRIC, metric_kind="proportion"
)
SCORE = PROPORTION.model_copy(update={"metric_kind": "score"})


def scored(score: object) -> dict[str, object]:
    return {"exact_match": {"accuracy": score}}


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 10, 40, 100, 1000, 12345, 10**6])
@pytest.mark.parametrize("proportion", [0.0, 1.0])
def test_an_interval_at_0_or_1_holds_its_score_and_reaches_the_bound(
    proportion: float, rows: int
) -> None:
    low, high = wilson_interval(proportion, rows)
    assert low <= proportion <= high
    assert (low, high)[int(proportion)] == proportion  # the exact interval's closed end
    other = by_bisection(proportion, rows)[1 - int(proportion)]
    assert (low, high)[1 - int(proportion)] == pytest.approx(other, abs=1e-9)


def test_a_perfect_score_and_a_score_of_0_are_charted_with_their_intervals() -> None:
    rows = [
        make_row("perfect", metrics=scored(1.0), rows_present=10, expected_rows=10),
        make_row("nothing", metrics=scored(0.0), rows_present=100, expected_rows=100),
    ]
    board = TaskBoard.of("t", rows, PROPORTION)
    bars = chart_bars(board)
    assert bars[0].interval is not None and bars[0].interval[1] == 1.0
    assert bars[1].interval is not None and bars[1].interval[0] == 0.0
    assert all(bar.drawn for bar in bars)
    assert (chart_png(board) or b"").startswith(PNG_SIGNATURE)


@pytest.mark.parametrize(
    ("definition", "scores", "undrawn"),
    [
        (SCORE, [1.7e308, 0.5, -2.0], {0}),
        (SCORE, [-1.7e308, 1.7e308, 3.0], {0, 1}),
        (SCORE, [MAX_DRAWN, -MAX_DRAWN, 5e-324], set()),
        (PROPORTION, [1.5, 1.0, -0.2, 1.7e308], {0, 2, 3}),
    ],
)
def test_a_score_no_bar_can_show_is_named_without_its_bar(
    definition: TaskDefinition, scores: list[float], undrawn: set[int]
) -> None:
    rows = [
        make_row(f"model-{i}", metrics=scored(score), rows_present=10, expected_rows=10)
        for i, score in enumerate(scores)
    ]
    board = TaskBoard.of("t", rows, definition)
    bars = {bar.label.partition(" ")[2]: bar for bar in chart_bars(board)}
    assert len(bars) == len(scores)  # every entry named
    for i, score in enumerate(scores):
        bar = bars[f"model-{i}"]  # the model's name
        assert bar.score == score and bar.drawn is (i not in undrawn)
        assert bar.drawn or bar.interval is None
    assert (chart_png(board) or b"").startswith(PNG_SIGNATURE)


# ------------------------------------------------------------------ end to end, on the test Hub


def define(repo_id: str, task: str, kind: str = "proportion") -> None:
    defined = run_cli(
        "tasks", "define", task, "--repo", repo_id, "--dataset", RunSpec().hf_repo_id,
        "--split", "test", "--metric", METRIC, "--metric-kind", kind,
        env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert defined.returncode == 0, defined.stderr


def test_a_boards_first_bundle_with_a_perfect_score_is_published_with_its_chart(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    define(repo_id, "alpha")
    perfect = RunSpec(task="alpha", model="perfect", rows=10, metrics=scored(1.0))
    bundles = make_bundles(tmp_path, [perfect])
    result = run_cli_process(
        "upload", bundles, "--repo", repo_id, "--json", env={"HF_TOKEN": WRITE_TOKEN}
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["charts_not_drawn"] == []
    (row,) = table_rows(hub, repo_id, task_table("alpha"))
    assert row["ci_high"] == 1.0 and row["ci_low"] == pytest.approx(by_bisection(1.0, 10)[0])
    drawn = hub.file_bytes(repo_id, task_chart("alpha"))
    assert drawn is not None and drawn == chart_png(published_board(hub, repo_id, "alpha"))
    assert "1.000 [0.722, 1.000]" in card_text(hub, repo_id)


LONG_NAME = (
    "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 " + "\u4e2d\u6587\u6a21\u578b"
) * 800
"""12,000 characters of Hebrew, Arabic and Chinese: right to left and CJK, far past any cell."""


def odd_values(tmp_path: Path) -> Path:
    """Bundles of one task whose scores no chart drew before: 0 over 100 rows, 1.7e308 and
    -1.7e308, NaN and both infinities (no scores: their metric is no number), and a model
    and player whose names are 12,000 characters of right-to-left and CJK script."""
    scores = {"zero": 0.0, "huge": 1.7e308, "tiny": -1.7e308, "nan": math.nan, "inf": math.inf}
    scores |= {"ninf": -math.inf}
    specs = [
        RunSpec(task="alpha", model=model, rows=100, thoughts_chars=5, metrics=scored(score))
        for model, score in scores.items()
    ]
    long = RunSpec(task="alpha", model=LONG_NAME, player_name=LONG_NAME + " v2", rows=100)
    specs.append(replace(long, directory="long-name", thoughts_chars=5, metrics=scored(0.5)))
    return make_bundles(tmp_path, specs)


@pytest.mark.parametrize("kind", ["proportion", "score"])
def test_no_value_and_no_name_stops_the_board(
    hub: HubServer, repo_id: str, tmp_path: Path, kind: str
) -> None:
    define(repo_id, "alpha", kind)
    bundles = odd_values(tmp_path)
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 0, stderr
    assert report["charts_not_drawn"] == [] and "not drawn" not in stderr
    assert len(table_rows(hub, repo_id, task_table("alpha"))) == 7
    rows = {row["model_name"]: row for row in table_rows(hub, repo_id)}  # each scored
    assert len(rows) == 7 and rows[LONG_NAME]["player_name"] == LONG_NAME + " v2"
    assert rows["huge"]["score"] == 1.7e308 and rows["tiny"]["score"] == -1.7e308
    assert all(rows[name]["score"] is None for name in ("nan", "inf", "ninf"))
    if kind == "proportion":
        assert rows["zero"]["ci_low"] == 0.0 and rows["huge"]["ci_low"] is None
    board = published_board(hub, repo_id, "alpha")
    assert hub.file_bytes(repo_id, task_chart("alpha")) == chart_png(board)
    undrawn = {bar.label.partition(" ")[2] for bar in chart_bars(board) if not bar.drawn}
    assert {name.split("_")[0] for name in undrawn} == {"huge", "tiny"}
    text = card_text(hub, repo_id)
    assert LONG_NAME[:30] in text and LONG_NAME[:50] not in text  # cut to a cell
    assert "1.7e+308" in text and "-1.7e+308" in text
    assert card(repo_id)[1]["changed"] is False  # the same board, the same bytes


def test_odd_values_merged_in_the_web_page_are_charted_by_card_and_the_next_upload(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    publish(
        make_bundles(tmp_path / "first", [RunSpec(task="alpha", model="first", rows=4)]), repo_id
    )
    define(repo_id, "alpha", "score")
    commit_by_hand(repo_id, repo_files(odd_values(tmp_path / "merged")))
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert task_chart("alpha") in result["changed_files"] and result["charts_not_drawn"] == []
    assert hub.file_bytes(repo_id, task_chart("alpha")) == chart_png(
        published_board(hub, repo_id, "alpha")
    )
    more = make_bundles(tmp_path / "more", [RunSpec(task="alpha", model="more", rows=4)])
    code, _, stderr = upload(more, "--repo", repo_id)
    assert code == 0, stderr
    board = published_board(hub, repo_id, "alpha")
    assert board.total == 9
    assert hub.file_bytes(repo_id, task_chart("alpha")) == chart_png(board)


FAILING_MATPLOTLIB = """
import sys
import matplotlib.figure

def refuse(*args, **kwargs):
    raise ValueError("Axis limits cannot be NaN or Inf\\nsecond line")

matplotlib.figure.Figure.savefig = refuse
from bundler.cli.app import main
sys.argv[0] = "bundler"
main()
"""
"""A bundler whose matplotlib fails to draw any chart, with the error an infinite axis once
gave (the bundler and the Hub client are untouched)."""


def failing_charts(*args: object) -> tuple[int, dict[str, object], str]:
    result = run_python(FAILING_MATPLOTLIB, *args, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


def test_a_chart_that_fails_to_draw_never_stops_a_commit_and_the_run_says_why(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    specs = [RunSpec(task=task, model="first", rows=4) for task in ("alpha", "beta")]
    publish(make_bundles(tmp_path / "first", specs), repo_id)
    define(repo_id, "alpha")
    define(repo_id, "beta")
    beta_chart = hub.file_bytes(repo_id, task_chart("beta"))
    more = make_bundles(tmp_path / "more", [RunSpec(task="alpha", model="more", rows=4)])
    code, report, stderr = failing_charts("upload", more, "--repo", repo_id)
    assert code == 0, stderr
    why = (
        f"{task_chart('alpha')}: not drawn (ValueError: Axis limits cannot be NaN or Inf); "
        "the tables and card go without it"
    )
    assert report["charts_not_drawn"] == [why]
    assert f"warning {why}" in " ".join(stderr.split())
    (commit, *_) = hub.commits(repo_id)
    assert task_table("alpha") in commit.files_changed  # the board is written
    assert task_chart("alpha") in commit.deleted  # the old chart shows an older board
    assert hub.file_bytes(repo_id, task_chart("beta")) == beta_chart  # still true: kept
    text = card_text(hub, repo_id)
    assert "charts/alpha.png" not in text and "charts/beta.png" in text
    assert "statics-bundler[charts]" not in text  # the extra is there; the run says why
    assert published_board(hub, repo_id, "alpha").total == 2
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None and task_chart("alpha") not in record.files
    # tasks define and the card command say the same; a bundler that can draw it, draws it
    code, result, stderr = failing_charts(
        "tasks", "define", "alpha", "--repo", repo_id, "--dataset", RunSpec().hf_repo_id,
        "--split", "test", "--metric", METRIC, "--metric-kind", "score",
    )  # fmt: skip
    assert code == 0, stderr
    assert result["charts_not_drawn"] == [why, why.replace("alpha", "beta")]  # every task's
    assert f"warning {why}" in " ".join(stderr.split())
    assert hub.file_bytes(repo_id, task_chart("beta")) == beta_chart  # its board unchanged
    commit_by_hand(repo_id, {README: b"---\npretty_name: old\n---\n"})
    code, result, stderr = failing_charts("card", "--repo", repo_id)
    assert code == 0, stderr
    assert (
        result["charts_not_drawn"] == [why] and task_chart("alpha") not in result["changed_files"]
    )
    code, result, stderr = card(repo_id)
    assert code == 0 and result["charts_not_drawn"] == [], stderr
    assert hub.file_bytes(repo_id, task_chart("alpha")) == chart_png(
        published_board(hub, repo_id, "alpha")
    )


OLDER_BUNDLER = """
import math
from dataclasses import replace
import sys
from bundler.hub.leaderboard import ranking

def unclamped(proportion, rows, z=ranking.Z_95):
    z2_n = z * z / rows
    centre = (proportion + z2_n / 2) / (1 + z2_n)
    half = z * math.sqrt(proportion * (1 - proportion) / rows + z2_n / (4 * rows)) / (1 + z2_n)
    return max(0.0, centre - half), min(1.0, centre + half)

def digest(self):
    import hashlib, json
    accepted = sorted(self.definition.revisions) if self.definition is not None else []
    facts = [self.metric, self.direction, self.by_intervals, accepted]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]

ranking.wilson_interval = unclamped
ranking.TaskScoring.digest = property(digest)
sys.modules["matplotlib"] = None  # the older bundler's chart of a perfect score failed
from bundler.cli.app import main
sys.argv[0] = "bundler"
main()
"""
"""The bundler before intervals held their score: the closed form unclamped, and the scoring
digest without the interval's method."""


def test_a_board_scored_by_an_older_bundler_is_scored_again_by_the_next_commit(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    perfect = RunSpec(task="alpha", model="perfect", rows=10, metrics=scored(1.0))
    publish(make_bundles(tmp_path / "first", [perfect]), repo_id)
    older = run_python(
        OLDER_BUNDLER, "tasks", "define", "alpha", "--repo", repo_id, "--dataset",
        perfect.hf_repo_id, "--split", "test", "--metric", METRIC, "--metric-kind",
        "proportion", env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert older.returncode == 0, older.stderr
    (row,) = table_rows(hub, repo_id, task_table("alpha"))
    assert row["ci_high"] == 0.9999999999999999  # as the older bundler stored it
    other = make_bundles(tmp_path / "other", [RunSpec(task="beta", model="other", rows=4)])
    code, _, stderr = upload(other, "--repo", repo_id)  # a commit that touches another task
    assert code == 0, stderr
    (row,) = table_rows(hub, repo_id, task_table("alpha"))
    assert row["ci_high"] == 1.0
    (part,) = [r for r in table_rows(hub, repo_id) if r["task_name"] == "alpha"]
    assert part["ci_high"] == 1.0
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None
    assert record.scoring["alpha"] == TaskScoring(PROPORTION).digest
    assert hub.file_bytes(repo_id, task_chart("alpha")) == chart_png(
        published_board(hub, repo_id, "alpha")
    )
