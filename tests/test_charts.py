"""A chart per defined task: the best entries' scores as bars, with their intervals where the task
has them, partial and stale entries marked; committed as `leaderboard/charts/<task>.png` with
the task's table and shown on the card; the same rows give the same bytes in any process; and
without matplotlib (an optional extra) the board is what it was, the card saying how to get
charts. Run end to end against the test Hub, with the real matplotlib and, for the bundler
without it, a process whose imports refuse matplotlib."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path

import pytest
from conftest import WRITE_TOKEN
from factory import DEFAULT_SHA, RunSpec, make_row
from helpers import published_leaderboard, run_cli, run_python
from hubserver import HubServer
from test_board_derived import delete_by_hand
from test_card_refresh import card, card_text, commit_by_hand
from test_intervals import by_bisection
from test_upload import make_bundles, publish, repo_files, upload

from bundler.hub.leaderboard.chart import (
    CHART_ROWS,
    CURRENT,
    MARKED,
    STALE,
    chart_bars,
    chart_height,
    chart_png,
)
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.record import BoardRecord
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.repo.paths import README, RECORD, TASKS_FILE, task_chart, task_table
from bundler.hub.tasks.definitions import TaskDefinition, TaskDefinitions

PROPORTION = TaskDefinition(
    hf_repo_id="GPTNT/expert-VQA", split="test", metric="em.acc", metric_kind="proportion"
)
OLD_SHA = "0123456789abcdef0123456789abcdef01234567"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXTRA_HINT = "pip install 'statics-bundler[charts]'"

REFUSE_MATPLOTLIB = """
import sys

class RefuseMatplotlib:
    '''An environment without the charts extra: matplotlib cannot be imported.'''

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "matplotlib":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, RefuseMatplotlib())
"""
"""A script's prelude: a sys.meta_path finder that refuses matplotlib (the bundler itself and
the Hub client are untouched)."""


def board_rows(count: int) -> list[TableRow]:
    """`count` entries of a proportion task: every seventh partial, every fifth on a dataset
    revision the task no longer accepts, one without the ranking metric."""
    rows = []
    for i in range(count):
        fields: dict[str, object] = {"rows_present": 40 + 37 * i, "expected_rows": 40 + 37 * i}
        if i % 7 == 3:
            fields["expected_rows"] = 1000 + 37 * i
            fields["coverage"] = "partial"
        if i % 5 == 4:
            fields["resolved_revision"] = OLD_SHA
        score = round((i * 37 % 101) / 101, 4)
        metrics = {"em": {"acc": score}} if i != 2 else {"em": {"f1": 0.5}}
        rows.append(make_row(f"model-{i:02d}", metrics=metrics, **fields))
    return rows


def proportion_board(count: int = 30) -> TaskBoard:
    definition = PROPORTION.model_copy(update={"revisions": [DEFAULT_SHA]})
    return TaskBoard.of("expert-vqa", board_rows(count), definition)


def test_a_chart_shows_the_best_twenty_scored_entries_with_intervals_and_marks() -> None:
    board = proportion_board(24)
    bars = chart_bars(board)
    scored = [row for row in board.rows if board.value(row, board.sort_column) is not None]
    assert len(scored) == 23 and len(bars) == CHART_ROWS == 20
    ranks = dict(zip((row.bundle_id for row in board.rows), board.ranks(), strict=True))
    for bar, row in zip(bars, scored, strict=False):
        assert bar.label == f"{ranks[row.bundle_id]}. {row.model_name}"
        score = float(json.loads(row.metrics_json)["em"]["acc"])
        assert bar.score == score
        assert bar.interval is not None
        assert bar.interval == pytest.approx(by_bisection(score, row.rows_present), abs=1e-9)
        stale = row.resolved_revision == OLD_SHA
        marks = (["partial"] if row.coverage == "partial" else []) + (["stale"] if stale else [])
        assert bar.marks == " ".join(marks)
        assert bar.colour == (STALE if stale else MARKED if marks else CURRENT)
    assert {bar.colour for bar in bars} == {CURRENT, MARKED, STALE}  # each kind is there


def test_a_task_ranked_by_value_has_bars_without_intervals_and_unpinned_marked() -> None:
    rows = [
        make_row("a", metrics={"em": {"acc": 3.5}}),
        make_row("b", metrics={"em": {"acc": -1.0}}, label="unpinned"),
    ]
    board = TaskBoard.of("t", rows, PROPORTION.model_copy(update={"metric_kind": "score"}))
    bars = chart_bars(board)
    assert [(bar.score, bar.interval, bar.marks) for bar in bars] == [
        (3.5, None, ""),
        (-1.0, None, "unpinned"),
    ]


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """The PNG's chunks (type, data), each checked against its CRC."""
    assert data.startswith(PNG_SIGNATURE)
    chunks, at = [], len(PNG_SIGNATURE)
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc
        chunks.append((kind, body))
        at += 12 + length
    return chunks


