"""The repository's dataset card, rendered from the leaderboard's boards with the Jinja template
in `templates/`, small at any size.

Its YAML points the dataset viewer at the tables (`bundler.hub.leaderboard.tables`): the
all-tasks table as the `default` config and one config per task. Parquet carries its own column
types, so the card declares no features. Its body shows an overview across tasks
(`bundler.hub.leaderboard.overview`), then each task's best bundles (`board_rows`) and counts,
and points at the task's full table in the viewer, so it stays well under 100 KB at 50 tasks
and 100,000 bundles.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol

from huggingface_hub import DatasetCard, DatasetCardData
from huggingface_hub.repocard import REGEX_YAML_BLOCK

from bundler.core.errors import HubError
from bundler.core.version import VERSION
from bundler.hub.leaderboard.chart import charts_available
from bundler.hub.leaderboard.overview import (
    OVERVIEW_DEPTH,
    OVERVIEW_ROWS,
    OVERVIEW_TASKS,
    Overview,
    overview,
)
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import (
    MAPPED_DIGEST_HEX,
    MAPPED_STEM_LENGTH,
    METRIC_COLUMN_MAX_LENGTH,
    BoardRow,
)
from bundler.hub.leaderboard.tables import MAX_METRIC_COLUMNS, PART_ROWS, TASK_TABLE_ROWS
from bundler.hub.repo.markdown import code_span, markdown_filters, template_text
from bundler.hub.repo.paths import (
    ALL_TABLE_FILES,
    ALL_TASKS_CONFIG,
    README,
    repo_archive,
    task_chart,
    task_table,
)

if TYPE_CHECKING:
    import jinja2

    from bundler.local.allowed_signers import AllowedSigners


class CardRefusalReport(Protocol):
    """Where a card left out of the commits is recorded, and why: the fields of the upload's
    report (bundler.hub.publish.plan.UploadReport) that `card_acceptable` and `card_refused`
    write."""

    card_refused: str | None
    warnings: list[str]


CARD_TEMPLATE = "dataset_card.md.j2"
CHARTS_EXTRA = "pip install 'statics-bundler[charts]'"
"""How to get charts (matplotlib), as the card says it."""
TAGS = ["gptnt", "ktane", "leaderboard", "evaluation", "statics-bundler"]
SPLIT = "train"
BOARD_METRICS = 1
"""Metric columns a board in the card shows: the ranking one; the task's table in the viewer
has up to MAX_METRIC_COLUMNS."""
BOARD_ROWS = OVERVIEW_DEPTH
"""Bundles a board in the card shows at most, best first; the task's table has
TASK_TABLE_ROWS."""
CARD_BOARD_ROWS = 150
MIN_BOARD_ROWS = 3
"""Board lines the whole card shows: each board its best CARD_BOARD_ROWS / tasks of them,
between MIN_BOARD_ROWS and BOARD_ROWS (`board_rows`). A line is about 250 bytes (its link to
the bundle is half of it), so fifty boards stay well under 100 KB."""
SIGNER_SHOWN = 12
"""The characters of a signer's key fingerprint (after `SHA256:`) a board shows: 72 of its
256 bits, too many to make another key that shows the same; the tables have all of it."""
CELL_MAX_LENGTH = 40
"""Text from a bundle is cut to this in a table cell, so one long name cannot swamp a table
(nor the card's size)."""
WARNING = "⚠"
NO_VALUE = "-"
LEFT, RIGHT = "---", "---:"
MAX_METADATA_BYTES = 1024 * 1024
"""The largest card metadata (the YAML header) the bundler commits: the Hub has answered 413
to large metadata without documenting a number; the test Hub refuses over 1 MiB, as here."""


def check_card(text: str) -> str | None:
    """Why the Hub would refuse this dataset card, as far as can be told locally (None: it
    looks fine): its YAML header must parse, with huggingface_hub's own card classes, into a
    mapping that DatasetCardData takes, and stay within MAX_METADATA_BYTES."""
    found = REGEX_YAML_BLOCK.search(text)
    if found is None:
        return "the card has no metadata header (--- YAML ---)"
    size = len(found.group(2).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        return f"the card's metadata is {size} bytes, over the {MAX_METADATA_BYTES} it may hold"
    try:
        card = DatasetCard(text, ignore_metadata_errors=False)
        DatasetCardData(**card.data.to_dict())  # type: ignore[no-untyped-call]
    except Exception as error:  # the client's YAML and card errors have no common base
        lines = str(error).strip().splitlines() or [type(error).__name__]
        return f"the card's metadata is not valid: {lines[0]}"
    return None


def card_acceptable(card: bytes, report: CardRefusalReport) -> bool:
    """Whether an upload's commit may carry this card: when check_card finds a problem, the
    bundles are committed without it, and the report says why (exit 1)."""
    problem = check_card(card.decode("utf-8"))
    if problem is None:
        return True
    card_refused(report, HubError(f"{README}: {problem}"))
    return False


def card_refused(report: CardRefusalReport, error: HubError) -> None:
    """Record that the dataset card was left out of the upload's commits, and why (what to do
    then, regenerate the card, is the command line's to word)."""
    line = f"the dataset card was not committed ({error}); the bundles were, without it"
    if report.card_refused is None:
        report.card_refused = line
        report.warnings.append(line)


@functools.cache
def compiled_template(name: str) -> jinja2.Template:
    """A plain-Jinja template from `templates/` with the Markdown filters (`code` for a value in
    backticks), compiled once per process. jinja2 loads only for the commands that render one."""
    import jinja2

    environment = jinja2.Environment()
    environment.filters.update(markdown_filters())
    template: jinja2.Template = environment.from_string(template_text(name))
    return template


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_IGNORABLE_NOT_FORMAT = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]+"
)
"""Unicode's default-ignorable characters that are not format characters: the combining
grapheme joiner, Hangul fillers, Khmer inherent vowels, variation selectors."""


