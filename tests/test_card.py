"""The dataset card: its YAML configs (the all-tasks table and one per task, pointing at the
Parquet tables, no features), and the per-task boards in its body (order, marks, escaping,
size)."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import random
import re
from collections.abc import Sequence

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from factory import make_row
from huggingface_hub import DatasetCard
from markdown_it import MarkdownIt

from bundler.hub.leaderboard.card import (
    BOARD_METRICS,
    BOARD_ROWS,
    CARD_BOARD_ROWS,
    CELL_MAX_LENGTH,
    MIN_BOARD_ROWS,
    WARNING,
    board_rows,
    md_cell,
    render_dataset_card,
)
from bundler.hub.leaderboard.overview import (
    OVERVIEW_DEPTH,
    OVERVIEW_ROWS,
    OVERVIEW_TASKS,
    overview,
)
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import TableRow, metric_column
from bundler.hub.leaderboard.tables import TASK_TABLE_ROWS, AllTasksTable
from bundler.hub.tasks.definitions import TaskDefinition
from bundler.local.allowed_signers import AllowedSigners, read_public_key
from bundler.local.signature import fingerprint

REPO = "org/board"
VIEWER = f"https://huggingface.co/datasets/{REPO}/viewer"
BLOB = f"https://huggingface.co/datasets/{REPO}/blob/main/bundles/"


def boards_of(rows: Sequence[TableRow]) -> list[TaskBoard]:
    """Every task's board, as a branch's leaderboard gives them (`BranchTables.files`)."""
    board = AllTasksTable.of(rows)
    return [TaskBoard.of(task, board.rows(task)) for task in board.tasks()]


def card_of(rows: Sequence[TableRow]) -> str:
    """The card of a branch whose tables hold `rows`."""
    return render_dataset_card(REPO, boards_of(rows), len(AllTasksTable.of(rows)))


def header_of(card: str) -> dict:
    _, header, _ = card.split("---\n", 2)
    return yaml.safe_load(header)


def public_key_line() -> str:
    """A new ed25519 public key as an OpenSSH line (`ssh-ed25519 BASE64`)."""
    key = Ed25519PrivateKey.generate().public_key()
    return key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


def fingerprint_of_a_key() -> str:
    return fingerprint(base64.b64decode(public_key_line().split()[1]))


def overview_lines(card: str) -> list[str]:
    """The overview's table lines, under `## Across tasks`."""
    after = card.split("\n## Across tasks\n\n", 1)[1]
    return after.split("\n\n", 1)[0].splitlines()


def section(card: str, task: str) -> list[str]:
    """The board's table lines under `### <task>`."""
    after = card.split(f"\n### {task}\n", 1)[1]
    return [line for line in after.split("\n\n", 1)[0].splitlines() if line.startswith("|")]


def cells(line: str) -> list[str]:
    """A table line's cells, splitting on `|` that is not backslash-escaped."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


RANK, MODEL, SETUP, FIRST = range(4)
TOKENS, COVERAGE, SUBMITTER, DATE, SIGNER = range(-5, 0)
"""A board's columns: #, model, the setup (linking to the bundle), BOARD_METRICS metrics,
tokens per row, rows (coverage and pin), submitter, run date, signer."""
HEADERS = ["tok/row", "rows", "submitter", "run date", "signed by"]
BUNDLE_LINK = re.compile(
    r"\[`([0-9a-f]{8})`\]\(https://huggingface\.co/datasets/org/board/blob/main/"
    r"bundles/[0-9a-f]{2}/([^/)]+)_([0-9a-f]{8})/([^/)]+)\.tar\.zst\)"
)


def player_of(line: str) -> str:
    """The player slug of a board line's setup, from its link to the bundle."""
    found = BUNDLE_LINK.fullmatch(cells(line)[SETUP])
    assert found is not None, cells(line)[SETUP]
    return found.group(2)


def three_tasks() -> list[TableRow]:
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


