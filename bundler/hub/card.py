"""The repository's dataset card: rendered from the Jinja template in `templates/` through
huggingface_hub's card classes, and kept true on a branch by `refresh_card`.

The card is computed from the rows of every bundle in the repository. Its YAML points the Hub's
dataset viewer at the row files and declares their features: one all-tasks config (`default`)
with the same columns for every bundle, and one leaderboard config per task whose metric
columns are the union of its bundles' numeric metrics. Its body shows each task's leaderboard.

The card on a branch is always rendered from what the branch holds: every bundle's row file
under `rows/` at one commit, never from what one uploader happens to know. `refresh_card`
regenerates it as a commit naming its parent, and skips the commit when nothing changes, so a
card gone stale (after a pull request merged in the web interface) is repaired by running it.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from huggingface_hub import CommitOperationAdd, DatasetCard, DatasetCardData
from huggingface_hub.repocard import REGEX_YAML_BLOCK
from pydantic import Field

from bundler.core.errors import HubAccessError, HubError, RowError, TemporaryError, UsageError
from bundler.core.model import Model
from bundler.hub.access import require_card
from bundler.hub.layout import (
    ALL_ROWS_GLOB,
    ALL_TASKS_CONFIG,
    README,
    ROWS_DIR,
    repo_row,
    row_ids_in,
    task_config_name,
    task_rows_glob,
)
from bundler.hub.markdown import template_text
from bundler.hub.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.rows import (
    MAPPED_DIGEST_HEX,
    MAPPED_STEM_LENGTH,
    METRIC_COLUMN_MAX_LENGTH,
    BundleRow,
    dataset_features,
    metric_columns,
    read_row,
    task_features,
)
from bundler.hub.session import (
    HubSession,
    PlannedCommit,
    RemoteFile,
    commit_replanned,
    git_blob_id,
)

if TYPE_CHECKING:
    import jinja2


class UploadReport(Protocol):
    """What an upload's report holds about the card (bundler.hub.upload.UploadReport)."""

    card_refused: str | None
    warnings: list[str]


CARD_TEMPLATE = "dataset_card.md.j2"
TAGS = ["gptnt", "ktane", "leaderboard", "evaluation", "statics-bundler"]
SPLIT = "train"
BOARD_METRICS = 4
"""Metric columns a leaderboard in the card shows (the ranking one first); the task's config
in the dataset viewer has all of them."""
BOARD_ROWS = 100
"""Bundles a leaderboard in the card shows, best first, so the card stays readable (and small)
however many bundles a task gathers; the task's config in the dataset viewer has all of them."""
CELL_MAX_LENGTH = 80
"""Text from a bundle is cut to this in a table cell, so one long name cannot swamp a table."""
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


def card_acceptable(card: bytes, report: UploadReport) -> bool:
    """Whether an upload's commit may carry this card: when check_card finds a problem, the
    bundles are committed without it, and the report says why (exit 1)."""
    problem = check_card(card.decode("utf-8"))
    if problem is None:
        return True
    card_refused(report, HubError(f"{README}: {problem}"))
    return False


def card_refused(report: UploadReport, error: HubError) -> None:
    """Record that the dataset card was left out of the upload's commits, and why."""
    line = (
        f"the dataset card was not committed ({error}); the bundles were, without it: "
        "fix the problem, then run `bundler card`"
    )
    if report.card_refused is None:
        report.card_refused = line
        report.warnings.append(line)


@functools.cache
def compiled_template(name: str) -> jinja2.Template:
    """A plain-Jinja template from `templates/`, compiled once per process: an upload renders
    the card once per commit. jinja2 loads only for the commands that render one."""
    import jinja2

    template: jinja2.Template = jinja2.Template(template_text(name))
    return template


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~!#])")


