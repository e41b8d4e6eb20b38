"""The pull request a submitter's uploads propose: its title, its description (rendered from
`templates/pull_request.md.j2`) and the state the description carries, so that every later
upload to the same pull request can describe all of it again, additions, extensions and
replacements alike."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field, TypeAdapter, ValidationError

from bundler.core.model import Model
from bundler.hub.repo.markdown import markdown_template, trusted

if TYPE_CHECKING:
    pass

PR_TEMPLATE = "pull_request.md.j2"
PR_MARKER = "[bundler"
"""In a pull request's title: `[bundler]` (and `[bundler <key>]` from older versions), by which
the next upload finds the submitter's open pull request."""
PR_STATE_MARKER = "bundler-pr-state"
"""Names the HTML comment in a pull request's description that lists, as JSON, what the pull
request proposes, so the next upload to it can describe the whole pull request again."""

Verb = Literal["adds", "extends", "replaces"]


class ClaimDifference(Model):
    field: str
    old: str
    new: str


class ProposedBundle(Model):
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
    return f"{head}{flag} from {user} {PR_MARKER}]"


def render_pr_description(
    repo_id: str,
    user: str,
    proposed: Sequence[ProposedBundle],
    bundler_version: str,
    *,
    pr_num: int | None,
) -> str:
    """The pull request's description, with the command that downloads it for review. That
    command names the pull request's ref (`refs/pr/N`), whose number the Hub gives only when
    the pull request opens: the commit that opens it says `N`, and the upload then edits the
    description to hold the number (`Destination.describe`)."""
    ordered = sorted(proposed, key=lambda bundle: bundle.bundle_id)
    warnings = [f"{b.bundle_id}: {warning}" for b in ordered for warning in b.warnings]
    state = json.dumps([bundle.model_dump(mode="json") for bundle in ordered], sort_keys=True)
    # "<" and ">" escaped inside the JSON so no value can close the HTML comment around it,
    # and "@" so that no @-mention hides in it either.
    state = state.replace("<", "\\u003c").replace(">", "\\u003e").replace("@", "\\u0040")
    text: str = markdown_template(PR_TEMPLATE).render(
        repo_id=repo_id,
        pr_num=pr_num,
        user=user,
        bundles=ordered,
        changes=describe_changes(ordered),
        changed=[bundle for bundle in ordered if bundle.verb != "adds"],
        replaced=sum(bundle.verb == "replaces" for bundle in ordered),
        warnings=warnings,
        bundler_version=bundler_version,
        state=trusted(f"<!-- {PR_STATE_MARKER} {state} -->"),
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