def test_each_task_gets_a_config_pointing_at_its_table_and_no_features() -> None:
    card = card_of(three_tasks())
    header = header_of(card)
    configs = {c["config_name"]: c["data_files"] for c in header["configs"]}
    assert configs == {
        "default": [{"split": "train", "path": "leaderboard/bundles/*.parquet"}],
        "_default": [{"split": "train", "path": "leaderboard/tasks/default.parquet"}],
        "expert-vqa": [{"split": "train", "path": "leaderboard/tasks/expert-vqa.parquet"}],
        "maze": [{"split": "train", "path": "leaderboard/tasks/maze.parquet"}],
        "wires": [{"split": "train", "path": "leaderboard/tasks/wires.parquet"}],
    }
    # Parquet carries its column types: nothing in the card can disagree with a table
    assert "dataset_info" not in header and "features" not in card.split("---\n", 2)[1]
    assert next(c["config_name"] for c in header["configs"]) == "default"


def test_the_board_shows_the_first_metric_columns_of_the_earliest_published_bundle() -> None:
    card = card_of(three_tasks())
    header, _, *_ = section(card, "expert-vqa")
    # earliest published first (gpt: em.acc, em.n), then claude, then qwen's new em.f1
    (board,) = [b for b in boards_of(three_tasks()) if b.task == "expert-vqa"]
    assert board.columns == ["em.acc", "em.n", "em.f1"]
    assert cells(header)[FIRST : FIRST + BOARD_METRICS] == ["`em.acc` ↓"]
    assert cells(header) == ["#", "model", "setup", "`em.acc` ↓", *HEADERS]
    # past BOARD_METRICS: only in the task's table
    assert "em.f1" not in card and "em.n" not in card


def test_the_leaderboard_is_ordered_by_the_first_metric_descending() -> None:
    card = card_of(three_tasks())
    _, _, *rows = section(card, "expert-vqa")
    table = [(cells(line)[RANK], player_of(line), cells(line)[FIRST]) for line in rows]
    # claude and qwen tie on 0.7: same rank, the earlier published first; llama has no score
    assert table == [
        ("1", "claude", "0.7"),
        ("1", "qwen", "0.7"),
        ("3", "gpt", "0.5"),
        ("-", "llama", "-"),
    ]
    undefined = f"{WARNING} not defined | -"
    fallback = f"{WARNING} first metric of the earliest bundle |"
    expert = (
        f"| expert-vqa | [`expert-vqa`]({VIEWER}/expert-vqa) | {undefined} | 4 | 2 |"
        f" `em.acc` (higher is better) {fallback}"
    )
    assert expert in card  # bundles, complete ones (gpt, llama), ranking metric
    assert f"| default | [`_default`]({VIEWER}/_default) | {undefined} | 1 | 1 |" in card
    wires = f"| wires | [`wires`]({VIEWER}/wires) | {undefined} | 1 | 1 | - {fallback}"
    assert wires in card  # no score to rank by


def test_partial_unknown_and_unpinned_results_are_marked() -> None:
    card = card_of(three_tasks())
    _, _, *rows = section(card, "expert-vqa")
    by_player = {player_of(line): cells(line) for line in rows}
    assert by_player["gpt"][COVERAGE] == "5/5"
    assert WARNING not in rows[2]
    assert by_player["qwen"][COVERAGE] == f"{WARNING} partial 3/5"
    assert by_player["claude"][COVERAGE] == f"{WARNING} unknown unpinned 5/?"
    # the setup links to the bundle's archive, in its shard (the folder name's SHA-256)
    shard = hashlib.sha256(b"gpt_1054f537").hexdigest()[:2]
    url = f"https://huggingface.co/datasets/org/board/blob/main/bundles/{shard}/gpt_1054f537"
    assert by_player["gpt"][SETUP] == f"[`1054f537`]({url}/expert-vqa@a1b2c3d4.tar.zst)"