def test_a_chart_is_a_png_sized_to_its_entries_that_names_no_software_and_no_date() -> None:
    for board in (proportion_board(), proportion_board(2)):
        chunks = png_chunks(chart_png(board) or b"")
        kinds = [kind for kind, _ in chunks]
        assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
        height = round(chart_height(len(chart_bars(board))) * 100)
        assert struct.unpack(">II", chunks[0][1][:8]) == (800, height)
        assert b"tIME" not in kinds
        texts = b"".join(body for kind, body in chunks if kind in (b"tEXt", b"iTXt", b"zTXt"))
        assert b"Software" not in texts and b"matplotlib" not in texts


DRAW = """
import hashlib, json, sys
from bundler.hub.leaderboard.chart import chart_png
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.tasks.definitions import TaskDefinition
rows = [TableRow.model_validate(row) for row in json.loads(sys.argv[1])]
board = TaskBoard.of("expert-vqa", rows, TaskDefinition.model_validate_json(sys.argv[2]))
png = chart_png(board)
print(json.dumps({
    "sha256": png and hashlib.sha256(png).hexdigest(),
    "matplotlib": "matplotlib" in sys.modules,
}))
"""


def draw_elsewhere(
    board: TaskBoard, env: dict[str, str] | None = None, prelude: str = ""
) -> dict[str, object]:
    """The board's chart drawn in a fresh interpreter: its sha256, and whether it loaded
    matplotlib."""
    rows = json.dumps([row.model_dump(mode="json") for row in board.rows])
    definition = board.definition.model_dump_json() if board.definition else "{}"
    result = run_python(prelude + DRAW, rows, definition, env=env)
    assert result.returncode == 0, result.stderr
    outcome: dict[str, object] = json.loads(result.stdout)
    return outcome


def test_the_same_rows_give_the_same_bytes_in_fresh_processes_whatever_matplotlibrc_says(
    tmp_path: Path,
) -> None:
    board = proportion_board()
    here = hashlib.sha256(chart_png(board) or b"").hexdigest()
    config = tmp_path / "mplconfig"
    config.mkdir()
    (config / "matplotlibrc").write_text(
        "font.family: serif\nfont.size: 17\naxes.facecolor: black\nsavefig.dpi: 300\n"
        "figure.figsize: 3, 2\naxes.prop_cycle: cycler('color', ['red'])\n"
    )
    first = draw_elsewhere(board)
    second = draw_elsewhere(board, env={"MPLCONFIGDIR": str(config)})
    assert first == second == {"sha256": here, "matplotlib": True}
    other = TaskBoard.of("expert-vqa", board.rows[1:], board.definition)
    assert draw_elsewhere(other)["sha256"] != here  # a chart does show its rows


def test_without_matplotlib_there_is_no_chart_and_nothing_loads_it() -> None:
    outcome = draw_elsewhere(proportion_board(), prelude=REFUSE_MATPLOTLIB)
    assert outcome == {"sha256": None, "matplotlib": False}
    lazy = run_python(
        "import sys\nimport bundler.hub.leaderboard.branch, bundler.cli.app\n"
        "print('matplotlib' in sys.modules)"
    )
    assert lazy.returncode == 0, lazy.stderr
    assert lazy.stdout.split() == ["False"]  # imported when a chart is drawn, not before