def _visible(text: str) -> str:
    """`text` without what a reader cannot see: every format character (category Cf: bidi
    controls and marks such as U+202E, which shows `gpt-5` for `5-tpg`, and U+061C; zero-width
    characters, which make two names look the same; tags) and the other default-ignorable
    characters (`_IGNORABLE_NOT_FORMAT`). Stripped from the card, as the terminal output
    escapes them."""
    shown = "".join(char for char in text if unicodedata.category(char) != "Cf")
    return _IGNORABLE_NOT_FORMAT.sub("", shown)


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~!#])")


def md_cell(text: str) -> str:
    """Text from a bundle (from a stranger) as inert Markdown table-cell content: line breaks
    and control characters become spaces, HTML is escaped to entities, the punctuation that
    Markdown gives a meaning to (a `|` ends the cell) is backslash-escaped, and what a
    GitHub-flavoured renderer would turn into a link by itself (`https://`, `www.`, an e-mail
    address) is broken by an entity that shows the same character. Bidi controls and
    zero-width characters are removed (`_visible`)."""
    text = _CONTROL.sub(" ", _visible(text)).strip()
    if len(text) > CELL_MAX_LENGTH:
        text = text[: CELL_MAX_LENGTH - 1] + "…"
    # Markdown first, then HTML: escaping the other way round would escape the `#` of the
    # entities themselves, and an apostrophe would show as `&#x27;`.
    escaped = html.escape(_MARKDOWN_PUNCTUATION.sub(r"\\\1", text), quote=True)
    return _AUTOLINK.sub(_broken_link, escaped)


_AUTOLINK = re.compile(r"@|://|www\.", re.IGNORECASE)


def _broken_link(found: re.Match[str]) -> str:
    """`@` and the `:` of `://` as entities, and the dot of `www.`, keeping its case."""
    text = found.group()
    if text == "@":
        return "&#64;"
    if text == "://":
        return "&#58;//"
    return text[:3] + "&#46;"


def _code(text: str) -> str:
    """A value in a table cell's code span, as it is (a column name, a setup, a key)."""
    return code_span(text, cell=True)


def _number(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.4g}"