def test_values_from_bundles_cannot_break_or_inject_into_the_table() -> None:
    long = "next | row " + "and | more" * 10
    values = [
        {"player": "evil", "model_name": "<script>alert(1)</script>", "player_name": "p|q"},
        {"player": "link", "model_name": "[link](javascript:x) `code` *b* \\|"},
        {"player": "long", "model_name": f"a\nb | {long}"},
        {"player": "worse", "coverage": "partial <b>|"},
    ]
    rows = [make_row(metrics={"a b|<em>": {"c": n}}, **v) for n, v in enumerate(values)]
    card = card_of(rows)
    header, align, *lines = section(card, "expert-vqa")
    assert len(lines) == 4
    assert all(len(cells(line)) == len(cells(header)) == len(cells(align)) for line in lines)
    by_player = {player_of(line): cells(line) for line in lines}
    assert set(by_player) == {"evil", "link", "long", "worse"}
    assert "<script>" not in card and "<em>" not in card and "<b>" not in card
    # the player name is not shown (the task's table has it); the model name is, inert
    assert "p|q" not in card and "next | row" not in card
    assert by_player["evil"][MODEL] == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert by_player["link"][MODEL] == r"\[link\](javascript:x) \`code\` \*b\* \\\|"
    assert by_player["long"][MODEL] == md_cell(f"a b | {long}")
    assert by_player["worse"][COVERAGE] == f"{WARNING} partial &lt;b&gt;\\| 5/5"
    mapped = metric_column(("a b|<em>", "c"))
    assert f"`{mapped}` is a b\\|&lt;em&gt;.c." in card  # the renamed metric, documented
    # As a Markdown renderer (with raw HTML on) sees it: one table row per bundle, every row
    # as wide as the header, and no element or link that came from the bundle.
    rendered = MarkdownIt("commonmark").enable("table").render(card.split("---\n", 2)[2])
    board = rendered.split("<h3>expert-vqa</h3>", 1)[1].split("</table>", 1)[0]
    widths = [row.count("<td") + row.count("<th") for row in board.split("<tr>")[1:]]
    assert widths == [len(cells(header))] * 5
    assert "<script" not in rendered and "<em>" not in rendered
    assert "<code>code</code>" not in board and "<strong>" not in board
    # the only links are the bundles' own, one a line
    links = re.findall(r'<a href="([^"]*)"', board)
    assert len(links) == board.count("<a ") == 4 and "&lt;b&gt;" in board
    assert all(link.startswith(BLOB) and link.endswith(".tar.zst") for link in links)


def test_a_task_name_is_escaped_in_its_heading_and_the_summary() -> None:
    """A task name is a safe file name, yet `_` and `.` mean something in Markdown."""
    card = card_of([make_row(task="ta.sk_1", metrics={"em": {"acc": 0.25}})])
    assert "\n### ta.sk\\_1\n" in card
    assert f"| ta.sk\\_1 | [`ta.sk_1`]({VIEWER}/ta.sk_1) | {WARNING} not defined | -" in card


@pytest.mark.parametrize(
    "invisible",
    [
        *("\u202a", "\u202e", "\u2066", "\u2069", "\u200b", "\u200f", "\ufeff", "\u2060"),
        *("\u061c", "\u034f", "\u00ad", "\u180e", "\u3164", "\ufe0f", "\U000e0041"),
        "\U000e0100",
    ],
)
def test_md_cell_strips_bidi_controls_and_zero_width_characters(invisible: str) -> None:
    assert md_cell(f"Ada{invisible} Lovelace{invisible}{invisible}") == "Ada Lovelace"


def test_a_defined_task_is_ranked_by_its_metric_in_its_direction() -> None:
    rows = [
        make_row(
            "gpt", metrics={"em": {"acc": 0.5, "err": 0.1}}, published_at="2026-06-01T00:00:00Z"
        ),
        make_row(
            "qwen", metrics={"em": {"acc": 0.9, "err": 0.4}}, published_at="2026-06-02T00:00:00Z"
        ),
    ]
    definition = TaskDefinition(
        hf_repo_id="GPTNT/expert-VQA", split="test", metric="em.err", direction="lower"
    )
    board = TaskBoard.of("expert-vqa", rows, definition)
    assert board.sort_column == "em.err" and [r.bundle_id.split("_")[0] for r in board.rows] == [
        "gpt",
        "qwen",
    ]
    card = render_dataset_card(REPO, [board], 2)
    assert "| GPTNT/expert-VQA | test | 2 |" in card  # the defined dataset and split
    assert "`em.err` (lower is better) |" in card
    assert "first metric of the earliest bundle |" not in card
    higher = TaskBoard.of("expert-vqa", rows, definition.model_copy(update={"direction": "higher"}))
    assert [r.bundle_id.split("_")[0] for r in higher.rows] == ["qwen", "gpt"]


def test_md_cell_leaves_nothing_a_renderer_links_by_itself() -> None:
    """GitHub-flavoured Markdown turns bare URLs, `www.` names and e-mail addresses into links:
    a model or player name must not (the entities show the same characters)."""
    for text, cell in [
        ("https://evil.example/login", "https&#58;//evil.example/login"),
        ("see WWW.phish.example", "see WWW&#46;phish.example"),
        ("admin@evil.example", "admin&#64;evil.example"),
        ("ftp://a www.b c@d", "ftp&#58;//a www&#46;b c&#64;d"),
    ]:
        assert md_cell(text) == cell and html.unescape(cell) == text
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