def md_cell(text: str) -> str:
    """Text from a bundle (from a stranger) as inert Markdown table-cell content: line breaks
    and control characters become spaces, HTML is escaped to entities, the punctuation that
    Markdown gives a meaning to (a `|` ends the cell) is backslash-escaped, and what a
    GitHub-flavoured renderer would turn into a link by itself (`https://`, `www.`, an e-mail
    address) is broken by an entity that shows the same character."""
    text = _CONTROL.sub(" ", text).strip()
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
    """A value the bundler validated to safe characters (a bundle id, a column name)."""
    return f"`{text}`"


def _number(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.6g}"


@dataclass(frozen=True)
class TaskBoard:
    """One task's leaderboard: its bundles best first, and its metric columns.

    `columns` is the union of the bundles' metric columns, in the order they first appear
    when the bundles are taken earliest published first, each in its metrics.json order. The
    ranking column is the first of them: the first numeric metric of the earliest-published
    bundle that has one. Rows are ordered by it, descending, bundles without it last, then by
    publication date and bundle id.
    """

    task: str
    rows: list[BundleRow]
    columns: list[str]
    names: dict[str, str]
    values: dict[str, dict[str, float]]

    @classmethod
    def of(cls, task: str, rows: Sequence[BundleRow]) -> TaskBoard:
        by_date = sorted(rows, key=lambda row: (row.published, row.bundle_id))
        names: dict[str, str] = {}
        values: dict[str, dict[str, float]] = {}
        for row in by_date:
            metrics = metric_columns(row)
            values[row.bundle_id] = {metric.column: metric.value for metric in metrics}
            for metric in metrics:
                names.setdefault(metric.column, metric.name)
        ranking = next(iter(names), None)

        def rank_key(row: BundleRow) -> tuple[bool, float, datetime, str]:
            score = values[row.bundle_id].get(ranking) if ranking is not None else None
            return (score is None, -(score or 0.0), row.published, row.bundle_id)

        ranked = sorted(by_date, key=rank_key)
        return cls(task=task, rows=ranked, columns=list(names), names=names, values=values)

    @property
    def config(self) -> str:
        return task_config_name(self.task)

    @property
    def sort_column(self) -> str | None:
        return self.columns[0] if self.columns else None

    @property
    def hidden(self) -> int:
        """Bundles the card's table leaves out (see BOARD_ROWS)."""
        return max(0, len(self.rows) - BOARD_ROWS)

    @property
    def mapped(self) -> list[tuple[str, str]]:
        """(column, metric name) for the columns that are not the metric's name."""
        return [(column, name) for column, name in self.names.items() if column != name]

    def value(self, row: BundleRow, column: str | None) -> float | None:
        return None if column is None else self.values[row.bundle_id].get(column)

    def ranks(self) -> list[str]:
        """Competition ranks (1, 1, 3) by the ranking column; rows without it get none."""
        ranks: list[str] = []
        previous: float | None = None
        for position, row in enumerate(self.rows, start=1):
            score = self.value(row, self.sort_column)
            if score is None:
                ranks.append(NO_VALUE)
            elif score == previous:
                ranks.append(ranks[-1])
            else:
                ranks.append(str(position))
            previous = score
        return ranks

    def table(self) -> list[str]:
        """The leaderboard as Markdown table lines, every bundle-supplied value escaped."""
        shown = self.columns[:BOARD_METRICS]
        metric_headers = [
            (_code(column) + (" ↓" if column == self.sort_column else ""), RIGHT)
            for column in shown
        ]
        headers = [("#", RIGHT), ("model", LEFT), ("player", LEFT), *metric_headers]
        headers += [("coverage", LEFT), ("dataset", LEFT), ("predictions", RIGHT)]
        headers += [("errors", RIGHT), ("exceptions", RIGHT), ("published", LEFT)]
        headers += [("bundle", LEFT)]
        lines = [_line([title for title, _ in headers]), _line([align for _, align in headers])]
        for rank, row in list(zip(self.ranks(), self.rows, strict=True))[:BOARD_ROWS]:
            cells = [rank, md_cell(row.model_name), md_cell(row.player_name)]
            cells += [_number(self.value(row, column)) for column in shown]
            cells += [_coverage(row), _pin(row), str(row.predictions), str(row.errors)]
            cells += [str(row.exceptions), row.published.date().isoformat(), _code(str(row.key))]
            lines.append(_line(cells))
        return lines


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _coverage(row: BundleRow) -> str:
    expected = "?" if row.expected_rows is None else str(row.expected_rows)
    present = f"{row.rows_present}/{expected}"
    if row.coverage == "complete":
        return f"complete ({present})"
    return f"{WARNING} **{md_cell(row.coverage)}** ({present})"


