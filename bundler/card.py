"""The repository's dataset card and the pull-request description, rendered from the Jinja
templates in `templates/` through huggingface_hub's card classes.

The card's YAML points the Hub's dataset viewer at the row files and declares their features,
so the viewer (and `datasets.load_dataset`) read every bundle's row with one schema.

The card on a branch is always rendered from what the branch holds: every bundle's row file
under `rows/` at one commit, never from what one uploader happens to know. `refresh_card`
regenerates it as a commit naming its parent, and skips the commit when nothing changes, so a
card gone stale (after a pull request merged in the web interface) is repaired by running it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Literal

import jinja2
from huggingface_hub import CommitOperationAdd, DatasetCard, DatasetCardData
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from bundler.errors import HubAccessError, HubError, TemporaryError
from bundler.hub import HubSession, PlannedCommit, RemoteFile, commit_replanned, git_blob_id
from bundler.layout import README, ROW_SUFFIX, ROWS_DIR, row_ids_in
from bundler.rows import BundleRow, dataset_features, read_row

CARD_TEMPLATE = "dataset_card.md.j2"
PR_TEMPLATE = "pull_request.md.j2"
TAGS = ["gptnt", "ktane", "leaderboard", "evaluation", "statics-bundler"]
CARD_COMMIT_ATTEMPTS = 8
CARD_RETRY_SECONDS = 0.5
PR_STATE_MARKER = "bundler-pr-state"
"""Names the HTML comment in a pull request's description that lists, as JSON, what the pull
request proposes, so the next upload to it can describe the whole pull request again."""


def _template(name: str) -> str:
    return files("bundler.templates").joinpath(name).read_text(encoding="utf-8")


def card_data() -> DatasetCardData:
    return DatasetCardData(
        pretty_name="GPTNT statics submission bundles",
        tags=TAGS,
        configs=[
            {
                "config_name": "default",
                "data_files": [{"split": "train", "path": f"{ROWS_DIR}/**/*{ROW_SUFFIX}"}],
            }
        ],
        dataset_info={"features": dataset_features()},
    )


def render_dataset_card(repo_id: str, rows: Sequence[BundleRow]) -> str:
    """The README.md for a repository holding the bundles of `rows` (all of them)."""
    unique = {row.bundle_id: row for row in rows}
    tasks = Counter(row.task_name for row in unique.values())
    card = DatasetCard.from_template(
        card_data(),
        template_str=_template(CARD_TEMPLATE),
        repo_id=repo_id,
        bundle_count=len(unique),
        tasks=sorted(tasks.items()),
    )
    return str(card)


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
            path = bundle.repo_row
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
        except ValidationError:
            return None
        self.remember(remote.path, data, row)
        return row


class CardRefresh(BaseModel):
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
    again on the new head); no commit when the card is already true. Needs write access."""
    result = CardRefresh(repo_id=session.repo_id, revision=revision, dry_run=dry_run)
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
        if not result.changed or dry_run:
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
        session, plan, attempts=CARD_COMMIT_ATTEMPTS, retry_wait=CARD_RETRY_SECONDS
    )
    if info is not None:
        result.commit = info.oid
    return result


# ------------------------------------------------------------------- pull requests

Verb = Literal["adds", "extends", "replaces"]


class ClaimDifference(BaseModel):
    field: str
    old: str
    new: str


class ProposedBundle(BaseModel):
    """One bundle a pull request proposes, as its description shows it."""

    bundle_id: str
    verb: Verb
    coverage: str
    predictions: int
    errors: int
    exceptions: int
    is_pinned: bool
    sha256: str
    submitter: str | None
    old_sha256: str | None = None
    old_submitter: str | None = None
    old_predictions: int | None = None
    differences: list[ClaimDifference] = Field(default_factory=list)
    """Claim fields that differ from the bundle on the base branch (extends and replaces)."""
    warnings: list[str] = Field(default_factory=list)


_STATE = TypeAdapter(list[ProposedBundle])
_STATE_COMMENT = re.compile(rf"<!-- {PR_STATE_MARKER} (.*?) -->", re.DOTALL)


def describe_changes(proposed: Sequence[ProposedBundle]) -> str:
    """`add 3, extend 1 and replace 1`: what a set of proposals does, in counts."""
    counts = Counter(bundle.verb for bundle in proposed)
    parts = [
        f"{verb.removesuffix('s')} {counts[verb]}"
        for verb in ("adds", "extends", "replaces")
        if counts[verb]
    ]
    if not parts:
        return "change nothing"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def pr_title(proposed: Sequence[ProposedBundle], user: str, message: str | None = None) -> str:
    """The pull request's title: what it does (a replacement is flagged in capitals), whose it
    is, and the `[bundler]` marker by which the next upload finds it again."""
    replaced = sum(bundle.verb == "replaces" for bundle in proposed)
    flag = f" (REPLACES {replaced} bundle(s) on the base branch)" if replaced else ""
    head = message or f"{describe_changes(proposed).capitalize()} GPTNT statics bundle(s)"
    return f"{head}{flag} from {user} [bundler]"


def render_pr_description(
    repo_id: str, user: str, proposed: Sequence[ProposedBundle], bundler_version: str
) -> str:
    ordered = sorted(proposed, key=lambda bundle: bundle.bundle_id)
    warnings = [f"{b.bundle_id}: {warning}" for b in ordered for warning in b.warnings]
    state = json.dumps([bundle.model_dump(mode="json") for bundle in ordered], sort_keys=True)
    # "<" and ">" escaped inside the JSON so no value can close the HTML comment around it.
    state = state.replace("<", "\\u003c").replace(">", "\\u003e")
    # A pull-request description is no repository card (no YAML header), so plain Jinja.
    template = jinja2.Template(_template(PR_TEMPLATE))
    text: str = template.render(
        repo_id=repo_id,
        user=user,
        bundles=ordered,
        changes=describe_changes(ordered),
        changed=[bundle for bundle in ordered if bundle.verb != "adds"],
        replaced=sum(bundle.verb == "replaces" for bundle in ordered),
        warnings=warnings,
        bundler_version=bundler_version,
        state=f"<!-- {PR_STATE_MARKER} {state} -->",
    )
    return text.strip() + "\n"


def read_pr_state(description: str) -> list[ProposedBundle]:
    """What a pull request made by the bundler proposes, from its description; nothing when the
    description carries no readable state (another tool's, or an older bundler's)."""
    match = _STATE_COMMENT.search(description)
    if match is None:
        return []
    try:
        return _STATE.validate_json(match.group(1))
    except ValidationError:
        return []