MEMORY = """
import gc, json, resource, sys
from bundler.cli.app import GC_YOUNG_THRESHOLD
from bundler.hub.leaderboard.chart import chart_png
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.tasks.definitions import TaskDefinition
gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])  # as the console script runs
rows = [TableRow.model_validate(row) for row in json.loads(sys.argv[1])]
board = TaskBoard.of("expert-vqa", rows, TaskDefinition.model_validate_json(sys.argv[2]))
peaks = []
for count in range(22):
    chart_png(board)
    peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print(json.dumps({"after_2": peaks[1], "after_22": peaks[-1]}))
"""


def test_charts_drawn_one_after_another_hold_no_more_memory() -> None:
    """A figure's reference cycles are freed after each chart, even where the cyclic
    collector seldom runs: 20 more charts, no more memory (each held 4.5 MB before)."""
    board = proportion_board(40)
    rows = json.dumps([row.model_dump(mode="json") for row in board.rows])
    definition = board.definition.model_dump_json() if board.definition else "{}"
    result = run_python(MEMORY, rows, definition)
    assert result.returncode == 0, result.stderr
    peaks = json.loads(result.stdout)
    assert peaks["after_22"] - peaks["after_2"] < 20 * 1024  # KiB


# ------------------------------------------------------------------ end to end, on the test Hub


