"""What a person copies is what they paste: every value a template puts between backticks is
written literally (`bundler.hub.repo.markdown.code_span`), never Markdown-escaped, and no value
breaks a table.

Every template (the dataset card, a pull request's description, review's comment) is rendered
with values full of Markdown punctuation and parsed as a Hub reader would (markdown-it-py:
CommonMark with GFM's tables). Each code span's text must be a value given, each value given
in backticks must be there as it is, and each table row must have its header's columns."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import pytest
from factory import make_row
from markdown_it import MarkdownIt
from markdown_it.rules_block.table import escapedSplit
from markdown_it.token import Token

from bundler.core.checks import CheckResult
from bundler.hub.leaderboard.card import (
    CARD_TEMPLATE,
    WARNING,
    compiled_template,
    md_cell,
    render_dataset_card,
)
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.tables import AllTasksTable
from bundler.hub.publish.pr_description import (
    PR_TEMPLATE,
    ClaimDifference,
    ProposedBundle,
    render_pr_description,
)
from bundler.hub.repo.markdown import code_span, markdown_name, markdown_value, template_text
from bundler.hub.review.judge import BundleReview, PullRequestReview
from bundler.hub.review.round import ReviewReport, render_markdown
from bundler.local.diff import (
    BundleDiff,
    DiffSide,
    FieldDifference,
    MetricDifference,
    PredictionChanges,
)

PARSER = MarkdownIt("commonmark").enable("table")
REPO = "org-1/my_board.v2"
"""A repository id as the Hub allows them (letters, digits, `-`, `_`, `.`): it is also in
links, where a stranger's punctuation has no place."""

PUNCTUATION = [
    "`",
    "``",
    "a`b",
    "a``b`c",
    "`x`",
    "` x `",
    " y ",
    "  ",
    " lead",
    "trail ",
    "|",
    "a|b|c",
    "a\\|b",
    "\\",
    "x\\",
    "\\`",
    "*b* _i_ **s** __u__",
    "[l](https://evil.example) ![i](x)",
    "<b>x</b> &amp; &lt; <!-- c -->",
    "#h @who ~s~ +p -m .d !e {b} (p)",
    "naïve ✓ ⚠",
]


def value(tag: str) -> str:
    """A value for one place in a template, full of Markdown punctuation, told apart by tag."""
    return f"{tag} `x` a``b | c\\|d *e* _f_ [g](h) <i>&amp; \\ #j @k"


def parsed_code_spans(markdown: str) -> list[str]:
    """The text of every code span, as a CommonMark reader with GFM tables gives it."""
    spans = []
    for token in PARSER.parse(markdown):
        spans += [child.content for child in token.children or [] if child.type == "code_inline"]
    return spans


def source_cells(line: str) -> int:
    """How many cells a table line has, split as GFM splits it (an unescaped `|`)."""
    cells = escapedSplit(line.strip())
    if cells and not cells[0].strip():
        cells = cells[1:]
    if cells and not cells[-1].strip():
        cells = cells[:-1]
    return len(cells)


def assert_tables_whole(markdown: str) -> int:
    """Every table row has its header's columns (a reader drops a row's cells past the
    header's, and pads a short row, so the rows' source is what is counted); the tables."""
    lines = markdown.splitlines()
    tokens: list[Token] = PARSER.parse(markdown)
    tables = [token for token in tokens if token.type == "table_open"]
    for table in tables:
        assert table.map is not None
        first, end = table.map
        header, _, *rows = lines[first:end]
        for row in rows:
            assert source_cells(row) == source_cells(header), (header, row)
    return len(tables)


def assert_spans(markdown: str, given: Iterable[str], literal: Iterable[str] = ()) -> None:
    """Every code span holds a value given (or a template's own text), and every value given
    is in one."""
    spans = parsed_code_spans(markdown)
    expected = set(given)
    assert expected <= set(spans), expected - set(spans)
    stray = set(spans) - expected - set(literal)
    assert not stray, stray


def template_spans(name: str) -> set[str]:
    """The code spans a template writes itself (no value in them)."""
    return {span for span in re.findall(r"`([^`\n]+)`", template_text(name)) if "{{" not in span}


# ----------------------------------------------------------------------------- the filter


@pytest.mark.parametrize("text", PUNCTUATION)
def test_a_code_span_holds_its_value_in_a_paragraph_and_in_a_table_cell(text: str) -> None:
    paragraph = f"before {code_span(text)} after\n"
    assert parsed_code_spans(paragraph) == [text]
    cell = code_span(text, cell=True)
    table = f"| a | b |\n|---|---|\n| {cell} | {cell} |\n"
    assert parsed_code_spans(table) == [text, text]
    assert assert_tables_whole(table) == 1


