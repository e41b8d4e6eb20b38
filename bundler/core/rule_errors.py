"""Refusals of a maintainer's change to the leaderboard's rules: a task defined by a metric its
bundles do not have, a signer to remove whom the allowed signers do not list, or to retire who
has no line to retire. Each changes nothing and asks a person to look (exit 1); kept apart from
bundler.core.errors, the hierarchy they belong to, only to keep modules short."""

from __future__ import annotations

from typing import ClassVar

from bundler.core.causes import named
from bundler.core.errors import MAX_NAMES_SHOWN, BundlerError


class UnknownMetric(BundlerError):
    """A task defined by a metric none of its bundles on the branch has a number under
    (`known`: the numeric metrics they do have; `close`: the one nearest in spelling): ranked
    by it, every entry would show no score. Nothing is committed, and a person must look."""

    kind: ClassVar[str] = "unknown-metric"

    def __init__(
        self, task: str, metric: str, revision: str, known: list[str], close: str | None
    ) -> None:
        have = (
            f"they have {named(known, MAX_NAMES_SHOWN)}" if known else "they have no numeric metric"
        )
        hint = "name one of theirs, spelled as the bundles flatten it (scorer.key)"
        super().__init__(
            f"task {task}: no bundle of it on {revision} has a number under the metric "
            f"{metric} ({have})",
            hint=f"did you mean {close}? {hint}" if close else hint,
        )
        self.task, self.metric, self.revision = task, metric, revision
        self.known, self.close = known, close


class UnknownSigner(BundlerError):
    """A signer to take off the allowed signers whom no line lists (`listed`: the names it
    does list): nothing changes, and a person must look (exit 1)."""

    kind: ClassVar[str] = "unknown-signer"

    def __init__(self, name: str, listed: list[str]) -> None:
        there = f"it lists {named(listed, MAX_NAMES_SHOWN)}" if listed else "it lists no one"
        super().__init__(
            f"{name!r} is not one of the allowed signers ({there}); nothing was changed",
            hint="a name is matched exactly, letter case included",
        )
        self.name, self.listed = name, listed


class NotASigner(BundlerError):
    """A signer to retire who has no line to retire (none, or none valid now): nothing changes,
    and a person must check the name or key (exit 1)."""

    kind: ClassVar[str] = "not-a-signer"