YAML_LOOKALIKES = ["true", "null", "15", "yes", "1e5", "0x1F", "1.0", "Default", "on"]
"""Task names (so config names) that YAML would read as booleans, nulls or numbers unquoted."""


def test_the_card_is_valid_yaml_and_a_card_huggingface_hub_reads() -> None:
    rows = [make_row(task=task, metrics={"true": 1, "null": 2}) for task in YAML_LOOKALIKES]
    card = card_of(rows)
    data = DatasetCard(card).data.to_dict()
    names = [c["config_name"] for c in data["configs"]]
    # strings in YAML, not booleans, nulls or numbers; `Default` is not the all-tasks config
    expected = sorted(YAML_LOOKALIKES)
    assert names == ["default", *("_Default" if t == "Default" else t for t in expected)]
    paths = [c["data_files"][0]["path"] for c in header_of(card)["configs"]]
    assert paths[1:] == [f"leaderboard/tasks/{task}.parquet" for task in expected]
    assert data["pretty_name"] == "GPTNT statics submission bundles"
    assert "leaderboard" in data["tags"]


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
        [make_row(task=task) for task in YAML_LOOKALIKES],
    ],
    ids=["empty", "three tasks", "hostile metric names", "odd task and model", "yaml tasks"],
)
def test_the_card_is_the_text_huggingface_hub_writes_for_it(rows: list[TableRow]) -> None:
    """render_dataset_card leaves out DatasetCard.from_template's parsing of the rendered YAML
    header and writing it again: right only while that round trip gives back the same text."""
    card = card_of(rows)
    assert str(DatasetCard(card)) == card


def test_the_card_depends_on_the_set_of_rows_only() -> None:
    rows = three_tasks()
    card = card_of(rows)
    assert card_of(list(reversed(rows))) == card
    assert card_of(rows + rows[:2]) == card  # a row given twice counts once
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    boards = [TaskBoard.of(b.task, list(reversed(b.rows))) for b in boards_of(shuffled)]
    assert render_dataset_card(REPO, boards, len(rows)) == card  # whatever order a board gets
    assert "**7** submission bundle(s)" in card
    empty = card_of([])
    assert "**0** submission bundle(s)" in empty and "## Leaderboards" not in empty
    assert [c["config_name"] for c in header_of(empty)["configs"]] == ["default"]


def test_the_ranking_metric_is_the_first_of_the_earliest_published_bundle() -> None:
    late_first = make_row("b", metrics={"z": 9, "a": 1}, published_at="2026-06-02T00:00:00Z")
    early = make_row("a", metrics={"a": 2}, published_at="2026-06-01T00:00:00Z")
    (board,) = boards_of([late_first, early])
    assert board.sort_column == "a" and board.columns == ["a", "z"]
    assert [row.bundle_id.split("_")[0] for row in board.rows] == ["a", "b"]
    assert board.ranks() == [1, 2]
    (no_scores,) = boards_of([make_row(metrics={"s": "x"})])
    assert no_scores.sort_column is None and no_scores.ranks() == [None]
    (line,) = section(card_of([make_row(metrics={"s": "x"})]), "expert-vqa")[2:]
    # no rank, no metric columns
    assert [cells(line)[i] for i in (RANK, MODEL, TOKENS, COVERAGE)] == ["-", "gpt", "1.5k", "5/5"]
    assert len(cells(line)) == len(HEADERS) + 3


def test_a_long_leaderboard_shows_the_best_and_says_how_many_more() -> None:
    rows = [make_row(f"p{i:03d}", metrics={"em": {"acc": i / 1000}}) for i in range(BOARD_ROWS + 2)]
    card = card_of(rows)
    _, _, *lines = section(card, "expert-vqa")
    assert len(lines) == BOARD_ROWS
    assert (cells(lines[0])[RANK], player_of(lines[0])) == ("1", f"p{BOARD_ROWS + 1:03d}")
    assert (cells(lines[-1])[RANK], player_of(lines[-1])) == (str(BOARD_ROWS), "p002")
    best = f"[the best {TASK_TABLE_ROWS}]({VIEWER}/expert-vqa)"
    assert f"... and 2 more: {best}, [all of them]({VIEWER}/default)." in card
    assert "more: [the best" not in card_of(rows[:BOARD_ROWS])


