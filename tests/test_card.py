"""The dataset card: its YAML configs and features (all-tasks and one per task), and the
per-task leaderboards in its body (order, marks, escaping)."""

from __future__ import annotations

import html
import re

import pytest
import yaml
from factory import make_row
from huggingface_hub import DatasetCard
from markdown_it import MarkdownIt

from bundler.hub.card import (
    BOARD_ROWS,
    CELL_MAX_LENGTH,
    WARNING,
    md_cell,
    render_dataset_card,
    task_boards,
)
from bundler.hub.rows import BundleRow, metric_column

REPO = "org/board"


def header_of(card: str) -> dict:
    _, header, _ = card.split("---\n", 2)
    return yaml.safe_load(header)


def features_of(card: str, config: str) -> dict[str, object]:
    (info,) = [i for i in header_of(card)["dataset_info"] if i["config_name"] == config]
    return {f["name"]: f.get("dtype", f.get("list")) for f in info["features"]}


def section(card: str, task: str) -> list[str]:
    """The leaderboard table lines under `### <task>`."""
    after = card.split(f"\n### {task}\n", 1)[1]
    return [line for line in after.split("\n\n", 1)[0].splitlines() if line.startswith("|")]


def cells(line: str) -> list[str]:
    """A table line's cells, splitting on `|` that is not backslash-escaped."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def three_tasks() -> list[BundleRow]:
    return [
        make_row("gpt", metrics={"em": {"acc": 0.5, "n": 4}}, published_at="2026-06-01T00:00:00Z"),
        make_row(
            "qwen",
            metrics={"em": {"f1": 0.9, "acc": 0.7}},  # a new name, listed first
            published_at="2026-06-03T00:00:00Z",
            coverage="partial",
            rows_present=3,
        ),
        make_row(
            "claude",
            label="unpinned",
            metrics={"em": {"acc": 0.7}},
            published_at="2026-06-02T00:00:00Z",
            coverage="unknown",
            expected_rows=None,
        ),
        make_row("llama", metrics={"em": {"acc": "n/a"}}, published_at="2026-06-04T00:00:00Z"),
        make_row("gpt", task="maze", metrics={"maze": {"solved": 2, "by_size": {"big": None}}}),
        make_row("gpt", task="default", metrics={"coverage": 0.3, "acc@0.5": 1}),
        make_row("gpt", task="wires", metrics={"wires": {"label": "ok"}}),
    ]


def test_each_task_gets_a_config_with_the_union_of_its_metric_columns() -> None:
    card = render_dataset_card(REPO, three_tasks())
    configs = {c["config_name"]: c["data_files"] for c in header_of(card)["configs"]}
    assert configs == {
        "default": [{"split": "train", "path": "rows/**/*.jsonl"}],
        "_default": [{"split": "train", "path": "tasks/default/*/*.jsonl"}],
        "expert-vqa": [{"split": "train", "path": "tasks/expert-vqa/*/*.jsonl"}],
        "maze": [{"split": "train", "path": "tasks/maze/*/*.jsonl"}],
        "wires": [{"split": "train", "path": "tasks/wires/*/*.jsonl"}],
    }
    vqa = features_of(card, "expert-vqa")
    metrics = [name for name, dtype in vqa.items() if dtype == "float64"]
    # earliest published first (gpt, then claude, then qwen's new em.f1), each in file order
    assert metrics == ["em.acc", "em.n", "em.f1"]
    assert list(vqa)[:4] == ["bundle_id", "model_name", "player_name", "em.acc"]
    assert vqa["published_at"] == "timestamp[s, tz=UTC]" and vqa["coverage"] == "string"
    assert [n for n, d in features_of(card, "maze").items() if d == "float64"] == ["maze.solved"]
    assert "float64" not in features_of(card, "wires").values()
    odd = [n for n, d in features_of(card, "_default").items() if d == "float64"]
    assert odd == [metric_column(("coverage",)), metric_column(("acc@0.5",))]
    assert features_of(card, "default")["metrics"][1] == {"name": "number", "dtype": "float64"}


def test_the_leaderboard_is_ordered_by_the_first_metric_descending() -> None:
    card = render_dataset_card(REPO, three_tasks())
    header, _, *rows = section(card, "expert-vqa")
    assert cells(header)[3] == "`em.acc` ↓"
    table = [cells(line) for line in rows]
    # claude and qwen tie on 0.7: same rank, the earlier published first; llama has no score
    assert [(r[0], r[1], r[3]) for r in table] == [
        ("1", "claude", "0.7"),
        ("1", "qwen", "0.7"),
        ("3", "gpt", "0.5"),
        ("-", "llama", "-"),
    ]
    assert [r[4] for r in table] == ["-", "-", "4", "-"]  # em.n: only gpt has it
    assert [r[5] for r in table] == ["-", "0.9", "-", "-"]  # em.f1: only qwen
    assert "| expert-vqa | `expert-vqa` | 4 | `em.acc` |" in card


def test_partial_unknown_and_unpinned_results_are_marked() -> None:
    card = render_dataset_card(REPO, three_tasks())
    _, _, *rows = section(card, "expert-vqa")
    by_model = {cells(line)[1]: cells(line) for line in rows}
    coverage, dataset = 6, 7
    assert by_model["gpt"][coverage] == "complete (5/5)"
    assert by_model["gpt"][dataset] == "`a1b2c3d4`"
    assert WARNING not in rows[2]
    assert by_model["qwen"][coverage] == f"{WARNING} **partial** (3/5)"
    assert by_model["claude"][coverage] == f"{WARNING} **unknown** (5/?)"
    assert by_model["claude"][dataset] == f"{WARNING} **unpinned**"
    assert by_model["gpt"][-2:] == ["2026-06-01", "`gpt_1054f537/expert-vqa@a1b2c3d4`"]


def test_values_from_bundles_cannot_break_or_inject_into_the_table() -> None:
    hostile = "evil | <script>alert(1)</script> [link](javascript:x) `code` *b* \\|\nnext | row "
    hostile += "and | more" * 10
    rows = [
        make_row("evil", model_name=hostile, player_name="p|q", metrics={"a b|<em>": {"c": 1}}),
        make_row("good", metrics={"a b|<em>": {"c": 2}}),
    ]
    card = render_dataset_card(REPO, rows)
    header, align, *lines = section(card, "expert-vqa")
    assert len(lines) == 2
    assert all(len(cells(line)) == len(cells(header)) == len(cells(align)) for line in lines)
    evil = next(cells(line) for line in lines if "evil" in line)
    assert evil[2] == r"p\|q"
    assert "<script>" not in card and "<em>" not in card
    assert "&lt;script&gt;" in evil[1] and r"\[link\]" in evil[1] and r"\`code\`" in evil[1]
    assert "next \\| row" in evil[1] and evil[1].endswith("…")  # one line, cut
    mapped = metric_column(("a b|<em>", "c"))
    assert f"| `{mapped}` | a b\\|&lt;em&gt;.c |" in card  # the renamed metric, documented
    # As a Markdown renderer (with raw HTML on) sees it: one table row per bundle, every row
    # as wide as the header, and no element or link that came from the bundle.
    html = MarkdownIt("commonmark").enable("table").render(card.split("---\n", 2)[2])
    board = html.split("<h3>expert-vqa</h3>", 1)[1].split("</table>", 1)[0]
    widths = [row.count("<td") + row.count("<th") for row in board.split("<tr>")[1:]]
    assert widths == [len(cells(header))] * 3
    assert "<script" not in html and "<em>" not in html and "<code>code</code>" not in board
    assert "<a " not in board and "&lt;script&gt;alert(1)&lt;/script&gt;" in board


def test_md_cell_leaves_nothing_a_renderer_links_by_itself() -> None:
    """GitHub-flavoured Markdown turns bare URLs, `www.` names and e-mail addresses into links:
    a model or player name must not (the entities show the same characters)."""
    cell = md_cell("https://evil.example/login WWW.phish.example admin@evil.example")
    assert cell == "https&#58;//evil.example/login WWW&#46;phish.example admin&#64;evil.example"
    assert html.unescape(cell) == "https://evil.example/login WWW.phish.example admin@evil.example"
    assert md_cell("gpt-5.2 (high)") == "gpt-5.2 (high)"  # ordinary names keep their bytes


def test_md_cell_escapes_markdown_and_html_and_cuts_long_text() -> None:
    assert md_cell("a|b") == r"a\|b"
    assert md_cell("<b>&</b>") == "&lt;b&gt;&amp;&lt;/b&gt;"
    assert md_cell(r"_x_ *y* ~z~ \ ![i](u)") == r"\_x\_ \*y\* \~z\~ \\ \!\[i\](u)"
    assert md_cell("a\r\nb\tc\x00d") == "a b c d"
    # an apostrophe or a `#` reads as itself once rendered, never as an entity's text
    rendered = MarkdownIt("commonmark").render(md_cell("O'Brien #1"))
    assert rendered == "<p>O'Brien #1</p>\n"
    long = md_cell("x" * 500)
    assert len(long) == CELL_MAX_LENGTH and long.endswith("…")


def test_the_card_is_valid_yaml_and_a_card_huggingface_hub_reads() -> None:
    rows = [make_row(metrics={"true": 1, "null": 2, "15": 3, "-x": 4, "yes": 5, "1e5": 6})]
    card = render_dataset_card(REPO, rows)
    data = DatasetCard(card).data.to_dict()
    assert [c["config_name"] for c in data["configs"]] == ["default", "expert-vqa"]
    names = [n for n, d in features_of(card, "expert-vqa").items() if d == "float64"]
    # strings in YAML, not booleans, nulls or numbers
    assert names == ["true", "null", "15", "-x", "yes", "1e5"]


HOSTILE_METRICS = {
    "a: b # c": 1,
    "'quoted' \"both\"": 2,
    "ünï©ødé ⚠ 名前": 3,
    "x" * 300: 4,
    "tab\there": 5,
    "- [x]": {"nested: {y}": 6},
}


@pytest.mark.parametrize(
    "rows",
    [
        [],
        three_tasks(),
        [make_row(f"p{i}", metrics=HOSTILE_METRICS) for i in range(3)],
        [make_row(task="ta.sk_1", metrics={"em": {"acc": 0.25}}, model_name="m: {x}")],
    ],
    ids=["empty", "three tasks", "hostile metric names", "odd task and model"],
)
def test_the_card_is_the_text_huggingface_hub_writes_for_it(rows: list[BundleRow]) -> None:
    """render_dataset_card leaves out DatasetCard.from_template's parsing of the rendered YAML
    header and writing it again: right only while that round trip gives back the same text."""
    card = render_dataset_card(REPO, rows)
    assert str(DatasetCard(card)) == card


def test_the_card_depends_on_the_set_of_rows_only() -> None:
    rows = three_tasks()
    card = render_dataset_card(REPO, rows)
    assert render_dataset_card(REPO, list(reversed(rows))) == card
    assert render_dataset_card(REPO, rows + rows[:2]) == card  # a row given twice counts once
    assert "**7** submission bundle(s)" in card
    empty = render_dataset_card(REPO, [])
    assert "**0** submission bundle(s)" in empty and "## Leaderboards" not in empty
    assert [c["config_name"] for c in header_of(empty)["configs"]] == ["default"]


def test_the_ranking_metric_is_the_first_of_the_earliest_published_bundle() -> None:
    late_first = make_row("b", metrics={"z": 9, "a": 1}, published_at="2026-06-02T00:00:00Z")
    early = make_row("a", metrics={"a": 2}, published_at="2026-06-01T00:00:00Z")
    (board,) = task_boards([late_first, early])
    assert board.sort_column == "a" and board.columns == ["a", "z"]
    assert [row.bundle_id.split("_")[0] for row in board.rows] == ["a", "b"]
    (no_scores,) = task_boards([make_row(metrics={"s": "x"})])
    assert no_scores.sort_column is None and no_scores.ranks() == ["-"]


def test_a_long_leaderboard_shows_the_best_and_says_how_many_more() -> None:
    rows = [make_row(f"p{i:03d}", metrics={"em": {"acc": i / 1000}}) for i in range(BOARD_ROWS + 2)]
    card = render_dataset_card(REPO, rows)
    _, _, *lines = section(card, "expert-vqa")
    assert len(lines) == BOARD_ROWS
    assert cells(lines[0])[:2] == ["1", f"p{BOARD_ROWS + 1:03d}"]  # the best first
    assert "... and 2 more bundle(s), ranked below these" in card
    assert "more bundle(s)" not in render_dataset_card(REPO, rows[:BOARD_ROWS])
