"""The repository's dataset card and the pull-request description, rendered from the Jinja
templates in `templates/` through huggingface_hub's card classes.

The card's YAML points the Hub's dataset viewer at the row files and declares their features,
so the viewer (and `datasets.load_dataset`) read every bundle's row with one schema.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from importlib.resources import files

import jinja2
from huggingface_hub import CommitOperationAdd, DatasetCard, DatasetCardData
from pydantic import BaseModel

from bundler.errors import HubError
from bundler.hub import REPO_TYPE, HubSession, status_of
from bundler.layout import BUNDLES_DIR, README, ROW_SUFFIX, ROWS_DIR, BundleId, bundle_ids_in
from bundler.rows import BundleRow, dataset_features

CARD_TEMPLATE = "dataset_card.md.j2"
PR_TEMPLATE = "pull_request.md.j2"
TAGS = ["gptnt", "ktane", "leaderboard", "evaluation", "statics-bundler"]
CARD_COMMIT_ATTEMPTS = 4


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


def render_dataset_card(repo_id: str, bundle_ids: Iterable[BundleId]) -> str:
    """The README.md for a repository holding `bundle_ids` (all of them, not just new ones)."""
    ids = sorted(set(bundle_ids))
    tasks = Counter(bundle.task for bundle in ids)
    card = DatasetCard.from_template(
        card_data(),
        template_str=_template(CARD_TEMPLATE),
        repo_id=repo_id,
        bundle_count=len(ids),
        tasks=sorted(tasks.items()),
    )
    return str(card)


def render_pr_description(
    repo_id: str, rows: list[BundleRow], bundler_version: str, marker: str
) -> str:
    warnings = sorted({f"{row.bundle_id}: {warning}" for row in rows for warning in row.warnings})
    # A pull-request description is no repository card (no YAML header), so plain Jinja.
    template = jinja2.Template(_template(PR_TEMPLATE))
    text: str = template.render(
        repo_id=repo_id,
        bundles=rows,
        warnings=warnings,
        bundler_version=bundler_version,
        marker=marker,
    )
    return text.strip() + "\n"


class CardRefresh(BaseModel):
    """What regenerating the card on a branch did: `commit` is None when nothing changed."""

    revision: str
    bundle_count: int
    changed: bool
    commit: str | None = None


def refresh_card(
    session: HubSession, revision: str = "main", *, dry_run: bool = False
) -> CardRefresh:
    """Regenerate README.md from the bundles the branch actually holds, committing it only when
    it differs, against the head it was computed on (a concurrent commit makes it re-plan).

    STAND-IN written by the review work until the `upload` work's `refresh_card` is merged;
    same name and signature.
    """
    from bundler.upload import git_blob_id  # upload imports this module

    for _ in range(CARD_COMMIT_ATTEMPTS):
        head = session.head(revision)
        present, _invalid = bundle_ids_in(session.list_files(BUNDLES_DIR, head))
        card = render_dataset_card(session.repo_id, present).encode("utf-8")
        current = session.paths_info([README], head).get(README)
        refresh = CardRefresh(revision=revision, bundle_count=len(present), changed=True)
        if current is not None and current.blob_id == git_blob_id(card):
            refresh.changed = False
            return refresh
        if dry_run:
            return refresh
        try:
            info = session.api.create_commit(
                session.repo_id,
                [CommitOperationAdd(README, card)],
                commit_message=f"Dataset card: {len(present)} bundle(s)",
                repo_type=REPO_TYPE,
                revision=revision,
                parent_commit=head,
            )
        except Exception as error:
            if status_of(error) in (409, 412):
                continue  # someone committed meanwhile: re-plan on their head
            raise session.describe(error, doing="committing the dataset card") from None
        refresh.commit = info.oid
        return refresh
    raise HubError(f"committing the dataset card: {revision} kept moving; try again")
