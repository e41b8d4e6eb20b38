"""Why a command that ran to its end exits 1, said once in its report: `error` (what went
wrong), `hint` (what to do) and `error_kind`, where no error ended it but its outcomes ask a
person to look (bundles refused or in conflict, runs refused, a card left out). A nightly job
reading the JSON report then finds the reason at the top, not only in each bundle's line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CONFLICT_KIND = "bundle-conflict"
REFUSED_KIND = "bundles-refused"
FAILED_KIND = "bundles-failed"
CARD_KIND = "card-refused"
LEFT_OFF_KIND = "left-off-board"
RUNS_REFUSED_KIND = "runs-refused"
BUNDLE_KEPT_KIND = "bundle-kept"
NOT_SIGNED_KIND = "bundles-not-signed"
"""The `error_kind` of each cause, by what happened (the command line words some hints by
them, bundler.cli.error_words)."""

MAX_IDS_SHOWN = 3
"""How many of the things a cause names its line lists before saying how many more: each is in
the report's own list, in full."""


@dataclass(frozen=True)
class Cause:
    """One reason a person must look: what happened, what to do about it, and its kind (what
    a `--json` reader acts on rather than the words)."""

    what: str
    hint: str
    kind: str


def counted(count: int, noun: str) -> str:
    """`1 bundle`, `3 bundles`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def named(names: Sequence[str], limit: int = MAX_IDS_SHOWN) -> str:
    """The first `limit` of `names`, and how many more there are."""
    shown = ", ".join(names[:limit])
    more = len(names) - limit
    return f"{shown} and {more} more" if more > 0 else shown


def summary(causes: Sequence[Cause]) -> Cause | None:
    """The one cause a report says (its `error`, `hint` and `error_kind`,
    bundler.core.error_shape): every cause's line, the first one's hint and kind (the causes
    come most pressing first); None for no cause."""
    if not causes:
        return None
    first = causes[0]
    return Cause("; ".join(cause.what for cause in causes), first.hint, first.kind)