def _pin(row: BundleRow) -> str:
    key = row.key
    return _code(key.revision_label) if key.is_pinned else f"{WARNING} **unpinned**"


def task_boards(rows: Sequence[BundleRow]) -> list[TaskBoard]:
    """Every task's leaderboard, by task name. A bundle id given twice counts once (the row
    published first), so a repeated row can never rank twice."""
    unique: dict[str, BundleRow] = {}
    for row in sorted(rows, key=lambda row: (row.bundle_id, row.published, row.archive_sha256)):
        unique.setdefault(row.bundle_id, row)
    by_task: dict[str, list[BundleRow]] = {}
    for row in unique.values():
        by_task.setdefault(row.key.task, []).append(row)
    return [TaskBoard.of(task, by_task[task]) for task in sorted(by_task)]


def card_data(boards: Sequence[TaskBoard]) -> DatasetCardData:
    configs: list[dict[str, Any]] = [
        {
            "config_name": ALL_TASKS_CONFIG,
            "data_files": [{"split": SPLIT, "path": ALL_ROWS_GLOB}],
        }
    ]
    infos: list[dict[str, Any]] = [
        {"config_name": ALL_TASKS_CONFIG, "features": dataset_features()}
    ]
    for board in boards:
        configs.append(
            {
                "config_name": board.config,
                "data_files": [{"split": SPLIT, "path": task_rows_glob(board.task)}],
            }
        )
        infos.append({"config_name": board.config, "features": task_features(board.columns)})
    return DatasetCardData(
        pretty_name="GPTNT statics submission bundles",
        tags=TAGS,
        configs=configs,
        dataset_info=infos,
    )


def render_dataset_card(repo_id: str, rows: Sequence[BundleRow]) -> str:
    """The README.md of a repository holding the bundles of `rows` (all of them, not just new
    ones): YAML header and body. The same rows give the same text.

    The text is what huggingface_hub's `DatasetCard.from_template` gives for this template and
    card data (a test compares them), without its two further YAML passes (parsing the rendered
    header back, then writing it again) and its compiling the template on every call: an
    upload renders the card once per commit, and those were four fifths of each rendering
    (for 50 bundles, 28 ms then, 6 ms now)."""
    boards = task_boards(rows)
    return compiled_template(CARD_TEMPLATE).render(
        card_data=card_data(boards).to_yaml(),
        repo_id=repo_id,
        bundle_count=sum(len(board.rows) for board in boards),
        boards=boards,
        all_tasks_config=ALL_TASKS_CONFIG,
        warning=WARNING,
        board_metrics=BOARD_METRICS,
        board_rows=BOARD_ROWS,
        max_length=METRIC_COLUMN_MAX_LENGTH,
        stem_length=MAPPED_STEM_LENGTH,
        digest_hex=MAPPED_DIGEST_HEX,
        md_cell=md_cell,
    )


# ------------------------------------------------------------------ the card on a branch