@pytest.mark.parametrize("text", ["a\nb", "a\r\nb", "\r", "a\tb", "\x1b[2J", "a\x85b", "a\u2028b"])
def test_a_code_span_refuses_a_line_break_and_control_characters(text: str) -> None:
    with pytest.raises(ValueError, match="a code span holds one line of text"):
        code_span(text)


def test_a_code_span_refuses_an_empty_value() -> None:
    with pytest.raises(ValueError, match="cannot be empty"):
        code_span("")


@pytest.mark.parametrize("name", ["acc\nx", "a\x85b", "", "a\u2029b"])
def test_a_name_no_code_span_holds_is_shown_as_json(name: str) -> None:
    """A stranger's metric name with a line break is shown (as its JSON string), not refused:
    review's report of that bundle still renders."""
    shown = str(markdown_name(name, cell=True))
    (span,) = parsed_code_spans(f"| a |\n|---|\n| {shown} |\n")
    assert json.loads(span) == name and "\n" not in span


def test_a_value_is_json_that_reads_back_as_the_value() -> None:
    compared = {"k|`": "v\\*\n", "n": None, "u": "\x85\u2028"}
    (span,) = parsed_code_spans(f"x {markdown_value(compared)} y\n")
    assert json.loads(span) == compared


def test_no_template_puts_a_value_between_backticks_without_the_filter() -> None:
    """`{{ value | code }}` writes the backticks itself; a `{{ }}` between a template's own
    backticks would be escaped, or not, by whatever renders it, and never checked."""
    for name in (CARD_TEMPLATE, PR_TEMPLATE, "review.md.j2"):
        text = re.sub(r"\{#.*?#\}", "", template_text(name), flags=re.DOTALL)
        inside = [span for span in re.findall(r"`[^`\n]*`", text) if "{{" in span]
        assert inside == [], (name, inside)


# --------------------------------------------------------------------------- the templates


def proposed(verb: str, tag: str) -> ProposedBundle:
    return ProposedBundle(
        bundle_id=value(f"{tag}-id"),
        verb=verb,  # type: ignore[arg-type]
        coverage=value(f"{tag}-coverage"),
        predictions=3,
        errors=0,
        exceptions=0,
        is_pinned=False,
        sha256=value(f"{tag}-sha"),
        submitter=value(f"{tag}-submitter"),
        old_sha256=value(f"{tag}-old-sha") if verb != "adds" else None,
        old_submitter=None,
        old_predictions=2 if verb != "adds" else None,
        differences=[ClaimDifference(field=value(f"{tag}-field"), old="<a>", new="`b`")]
        if verb != "adds"
        else [],
        warnings=[value(f"{tag}-warning")],
    )


@pytest.mark.parametrize("pr_num", [None, 7])
def test_a_pull_requests_description_holds_every_value_and_its_review_command(
    pr_num: int | None,
) -> None:
    bundles = [proposed("adds", "new"), proposed("replaces", "old"), proposed("extends", "more")]
    markdown = render_pr_description(REPO, value("user"), bundles, "1.2.3", pr_num=pr_num)
    ref = "N" if pr_num is None else str(pr_num)
    command = f"bundler download --repo {REPO} --revision refs/pr/{ref} -o review"
    given = [command]
    for bundle in bundles:
        given += [bundle.bundle_id]
        given += [bundle.sha256, bundle.old_sha256] if bundle.old_sha256 else []
        given += [difference.field for difference in bundle.differences]
    assert_spans(markdown, given, template_spans(PR_TEMPLATE))
    assert assert_tables_whole(markdown) == 3  # the bundles, and one per bundle changed
    assert "\\" not in command and f"`{command}`" in markdown


