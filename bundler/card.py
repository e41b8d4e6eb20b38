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
from huggingface_hub import DatasetCard, DatasetCardData

from bundler.layout import ROW_SUFFIX, ROWS_DIR, BundleId
from bundler.rows import BundleRow, dataset_features

CARD_TEMPLATE = "dataset_card.md.j2"
PR_TEMPLATE = "pull_request.md.j2"
TAGS = ["gptnt", "ktane", "leaderboard", "evaluation", "statics-bundler"]


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