class RowReader:
    """Reads the bundles' rows at a commit: one listing of `rows/`, then one request per row
    file not already known by its git blob id (rows just committed, or read before)."""

    def __init__(self, session: HubSession) -> None:
        self.session = session
        self._known: dict[str, tuple[str, BundleRow]] = {}

    def remember(self, path: str, data: bytes, row: BundleRow) -> None:
        self._known[path] = (git_blob_id(data), row)

    def rows_at(
        self, commit: str, overriding: Mapping[str, BundleRow] | None = None
    ) -> tuple[list[BundleRow], list[str]]:
        """Every bundle's row at `commit`, with `overriding` (row path -> row, about to be
        committed) taking the place of what is there; and the row files that could not be
        read as a row (named, left out)."""
        overriding = overriding or {}
        listed = self.session.list_files(ROWS_DIR, commit)
        rows: dict[str, BundleRow] = {}
        unreadable: list[str] = []
        for bundle in row_ids_in([*listed, *overriding]):
            path = repo_row(bundle)
            if path in overriding:
                rows[path] = overriding[path]
                continue
            row = self._read(listed[path], commit)
            if row is None or row.bundle_id != str(bundle):
                unreadable.append(path)
            else:
                rows[path] = row
        return list(rows.values()), unreadable

    def _read(self, remote: RemoteFile, commit: str) -> BundleRow | None:
        known = self._known.get(remote.path)
        if known is not None and known[0] == remote.blob_id:
            return known[1]
        try:
            data = self.session.read_small_file(remote.path, commit)
        except (TemporaryError, HubAccessError):
            raise
        except HubError:
            return None
        try:
            row = read_row(data)
        except RowError:
            return None
        self.remember(remote.path, data, row)
        return row


class CardRefresh(Model):
    """What `refresh_card` found and did."""

    repo_id: str
    revision: str
    dry_run: bool
    parent_commit: str | None = None
    """The head the card was rendered from."""
    changed: bool = False
    """The card differed from what the branch holds (and, unless dry_run, was committed)."""
    commit: str | None = None
    bundle_count: int = 0
    unreadable_rows: list[str] = Field(default_factory=list)
    """Row files under rows/ that are not a readable row: left out of the card, named here."""

    @property
    def exit_code(self) -> int:
        return 1 if self.unreadable_rows else 0


def refresh_card(
    session: HubSession, revision: str = "main", *, dry_run: bool = False
) -> CardRefresh:
    """Regenerate the dataset card on `revision` from every row file it holds, as a commit
    naming its parent (a concurrent commit makes the Hub answer 412, and the card is rendered
    again on the new head); no commit when the card is already true. Needs write access.
    A pull request's ref is refused: pull requests never touch the card, so they can merge
    without conflicts, and the card of the branch they merge into is regenerated instead."""
    if revision.startswith("refs/pr/"):
        raise UsageError(
            f"--revision {revision}: the card lives on a branch, never in a pull request",
            hint="regenerate the card of the branch the pull request merges into",
        )
    result = CardRefresh(repo_id=session.repo_id, revision=revision, dry_run=dry_run)
    if not dry_run:
        require_card(session.rights())  # before anything is read: exit 2 without write access
    reader = RowReader(session)

    def plan() -> PlannedCommit | None:
        head = session.head(revision)
        rows, unreadable = reader.rows_at(head)
        card = render_dataset_card(session.repo_id, rows).encode("utf-8")
        current = session.paths_info([README], head).get(README)
        result.parent_commit = head
        result.bundle_count = len(rows)
        result.unreadable_rows = unreadable
        result.changed = current is None or current.blob_id != git_blob_id(card)
        if not result.changed:
            return None
        problem = check_card(card.decode("utf-8"))
        if problem is not None:
            raise HubError(f"the dataset card was not committed: {problem}")
        if dry_run:
            return None
        return PlannedCommit(
            revision=revision,
            parent=head,
            operations=[CommitOperationAdd(README, card)],
            summary=f"Regenerate the dataset card ({len(rows)} bundle(s))",
            description="The card is rendered from every row file under rows/ at the parent.",
            doing="committing the dataset card",
            write_hint="regenerating the card needs a token with write access to the repository",
        )

    info = commit_replanned(
        session, plan, attempts=COMMIT_ATTEMPTS, retry_wait=COMMIT_RETRY_SECONDS
    )
    if info is not None:
        result.commit = info.oid
    return result