def test_reviews_comment_holds_every_value() -> None:
    check = CheckResult(name=value("check"), status="warned", detail=value("detail"))
    a, b = {"k|`": value("a")}, [value("b"), None]
    diff = BundleDiff(
        a=DiffSide(archive="a", bundle_id="a", sha256="a" * 64),
        b=DiffSide(archive="b", bundle_id="b", sha256="b" * 64),
        claims=[FieldDifference(field=value("claim"), a=a, b=b)],
        files=[],
        metrics=[
            MetricDifference(name=value("metric"), change="changed", a=0.5, b=value("m"), delta=1),
            MetricDifference(name="acc\nnew", change="added", b=1.5),
        ],
        predictions=PredictionChanges(changed=1, unchanged=2),
        identical=False,
        only_run_date=False,
        verdict=value("verdict"),
    )
    bundle = BundleReview(
        bundle_id=value("bundle"),
        classification="replacement",
        sha256=value("sha"),
        branch_sha256=value("branch-sha"),
        coverage=value("coverage"),
        submitter=value("submitter"),
        checks=[check],
        diff=diff,
    )
    pr = PullRequestReview(
        num=12,
        title=value("title"),
        author=value("author"),
        status="open",
        url="https://example.invalid/12",
        base_branch=value("branch"),
        head=value("head"),
        checks=[check],
        bundles=[bundle],
    )
    pr.accept(["another"], value("maintainer"))
    markdown = render_markdown(ReviewReport(repo_id=REPO, max_exception_rate=0.05), pr)
    accept = f"bundler review --repo {REPO} --pr 12 --merge --accept {check.name}"
    given = [pr.head[:12], pr.base_branch, bundle.bundle_id, value("sha")[:12]]
    given += [value("branch-sha")[:12], value("claim"), value("metric"), accept]
    given += [json.dumps(x, ensure_ascii=False, sort_keys=True) for x in (a, b, 0.5, value("m"))]
    given += [json.dumps("acc\nnew"), "1.5"]
    assert_spans(markdown, given, template_spans("review.md.j2"))
    assert assert_tables_whole(markdown) == 4  # the PR's checks, bundles, one's checks, diff


def test_the_dataset_cards_template_holds_every_value() -> None:
    """The card's values in backticks come from the bundler (a config, a column, a file), so
    the template is rendered here with punctuation in each. A task's config is also in links,
    so it has only what a task name may (`SAFE_TASK_NAME`), Markdown's `_` and `.` among it,
    as has the all-tasks config, in a link too."""
    names = {tag: value(tag) for tag in ("sort", "table", "column", "extra")}
    names["config"], names["all"] = "my_task__v1.2-x_", "_all__.x-"
    board = SimpleNamespace(
        task="task",
        config=names["config"],
        definition=SimpleNamespace(hf_repo_id="org/data", split="test"),
        total=9,
        complete=1,
        sort_column=names["sort"],
        direction="higher",
        by_intervals=True,
        columns=[names["column"]],
        mapped=lambda columns: [(column, "a.b") for column in columns],
    )
    variables: dict[str, Any] = {
        "bundler_version": "1.2.3",
        "card_data": "pretty_name: x\n",
        "repo_id": REPO,
        "bundle_count": 9,
        "boards": [board],
        "board_table": lambda board: [],
        "overview": SimpleNamespace(tasks_ranked=1),
        "overview_table": lambda overview: [],
        "signers": True,
        "all_tasks_config": names["all"],
        "all_table": names["table"],
        "warning": WARNING,
        "board_rows": 3,
        "md_cell": md_cell,
        "charts": [],
        "task_chart": lambda task: f"charts/{task}.png",
        "charts_extra": names["extra"],
    }
    for number in ("overview_rows", "overview_depth", "overview_tasks", "task_rows"):
        variables[number] = 10
    for number in ("part_rows", "board_metrics", "max_columns", "max_length"):
        variables[number] = 10
    for number in ("stem_length", "digest_hex"):
        variables[number] = 10
    card = compiled_template(CARD_TEMPLATE).render(**variables)
    body = card.split("---\n", 2)[2]
    given = [*names.values(), f"bundler card --repo {REPO}"]
    assert_spans(body, given, template_spans(CARD_TEMPLATE))
    assert assert_tables_whole(body) == 2  # the boards' summary and what is here


def test_a_rendered_dataset_card_keeps_its_code_spans_and_tables_whole() -> None:
    """The card as `bundler card` renders it, from rows whose metric names and model names are
    full of punctuation."""
    rows = [
        make_row(player="p1", metrics={"a b|<em>`": {"c": 0.5}}, model_name=value("model")),
        make_row(player="p2", task="other", metrics={"x|y": 1}, model_name="`m`"),
    ]
    table = AllTasksTable.of(rows)
    boards = [TaskBoard.of(task, table.rows(task)) for task in table.tasks()]
    body = render_dataset_card(REPO, boards, len(table)).split("---\n", 2)[2]
    assert assert_tables_whole(body) >= 4
    assert all("\\" not in span for span in parsed_code_spans(body))
