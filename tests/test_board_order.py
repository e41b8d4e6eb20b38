"""The board orders what it shows (issue 37, 6): across tasks, setups that tie in mean rank go by
their mean score, each task's in its direction, then by model name; charts are sized to their
entries, a proportion's axis ends at 1, and bars are named by the model's name as recorded.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from factory import RunSpec, make_row
from hubserver import HubServer
from PIL import Image
from test_card_refresh import card
from test_charts import define, published_board
from test_upload import make_bundles, publish, upload

from bundler.hub.leaderboard.chart import (
    CHART_ROWS,
    CURRENT,
    LEFT,
    RIGHT,
    chart_bars,
    chart_height,
    chart_png,
)
from bundler.hub.leaderboard.overview import Entry, Setup, overview
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.record import CHART_LOOK, BoardRecord, DerivedFile
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.repo.paths import RECORD, task_chart
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


def test_a_setup_without_a_finite_score_goes_after_those_with_one_and_any_scale_is_finite() -> None:
    rows = [
        entry("huge", "t1", {"em": {"acc": 1e308}}, 40),
        entry("tiny", "t1", {"em": {"acc": -1e308}}, 40),
        entry("nan", "t1", {"em": {"acc": float("nan")}}, 40),
        entry("huge", "t2", {"em": {"acc": 0.5}}, 40),
        entry("tiny", "t2", {"em": {"acc": 0.5}}, 40),
        entry("nan", "t2", {"em": {"acc": 0.5}}, 40),
    ]
    by_value = PROPORTION.model_copy(update={"metric_kind": "score"})
    found = overview(boards(rows, {"t1": by_value, "t2": by_value}))
    scores = {setup.model_name: setup.mean_score for setup in found.setups}
    assert scores["huge"] == 1.0 and scores["tiny"] == 0.5  # t2 ties: 1 each
    (nan,) = [setup for setup in found.setups if setup.model_name == "nan"]
    assert nan.mean_score == 1.0  # from t2 alone: no rank on t1, or no scale there
    row = make_row("a")
    unscored = Setup("a_1054f537", "a", {"t1": Entry(row, 1, None, False)})
    scored = Setup("z_1054f537", "z", {"t1": Entry(row, 1, 0.1, False, scaled=0.0)})
    assert unscored.mean_score is None
    assert sorted([unscored, scored], key=Setup.order) == [scored, unscored]


# ------------------------------------------------------------------------------------- charts
WHITE = (255, 255, 255)


def image(png: bytes | None) -> Image.Image:
    assert png is not None
    return Image.open(io.BytesIO(png)).convert("RGB")


@pytest.mark.parametrize("entries", [1, 3, 8, 30])
def test_a_chart_is_as_tall_as_its_entries_need(entries: int) -> None:
    rows = [
        make_row(f"m{i:02d}", metrics={"em": {"acc": 0.9 - 0.02 * i}}, rows_present=40)
        for i in range(entries)
    ]
    board = TaskBoard.of("t", rows, PROPORTION)
    bars = chart_bars(board)
    assert len(bars) == min(entries, CHART_ROWS)
    drawn = image(chart_png(board))
    assert drawn.size == (800, round(chart_height(len(bars)) * 100))
    # the plot is the bars' slots and no more: on a fixed 800 x 600, one bar crossed 7.5% of the
    # canvas's rows and three 19%; drawn now, every chart's bars cross over a fifth of them
    pixels = drawn.load()
    barred = [y for y in range(drawn.height) if pixels[400, y] != WHITE]
    assert len(barred) / drawn.height > 0.2
    assert drawn.height <= {1: 160, 3: 220, 8: 370, 30: 730}[entries]


def test_a_proportions_axis_ends_at_1_and_every_score_is_written_inside_it() -> None:
    rows = [
        make_row(name, metrics={"em": {"acc": score}}, rows_present=n, **more)
        for name, score, n, more in (
            ("perfect", 1.0, 10, {"expected_rows": 10}),
            ("high", 0.97, 30, {"coverage": "partial", "expected_rows": 40}),
            ("half", 0.5, 40, {"expected_rows": 40}),
        )
    ]
    board = TaskBoard.of("t", rows, PROPORTION)
    drawn = image(chart_png(board))
    pixels = drawn.load()
    left, right = round(LEFT * 800), round(RIGHT * 800)
    bar_colour = tuple(int(CURRENT[i : i + 2], 16) for i in (1, 3, 5))

    def bar_end(row: int) -> int:
        """The last column of the bar of the `row`th entry (below its interval's line)."""
        y = 65 + 30 * row + 15 + 6  # the title, the slots above, the middle of its own, 6 px
        return max(x for x in range(drawn.width) if pixels[x, y] == bar_colour)

    # the perfect score fills the axis, the half one half of it: the axis is 0 to 1
    assert abs(bar_end(0) - right) <= 2
    assert abs(bar_end(2) - (left + (right - left) / 2)) <= 2
    # nothing is written past the axis, though 1 and 0.97 ⚠ partial leave no room after them
    margin = [(x, y) for x in range(right + 3, 800) for y in range(drawn.height)]
    assert [xy for xy in margin if pixels[xy] != WHITE] == []


def test_bars_carry_the_models_name_and_the_fingerprint_where_two_setups_share_it() -> None:
    rows = [
        make_row("gr-e-7b", model_name="Straße-AI/Größe-7B", metrics={"em": {"acc": 0.9}}),
        make_row("twin-a", model_name="org/twin", metrics={"em": {"acc": 0.8}}),
        make_row(
            "twin-b",
            model_name="org/twin",
            capability_fingerprint="02e754b8" * 4,
            metrics={"em": {"acc": 0.7}},
        ),
        make_row("x-cjk", model_name="模型-β", metrics={"em": {"acc": 0.6}}),
        make_row("long", model_name="an-organisation/" + "m" * 40, metrics={"em": {"acc": 0.5}}),
    ]
    board = TaskBoard.of("t", rows, PROPORTION.model_copy(update={"metric_kind": "score"}))
    labels = [bar.label for bar in chart_bars(board)]
    assert labels[:3] == [
        "1. Straße-AI/Größe-7B",
        "2. org/twin (1054f537)",
        "3. org/twin (02e754b8)",
    ]
    assert labels[3] == "4. 模型-β"  # every character, where no font limits it
    assert labels[4].startswith("5. an-organisation/mmm") and labels[4].endswith("...")
    assert len(labels[4]) == 38
    # drawn: the font has no CJK glyph, so the name is written with ? and the setup named
    drawn = [bar.label for bar in chart_bars(board, frozenset(range(0x250)))]
    assert drawn[3] == "4. ??-? (1054f537)"


def test_every_chart_of_an_older_look_is_drawn_again_by_the_next_commit(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    specs = [
        RunSpec(task=task, model=model, rows=4)
        for task in ("alpha", "beta")
        for model in ("m1", "m2")
    ]
    publish(make_bundles(tmp_path / "first", specs), repo_id)
    define(repo_id, "alpha")
    define(repo_id, "beta")
    today = {task: hub.file_bytes(repo_id, task_chart(task)) for task in ("alpha", "beta")}
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None
    assert {record.files[task_chart(t)].look for t in ("alpha", "beta")} == {CHART_LOOK}
    # the branch as an older bundler left it: charts of the old look, the record naming none
    files = {path: hub.file_bytes(repo_id, path) or b"" for path in hub.list_files(repo_id)}
    old_record = json.loads(files[RECORD])
    for task in ("alpha", "beta"):
        files[task_chart(task)] = b"\x89PNG\r\n\x1a\n an 800 x 600 chart of " + task.encode()
        old_record["files"][task_chart(task)] = DerivedFile.of(files[task_chart(task)]).model_dump(
            mode="json", exclude_none=True
        )
    files[RECORD] = json.dumps(old_record).encode()
    old = f"{repo_id}-old"
    hub.create_repo(old, files=files)
    more = make_bundles(tmp_path / "more", [RunSpec(task="alpha", model="m3", rows=4)])
    code, _, stderr = upload(more, "--repo", old)  # a bundle of alpha only
    assert code == 0, stderr
    (commit, *_) = hub.commits(old)
    assert {task_chart("alpha"), task_chart("beta")} <= set(commit.files_changed)
    assert hub.file_bytes(old, task_chart("beta")) == today["beta"]  # its board is unchanged
    assert hub.file_bytes(old, task_chart("alpha")) == chart_png(published_board(hub, old, "alpha"))
    record = BoardRecord.parse(hub.file_bytes(old, RECORD) or b"")
    assert record is not None
    assert {record.files[task_chart(t)].look for t in ("alpha", "beta")} == {CHART_LOOK}
    code, result, stderr = card(old)  # drawn again: the very same bytes
    assert code == 0 and result["changed"] is False, stderr


def test_a_chart_is_the_same_bytes_whether_its_board_read_the_best_rows_or_all() -> None:
    # A commit draws again a chart whose task's table it does not write (an older look): from
    # the task's best rows only. The chart once said "the best 20 of <rows read>".
    rows = [
        make_row(f"m{i:02d}", metrics={"em": {"acc": (i * 37 % 101) / 101}}, rows_present=40)
        for i in range(60)
    ]
    full = TaskBoard.of("t", rows, PROPORTION)
    best = TaskBoard.shown("t", full.rows[:20], full.ranks()[:20], 60, 60, full.scoring)
    assert chart_png(best) == chart_png(full)