def define(repo_id: str, task: str) -> None:
    """The maintainers define `task` (a proportion, higher is better) with the command."""
    defined = run_cli(
        "tasks", "define", task, "--repo", repo_id, "--dataset", RunSpec().hf_repo_id,
        "--split", "test", "--metric", "exact_match.accuracy", "--metric-kind", "proportion",
        env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert defined.returncode == 0, defined.stderr


def published_board(hub: HubServer, repo_id: str, task: str) -> TaskBoard:
    """The task's board as the published all-tasks table and definitions make it."""
    table = published_leaderboard(hub, repo_id)
    definitions = TaskDefinitions.parse(hub.file_bytes(repo_id, TASKS_FILE) or b"{}")
    return TaskBoard.of(task, table.rows(task), definitions.get(task))


def image_link(repo_id: str, task: str) -> str:
    url = f"https://huggingface.co/datasets/{repo_id}/resolve/main/{task_chart(task)}"
    return f"![{task}: the best entries' scores]({url})"


@pytest.fixture
def two_tasks(repo_id: str, tmp_path: Path) -> Path:
    """alpha (two bundles) and beta (one), published; neither defined yet."""
    specs = [
        RunSpec(task="alpha", model="first", rows=4, metrics={"exact_match": {"accuracy": 0.75}}),
        RunSpec(task="alpha", model="second", rows=4, metrics={"exact_match": {"accuracy": 0.5}}),
        RunSpec(task="beta", model="third", rows=4),
    ]
    publish(bundles := make_bundles(tmp_path / "published", specs), repo_id)
    return bundles


def test_a_defined_tasks_chart_is_committed_with_its_table_and_shown_on_the_card(
    hub: HubServer, repo_id: str, two_tasks: Path, tmp_path: Path
) -> None:
    assert not [p for p in hub.list_files(repo_id) if p.startswith("leaderboard/charts/")]
    define(repo_id, "alpha")
    assert hub.file_bytes(repo_id, task_chart("beta")) is None  # not defined: no chart
    drawn = hub.file_bytes(repo_id, task_chart("alpha"))
    assert drawn == chart_png(published_board(hub, repo_id, "alpha"))
    assert task_chart("alpha") in hub.commits(repo_id)[0].added  # with the definition
    more = RunSpec(task="alpha", model="fourth", rows=4, metrics={"exact_match": {"accuracy": 1}})
    code, _, stderr = upload(make_bundles(tmp_path / "more", [more]), "--repo", repo_id)
    assert code == 0, stderr
    (commit, *_) = hub.commits(repo_id)
    bundle = next(p for p in commit.added if p.endswith(".tar.zst"))
    assert {bundle, task_table("alpha"), task_chart("alpha")} <= set(commit.files_changed)
    redrawn = hub.file_bytes(repo_id, task_chart("alpha"))
    assert redrawn != drawn and redrawn == chart_png(published_board(hub, repo_id, "alpha"))
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None and task_chart("alpha") in record.files  # vouched for
    text = card_text(hub, repo_id)
    assert image_link(repo_id, "alpha") in text
    assert "charts/beta.png" not in text and EXTRA_HINT not in text
    assert card(repo_id)[1]["changed"] is False  # drawn again, the very same bytes


def test_a_chart_edited_by_hand_is_drawn_again_by_the_next_commit(
    hub: HubServer, repo_id: str, two_tasks: Path, tmp_path: Path
) -> None:
    define(repo_id, "alpha")
    true_chart = hub.file_bytes(repo_id, task_chart("alpha"))
    commit_by_hand(repo_id, {task_chart("alpha"): PNG_SIGNATURE + b"a forged chart"})
    other = make_bundles(tmp_path / "other", [RunSpec(task="beta", model="other", rows=4)])
    code, _, stderr = upload(other, "--repo", repo_id)  # a bundle of another task
    assert code == 0, stderr
    assert hub.file_bytes(repo_id, task_chart("alpha")) == true_chart
    delete_by_hand(repo_id, task_chart("alpha"))
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert task_chart("alpha") in result["changed_files"]
    assert hub.file_bytes(repo_id, task_chart("alpha")) == true_chart


def test_a_chart_goes_with_its_tasks_definition_and_its_last_bundle(
    hub: HubServer, repo_id: str, two_tasks: Path
) -> None:
    define(repo_id, "alpha")
    define(repo_id, "beta")
    assert hub.file_bytes(repo_id, task_chart("beta")) is not None
    definitions = TaskDefinitions.parse(hub.file_bytes(repo_id, TASKS_FILE) or b"")
    del definitions.tasks["beta"]
    commit_by_hand(repo_id, {TASKS_FILE: definitions.to_bytes()})  # a maintainer's hand edit
    assert card(repo_id)[0] == 0
    assert hub.file_bytes(repo_id, task_chart("beta")) is None
    assert "charts/beta.png" not in card_text(hub, repo_id)
    alpha = [path for path in repo_files(two_tasks) if "/alpha@" in path]
    delete_by_hand(repo_id, *alpha)
    assert card(repo_id)[0] == 0
    assert hub.file_bytes(repo_id, task_chart("alpha")) is None
    assert hub.file_bytes(repo_id, task_table("alpha")) is None
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None and not [p for p in record.files if p.endswith(".png")]


def without_matplotlib(*args: object) -> tuple[int, dict[str, object], str]:
    """A bundler command run by a bundler installed without the charts extra."""
    prelude = REFUSE_MATPLOTLIB + "from bundler.cli.app import main\nsys.argv[0] = 'bundler'\n"
    result = run_python(prelude + "main()\n", *args, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


def test_without_matplotlib_the_board_is_unchanged_and_the_card_says_how_to_get_charts(
    hub: HubServer, repo_id: str, two_tasks: Path, tmp_path: Path
) -> None:
    define(repo_id, "beta")
    code, _, stderr = without_matplotlib(
        "tasks", "define", "alpha", "--repo", repo_id, "--dataset", RunSpec().hf_repo_id,
        "--split", "test", "--metric", "exact_match.accuracy", "--metric-kind", "proportion",
    )  # fmt: skip
    assert code == 0, stderr
    assert hub.file_bytes(repo_id, task_chart("alpha")) is None  # no chart committed
    assert hub.file_bytes(repo_id, task_chart("beta")) is not None  # one still true is kept
    text = card_text(hub, repo_id)
    assert EXTRA_HINT in text and image_link(repo_id, "beta") in text
    assert "charts/alpha.png" not in text
    # the tables are those a bundler with matplotlib writes: it adds the chart only
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert sorted(result["changed_files"]) == sorted([README, RECORD, task_chart("alpha")])
    assert image_link(repo_id, "alpha") in card_text(hub, repo_id)
    assert EXTRA_HINT not in card_text(hub, repo_id)
    # a chart its bundler cannot draw again is never left to show an older board
    more = make_bundles(tmp_path / "more", [RunSpec(task="alpha", model="fourth", rows=4)])
    code, _, stderr = without_matplotlib("upload", more, "--repo", repo_id)
    assert code == 0, stderr
    assert hub.file_bytes(repo_id, task_chart("alpha")) is None
    assert task_chart("alpha") in hub.commits(repo_id)[0].deleted
    assert hub.file_bytes(repo_id, task_chart("beta")) is not None
    assert EXTRA_HINT in card_text(hub, repo_id)