MODELS = [
    "Qwen/Qwen3.5-27B",
    "openai/gpt-5.2",
    "anthropic/claude-opus-4.5",
    "google/gemini-3-pro",
    "deepseek-ai/DeepSeek-V3.2",
    "meta-llama/Llama-4-Maverick",
]


def test_the_card_stays_well_under_100_kb_at_100_000_bundles_over_50_tasks() -> None:
    """Boards share CARD_BOARD_ROWS lines (each at least MIN_BOARD_ROWS) and BOARD_METRICS
    metric columns, and the overview shows OVERVIEW_ROWS setups, so the card grows with the
    tasks, not the bundles: names, submitters and signers of realistic length."""
    rng = random.Random(16)
    tasks = [f"ktane-{kind}-module-{i:02d}" for i, kind in enumerate(["vqa", "maze"] * 25)]
    signers = AllowedSigners()
    for name in ("gptnt-maintainers", "ada-lovelace", "some-lab"):
        signers = signers.with_signer(name, read_public_key(public_key_line()))
    keys = [entry.fingerprint for entry in signers.entries()] + [None, fingerprint_of_a_key()]
    setups = []
    for i in range(2000):
        model = MODELS[i % len(MODELS)]
        label = f"{rng.getrandbits(32):08x}" if i % 5 else "unpinned"
        setups.append(
            make_row(
                re.sub(r"[^a-z0-9]+", "-", model.lower()) + f"-{i}",
                label=label,
                resolved_revision=None if label == "unpinned" else label + "0" * 32,
                model_name=model,
                player_name=f"{model.split('/')[1].lower()}-{i}",
                coverage="complete" if i % 7 else "partial",
                submitter_name=f"Evaluation Team {i % 13} of Some University",
                signer_fingerprint=keys[i % len(keys)],
                published_at=f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:00Z",
            )
        )
    boards = []
    for task in tasks:
        rows = []
        for setup in setups:  # copies, not validated again: 100,000 rows in seconds
            metrics = {"exact_match": {"accuracy": rng.random(), "n": 1234}}
            bundle_id = setup.bundle_id.replace("expert-vqa@", f"{task}@")
            rows.append(
                setup.model_copy(
                    update={
                        "bundle_id": bundle_id,
                        "task_name": task,
                        "target": bundle_id.split("/")[1],
                        "metrics_json": json.dumps(metrics),
                    }
                )
            )
        boards.append(TaskBoard.of(task, rows))
    card = render_dataset_card(REPO, sorted(boards, key=lambda b: b.task), 100_000, signers)
    assert "**100000** submission bundle(s)" in card
    shown = board_rows(50)
    assert shown == MIN_BOARD_ROWS and len(section(card, tasks[0])) == 2 + shown
    assert card.count("\n### ") == 50 and card.count(f"... and {2000 - shown} more") == 50
    assert len(overview_lines(card)) == 2 + OVERVIEW_ROWS
    size = len(card.encode("utf-8"))
    assert size < 90_000, size


def test_a_board_names_who_signed_by_the_allowed_signers() -> None:
    allowed, stranger = public_key_line(), public_key_line()
    signers = AllowedSigners().with_signer("ada", read_public_key(allowed))
    key_of = {line: fingerprint(base64.b64decode(line.split()[1])) for line in (allowed, stranger)}
    rows = [
        make_row("allowed", signer_fingerprint=key_of[allowed], submitter_name=None),
        make_row("stranger", signer_fingerprint=key_of[stranger]),
        make_row("unsigned"),
    ]
    short = {line: f"`{key[len('SHA256:') :][:12]}…`" for line, key in key_of.items()}
    card = render_dataset_card(REPO, boards_of(rows), 3, signers)
    by_player = {player_of(line): cells(line) for line in section(card, "expert-vqa")[2:]}
    assert by_player["allowed"][SIGNER] == f"ada {short[allowed]}"
    assert by_player["stranger"][SIGNER] == f"{WARNING} {short[stranger]}"
    assert by_player["unsigned"][SIGNER] == "-"
    assert by_player["allowed"][SUBMITTER] == "-" and by_player["stranger"][SUBMITTER] == "Ada"
    assert {row[DATE] for row in by_player.values()} == {"2026-06-15"}
    assert "allowed signers (`leaderboard/allowed_signers`)" in card
    # a leaderboard that names no signers: the keys alone, nobody named, nothing marked
    plain = {player_of(line): cells(line) for line in section(card_of(rows), "expert-vqa")[2:]}
    assert plain["allowed"][SIGNER] == short[allowed]
    assert plain["stranger"][SIGNER] == short[stranger]


