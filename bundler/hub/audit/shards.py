"""An audit spread over runners: each shard judges a fixed part of the board, and the merge
joins their reports into the verdict the whole audit gives.

Why shards: the audit's cost is its downloads, two a bundle, and the Hub lets an anonymous
client make 3,000 of them in 5 minutes (bundler.hub.audit.pace): one runner needs some 6
hours for 100,000 bundles. Each runner of a CI matrix is a client of its own, with a quota of
its own.

Who covers what: every bundle id the audited commit names (a bundle on the branch, a row of
the parts, a bundle's file alone) belongs to exactly one of N shards, by the sha256 of
`shard:ID` (`owner`): the same on any machine, for any N, and independent of what else the
board holds, so a shard knows its bundles before it reads a part. A shard downloads and
judges its own bundles, compares them with their rows, and reports the findings about them;
it reads every part (one file request per 1,000 rows) to find its bundles' rows.

What no single shard can judge: the parts themselves (unreadable, a row held twice), and the
task tables, charts and card, which are drawn from every row as its bundle gives it. The
merge judges these, by the same code as the whole audit (bundler.hub.audit.board), at the
commit the shards audited, from the parts' rows with each shard's rows that no bundle
supports left out and each row its bundle gives otherwise put in (`AuditShard.unsupported`,
`corrected`). So the merged findings are the whole audit's, in its order. A merge lacking a
shard checks none of this and is never clean: that shard's bundles were not audited.

The merge is bundler.hub.audit.merge.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from bundler.core.version import VERSION
from bundler.hub.audit.findings import AuditInputs, AuditShard, compare_rows, unsupported_why


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (1-based, as a CI matrix counts)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index} of {self.count}: no such shard")

    def owns(self, bundle_id: str) -> bool:
        return owner(bundle_id, self.count) == self.index


def owner(bundle_id: str, count: int) -> int:
    """The shard (1 to `count`) that covers `bundle_id`."""
    digest = hashlib.sha256(f"shard:{bundle_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def shard_scope(shard: Shard, inputs: AuditInputs) -> AuditShard:
    """What a shard covered, and what the merge needs of it, once its findings are made."""
    named = inputs.on_branch | inputs.incomplete.keys() | inputs.published.keys()
    covered = sorted(bundle_id for bundle_id in named if shard.owns(bundle_id))
    rows = [bundle_id for bundle_id in covered if bundle_id in inputs.published]
    return AuditShard(
        index=shard.index,
        count=shard.count,
        bundler_version=VERSION,
        ids_total=len(named),
        covered=covered,
        unsupported=[i for i in rows if unsupported_why(inputs, i) is not None],
        corrected=[
            inputs.derived[i]
            for i in rows
            if i in inputs.derived and compare_rows(inputs.published[i], inputs.derived[i])
        ],
    )