def board_rows(tasks: int) -> int:
    """How many bundles each board shows on a card of `tasks` boards (see CARD_BOARD_ROWS)."""
    return max(MIN_BOARD_ROWS, min(BOARD_ROWS, CARD_BOARD_ROWS // max(tasks, 1)))


def board_table(
    board: TaskBoard, repo_id: str, rows: int, signers: AllowedSigners | None = None
) -> list[str]:
    """A task's best `rows` bundles as Markdown table lines, every bundle-supplied value
    escaped: the model as the run names it (GPTNT records no provider, so none is shown), the
    player's setup (`<player>_<fp8>`, the player's slug and its capability fingerprint) as a
    link to the bundle's archive, the ranking score, tokens per row, the rows present of the
    expected (marked when the result is not complete on a pinned, accepted dataset), the
    submitter, the run's date (UTC) and who signed it. The task's table has everything else."""
    shown = board.columns[:BOARD_METRICS]
    metric_headers = [
        (_code(column) + (" ↓" if column == board.sort_column else ""), RIGHT) for column in shown
    ]
    headers = [("#", RIGHT), ("model", LEFT), ("setup", LEFT), *metric_headers]
    headers += [("tok/row", RIGHT), ("rows", LEFT), ("submitter", LEFT), ("run date", LEFT)]
    headers += [("signed by", LEFT)]
    lines = [_line([title for title, _ in headers]), _line([align for _, align in headers])]
    for rank, row in list(zip(board.ranks(), board.rows, strict=True))[:rows]:
        cells = [NO_VALUE if rank is None else str(rank), md_cell(row.model_name)]
        cells += [_bundle_link(repo_id, row)]
        cells += [_score(board, row, column) for column in shown]
        cells += [_tokens_per_row(row), _coverage(row, stale=board.stale(row))]
        cells += [md_cell(row.submitter_name or "") or NO_VALUE, row.run_date[:10]]
        cells += [_signer(row, signers)]
        lines.append(_line(cells))
    return lines


def _bundle_link(repo_id: str, row: BoardRow) -> str:
    """The setup's capability fingerprint (8 characters, as in its folder's name), linking to
    the bundle's archive on the Hub (a page with its size, digest and download; the URL names
    the player too)."""
    url = f"https://huggingface.co/datasets/{repo_id}/blob/main/{repo_archive(row.key)}"
    return f"[{_code(row.key.player_dir.rsplit('_', 1)[1])}]({url})"


def _signer(row: BoardRow, signers: AllowedSigners | None) -> str:
    """Who signed: the start of the key's fingerprint (the tables have all of it), after the
    Hub names the leaderboard's allowed signers give that key when the bundle was published
    (its row's `published_at`, stamped as it landed: a key retired since still vouches for
    it, as git judges a signed commit at its time; the card asks the Hub nothing per bundle);
    marked when they give it to nobody then. Unsigned: `-`."""
    fingerprint = row.signer_fingerprint
    if fingerprint is None:
        return NO_VALUE
    key = _code(fingerprint.removeprefix("SHA256:")[:SIGNER_SHOWN] + "…")
    if signers is None:
        return key
    principals = sorted(signers.principals_of(fingerprint, int(row.published.timestamp())))
    if not principals:
        return f"{WARNING} {key}"
    return f"{md_cell(', '.join(principals))} {key}"


def overview_table(found: Overview) -> list[str]:
    """The overview (bundler.hub.leaderboard.overview) as Markdown table lines: a setup's
    model, setup, tasks ranked on and mean rank, then its score on each task, marked as its
    board marks it."""
    headers = [("#", RIGHT), ("model", LEFT), ("setup", LEFT), ("tasks", RIGHT)]
    headers += [("mean rank", RIGHT), *((md_cell(task), RIGHT) for task in found.tasks)]
    lines = [_line([title for title, _ in headers]), _line([align for _, align in headers])]
    for place, setup in enumerate(found.setups, start=1):
        cells = [str(place), md_cell(setup.model_name), _code(setup.name)]
        cells += [str(len(setup.entries)), f"{setup.mean_rank:.1f}"]
        for task in found.tasks:
            entry = setup.entries.get(task)
            if entry is None:
                cells.append("")
                continue
            mark = f"{WARNING} " if entry.marked else ""
            cells.append(mark + _number(entry.score))
        lines.append(_line(cells))
    return lines


def _score(board: TaskBoard, row: BoardRow, column: str) -> str:
    """A metric's value; the ranking one with its 95% interval where the task has them
    (`0.824 [0.788, 0.855]`)."""
    interval = board.interval(row) if column == board.sort_column else None
    if interval is None:
        return _number(board.value(row, column))
    return f"{board.value(row, column):.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _tokens_per_row(row: BoardRow) -> str:
    """The run's cost beside its score: input and output tokens per row present, in three
    figures (`850`, `1.5k`, `12k`, `1.2M`), which is what a reader compares."""
    tokens = row.input_tokens + row.output_tokens
    if not tokens or not row.rows_present:
        return NO_VALUE
    per_row = tokens / row.rows_present
    for scale, unit in ((1e6, "M"), (1e3, "k")):
        if per_row >= scale:
            return (
                f"{per_row / scale:.2g}{unit}"
                if per_row < 10 * scale
                else f"{per_row / scale:.0f}{unit}"
            )
    return f"{per_row:.0f}"


def _line(cells: list[str]) -> str:
    """A Markdown table line, without the padding spaces a renderer ignores (they were an
    eighth of a card of fifty boards)."""
    return "|" + "|".join(cells) + "|"


def _coverage(row: BoardRow, *, stale: bool) -> str:
    """`present/expected`, marked `⚠ partial`, `⚠ unknown`, `⚠ unpinned` and `⚠ stale` (a
    dataset revision the task no longer accepts) where due."""
    expected = "?" if row.expected_rows is None else str(row.expected_rows)
    marks = [] if row.coverage == "complete" else [md_cell(row.coverage)]
    marks += [] if row.key.is_pinned else ["unpinned"]
    marks += ["stale"] if stale else []
    present = f"{row.rows_present}/{expected}"
    return f"{WARNING} {' '.join(marks)} {present}" if marks else present


def card_data(boards: Sequence[TaskBoard]) -> DatasetCardData:
    configs = [
        {"config_name": ALL_TASKS_CONFIG, "data_files": [{"split": SPLIT, "path": ALL_TABLE_FILES}]}
    ]
    configs += [
        {
            "config_name": board.config,
            "data_files": [{"split": SPLIT, "path": task_table(board.task)}],
        }
        for board in boards
    ]
    return DatasetCardData(
        pretty_name="GPTNT statics submission bundles", tags=TAGS, configs=configs
    )


def render_dataset_card(
    repo_id: str,
    boards: Sequence[TaskBoard],
    bundle_count: int,
    signers: AllowedSigners | None = None,
    charts: Collection[str] = (),
) -> str:
    """The README.md of a repository whose leaderboard has these boards (and these allowed
    signers, which name who signed): YAML header and body, with the chart of each task in
    `charts` (bundler.hub.leaderboard.chart) under its board, and how to get charts when a
    defined task has none. The same boards give the same text from the same bundler, which
    the card names so that a reader installs the very version that wrote it. How to get
    charts is said by a bundler without them only: one that has them and still drew no chart
    for a task (`drawn_charts` failed) says why in its run, not on the card."""
    rows = board_rows(len(boards))
    return compiled_template(CARD_TEMPLATE).render(
        bundler_version=VERSION,
        card_data=card_data(boards).to_yaml(),
        repo_id=repo_id,
        bundle_count=bundle_count,
        boards=boards,
        board_table=functools.partial(board_table, repo_id=repo_id, rows=rows, signers=signers),
        overview=overview(boards),
        overview_table=overview_table,
        overview_rows=OVERVIEW_ROWS,
        overview_depth=OVERVIEW_DEPTH,
        overview_tasks=OVERVIEW_TASKS,
        signers=signers is not None,
        all_tasks_config=ALL_TASKS_CONFIG,
        all_table=ALL_TABLE_FILES,
        task_rows=TASK_TABLE_ROWS,
        part_rows=f"{PART_ROWS:,}",
        task_table=task_table,
        warning=WARNING,
        board_metrics=BOARD_METRICS,
        board_rows=rows,
        max_columns=MAX_METRIC_COLUMNS,
        max_length=METRIC_COLUMN_MAX_LENGTH,
        stem_length=MAPPED_STEM_LENGTH,
        digest_hex=MAPPED_DIGEST_HEX,
        md_cell=md_cell,
        charts=charts,
        task_chart=task_chart,
        charts_extra=None if charts_available() else CHARTS_EXTRA,
    )