def setup_row(player: str, task: str, score: float | None, **fields: object) -> TableRow:
    metrics = {"em": {"acc": score if score is not None else "n/a"}}
    return make_row(player, task=task, metrics=metrics, **fields)


def test_the_overview_is_setups_by_tasks_best_first() -> None:
    rows = [
        setup_row("a", "t1", 0.9),
        setup_row("a", "t2", 0.1),  # a: ranks 1 and 3, mean 2
        setup_row("b", "t1", 0.8),
        setup_row("b", "t2", 0.5, coverage="partial"),  # b: ranks 2 and 1, mean 1.5
        setup_row("c", "t2", 0.4),  # c: one task, rank 2
        setup_row("d", "t1", None),  # no score: no rank, not in the overview
        setup_row("a", "t3", None),  # a task nobody is ranked on: no column
        setup_row("b", "t1", 0.1, label="00000000", resolved_revision="0" * 40),  # b's second
    ]
    card = card_of(rows)
    header, align, *lines = overview_lines(card)
    assert cells(header) == ["#", "model", "setup", "tasks", "mean rank", "t1", "t2"]
    assert len(cells(align)) == 7
    table = [cells(line) for line in lines]
    assert [row[2:] for row in table] == [
        ["`b_1054f537`", "2", "1.5", "0.8", f"{WARNING} 0.5"],  # its best t1 entry
        ["`a_1054f537`", "2", "2.0", "0.9", "0.1"],
        ["`c_1054f537`", "1", "2.0", "", "0.4"],
    ]
    assert [row[:2] for row in table] == [["1", "b"], ["2", "a"], ["3", "c"]]
    assert "setups are among the best" not in card and "ranked tasks on which" not in card
    # one ranked task: its board is the overview, so the card has none
    assert "## Across tasks" not in card_of([r for r in rows if r.task_name == "t1"])


def test_the_overview_keeps_its_rows_and_columns_bounded() -> None:
    tasks = [f"t{n:02d}" for n in range(OVERVIEW_TASKS + 3)]
    rows = [
        # setup s<i> is ranked on the first i+1 tasks, always behind every later setup
        setup_row(f"s{i:02d}", task, i / 100)
        for i in range(OVERVIEW_ROWS + 5)
        for task in tasks[: i + 1]
    ]
    found = overview(boards_of(rows))
    # a setup's entries are among each task's best OVERVIEW_DEPTH: s00 to s04 are behind 20
    # others on every task they ran
    assert found.setups_ranked == OVERVIEW_DEPTH and found.tasks_ranked == len(tasks)
    # the setups on most tasks; the tasks most of them are ranked on (then by name)
    shown = [f"s{i:02d}" for i in range(OVERVIEW_ROWS + 4, 4, -1)]
    assert [setup.name.split("_")[0] for setup in found.setups] == shown
    assert found.tasks == tasks[:OVERVIEW_TASKS]
    card = card_of(rows)
    assert len(overview_lines(card)) == 2 + OVERVIEW_ROWS
    assert len(cells(overview_lines(card)[0])) == 5 + OVERVIEW_TASKS
    assert "setups are among the best" not in card  # s05 to s24: all shown
    assert f"the {OVERVIEW_TASKS} of the {len(tasks)} ranked tasks on which most" in card


def test_boards_share_the_cards_lines_between_min_and_max() -> None:
    assert board_rows(1) == BOARD_ROWS and board_rows(0) == BOARD_ROWS
    assert board_rows(10) == min(BOARD_ROWS, CARD_BOARD_ROWS // 10)
    assert board_rows(1000) == MIN_BOARD_ROWS
    rows = [setup_row(f"p{i}", f"t{n}", i / 10) for n in range(30) for i in range(9)]
    card = card_of(rows)
    assert len(section(card, "t0")) == 2 + board_rows(30) < 2 + 9
    assert f"the best\n{board_rows(30)} bundles" in card
