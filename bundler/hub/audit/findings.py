"""What an audit finds, judged from what it read: pure, so every rule can be read (and tested)
apart from the requests.

A row of the published table is supported when a bundle on the branch verifies and derives
exactly that row. Every field is compared except `published_at` (when the bundler first
published the bundle: the board's stamp, in no file of the bundle); `ranking_metric`,
`score`, `stale` and the interval, what the task's definition makes of the row, are compared
with the row's scoring done again. A bundle that verifies and has no row is missing from the
board; one that fails verification has rightly none. Signatures are judged by the
leaderboard's allowed signers, as review judges them; for the principal, by who committed the
bundle (bundler.hub.audit.committers).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import Field

from bundler.core.model import Model
from bundler.hub.leaderboard.ranking import TaskScoring, first_metric
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.tasks.definitions import TaskDefinitions
from bundler.local.allowed_signers import AllowedSigners
from bundler.local.layout import BundleId

FindingKind = Literal[
    "unsupported-row",
    "missing-from-board",
    "field-differs",
    "signature",
    "unreadable-table",
    "duplicate-row",
    "task-table-differs",
    "chart-differs",
    "card-differs",
]
Verdict = Literal["verified", "failed", "unreadable"]
"""`failed`: the bundle failed verification; `unreadable`: it could not be downloaded (too
large, refused by the Hub): no row can rest on it either way."""
NOT_COMPARED = "published_at"
SCORE_FIELDS = ("ranking_metric", "score", "stale", "ci_low", "ci_high")
COMPARED_FIELDS = [name for name in TableRow.model_fields if name != NOT_COMPARED]
MAX_SHOWN_CHARS = 200
"""A value shown in a finding is cut to this (metrics_json can be long)."""


class AuditFinding(Model):
    """One thing a person must look at."""

    kind: FindingKind
    path: str | None = None
    """The file of the repository that holds what is found: the part of the all-tasks table
    holding the row, the task table, chart or card, the bundle's archive."""
    bundle_id: str | None = None
    field: str | None = None
    published: str | None = None
    """The published table's value (JSON), for a field that differs."""
    derived: str | None = None
    """What the bundle itself gives (JSON), for a field that differs."""
    detail: str


class AuditedBundle(Model):
    """What downloading and verifying one bundle found."""

    bundle_id: str
    verdict: Verdict
    detail: str | None = None
    signer: str | None = None
    """The fingerprint of the key whose signature of the archive verified."""
    signature_problem: str | None = None
    """Why the signature the sidecar holds does not verify, when it does not."""
    principals: list[str] = Field(default_factory=list)
    """Whom the leaderboard's allowed signers give the signing key to, at `landed_at`."""
    landed_at: str | None = None
    """When its sidecar landed on the branch (the Hub's date of the commit that last changed
    it), UTC, as `ssh-keygen -Y verify -Overify-time` takes it: the time its key's
    `valid-after`/`valid-before` are judged at. None for a bundle signed by no listed key."""
    cached: bool = False
    """Judged from a verdict kept by an earlier run (bundler.hub.audit.verdicts)."""
    committer: str | None = None
    """Who committed its sidecar, for a bundle signed by a listed key
    (bundler.hub.audit.committers)."""
    committer_problem: str | None = None
    """Why the key's principals are not its committer's, when they are not."""


class AuditShard(Model):
    """Which part of the board one shard of a spread audit judged (bundler.hub.audit.shards),
    and what the merge needs of it to check the board as a whole."""

    index: int
    """This shard's number, 1 to `count`."""
    count: int
    """How many shards the audit is spread over."""
    bundler_version: str
    """The bundler that made it: shards are merged by the same version only."""
    ids_total: int
    """The bundle ids the audited commit names in all (bundles on the branch, rows of the
    parts, a bundle's file alone), every one covered by exactly one shard."""
    covered: list[str] = Field(default_factory=list)
    """The bundle ids this shard covered: judged their bundle and its row."""
    unsupported: list[str] = Field(default_factory=list)
    """The covered rows no verified bundle supports: left out of the board the merge checks."""
    corrected: list[TableRow] = Field(default_factory=list)
    """The covered rows as their bundles give them, where that is not what the parts publish:
    the rows the merge checks the task tables, charts and card against."""


class AuditMerge(Model):
    """How the shards' reports were merged into one verdict."""

    count: int
    """How many shards the audit was spread over."""
    merged: list[int] = Field(default_factory=list)
    """The shards whose reports were merged."""
    missing: list[int] = Field(default_factory=list)
    """The shards with no report: their bundles were not audited, and the verdict is not
    clean whatever the others found."""
    reports: list[str] = Field(default_factory=list)
    """The report files, as given."""


class AuditReport(Model):
    """What `audit` found on one revision of a leaderboard: the whole audit, one shard's part
    of it (`shard`), or the shards' reports merged (`merge`)."""

    kind: Literal["audit"] = "audit"
    repo_id: str
    revision: str
    commit: str
    bundles_on_branch: int
    rows_published: int
    sample: int | None
    seed: int
    compared_fields: list[str] = Field(default_factory=lambda: list(COMPARED_FIELDS))
    audited: list[AuditedBundle] = Field(default_factory=list)
    findings: list[AuditFinding] = Field(default_factory=list)
    unchecked: list[str] = Field(default_factory=list)
    """Files of the board this run could not check, each with why (a chart, without the
    charts extra)."""
    file_requests: int = 0
    """File downloads (the Hub's "resolvers") this run made."""
    waits: list[str] = Field(default_factory=list)
    """Each pause taken to stay within the Hub's rate limits."""
    shard: AuditShard | None = None
    """For one shard of a spread audit: which part it judged (null: the whole board)."""
    merge: AuditMerge | None = None
    """For shards' reports merged: which were, and which are missing (null: not a merge)."""

    @property
    def exit_code(self) -> int:
        """1 for any finding, and for a merge that lacks a shard (an incomplete verdict)."""
        return 1 if self.findings or (self.merge is not None and self.merge.missing) else 0


def sampled(listed: Iterable[BundleId], rows: set[str], size: int | None, seed: int) -> set[str]:
    """The bundles to download: all of them without a `size`; else `size` of those the board
    has a row for, the ones with the lowest sha256 of `seed:bundle id` (the same sample for the
    same seed on any machine, mostly the same as the board grows), and every one it has none
    for (only a download says whether it belongs on the board)."""
    ids = sorted(str(bundle) for bundle in listed)
    if size is None:
        return set(ids)
    on_board = sorted((i for i in ids if i in rows), key=lambda i: sample_rank(seed, i))
    return set(on_board[:size]) | {i for i in ids if i not in rows}


def sample_rank(seed: int, bundle_id: str) -> str:
    """Where a bundle comes in the sample's order: the sha256 of `seed:bundle id`."""
    return hashlib.sha256(f"{seed}:{bundle_id}".encode()).hexdigest()


@dataclass
class AuditInputs:
    """What the audit read: the published rows, the bundles on the branch, and its verdicts."""

    published: dict[str, TableRow]
    on_branch: set[str]
    """Bundle ids with both their files on the branch."""
    incomplete: dict[str, str] = field(default_factory=dict)
    """Bundle ids with one file alone, and which is missing."""
    audited: dict[str, AuditedBundle] = field(default_factory=dict)
    derived: dict[str, TableRow] = field(default_factory=dict)
    """The row each verified bundle derives."""
    signers: AllowedSigners | None = None
    definitions: TaskDefinitions = field(default_factory=TaskDefinitions)
    held_in: dict[str, str] = field(default_factory=dict)
    """The part of the all-tasks table each published row was read from."""
    archives: dict[str, str] = field(default_factory=dict)
    """The archive of each bundle on the branch, by bundle id."""


ROW_KINDS = ("unsupported-row", "field-differs")
"""Findings about a published row: they name its part; the others name the bundle's archive."""


def findings_of(inputs: AuditInputs) -> list[AuditFinding]:
    """Every finding, in a stable order: rows, then bundles, then signatures, then scores;
    each naming the file it is about."""
    found = [*_row_findings(inputs), *_bundle_findings(inputs), *_signature_findings(inputs)]
    found += _score_findings(inputs)
    return [_located(finding, inputs) for finding in found]


ORDER_OF_KINDS = {"unsupported-row": 0, "missing-from-board": 1, "signature": 2}
"""Where `findings_of` puts each kind: rows (a field that differs too), bundles, signatures;
a score that differs comes last (SCORE_FIELDS)."""


def in_audit_order(found: Iterable[AuditFinding]) -> list[AuditFinding]:
    """Findings about rows and bundles gathered from the shards of a spread audit, in the order
    `findings_of` gives them for the whole board: by group, then by bundle id (all of one
    bundle's come from one shard, in their own order, which a stable sort keeps)."""

    def group(finding: AuditFinding) -> int:
        if finding.kind == "field-differs":
            return len(ORDER_OF_KINDS) if finding.field in SCORE_FIELDS else 0
        return ORDER_OF_KINDS.get(finding.kind, len(ORDER_OF_KINDS) + 1)

    return sorted(found, key=lambda finding: (group(finding), finding.bundle_id or ""))


def _located(finding: AuditFinding, inputs: AuditInputs) -> AuditFinding:
    bundle_id = finding.bundle_id or ""
    where = inputs.held_in if finding.kind in ROW_KINDS else inputs.archives
    return finding.model_copy(update={"path": where.get(bundle_id)})


def _row_findings(inputs: AuditInputs) -> list[AuditFinding]:
    found: list[AuditFinding] = []
    for bundle_id, row in sorted(inputs.published.items()):
        if (why := unsupported_why(inputs, bundle_id)) is not None:
            found.append(_unsupported_row(bundle_id, why))
        elif bundle_id in inputs.derived:
            found += compare_rows(row, inputs.derived[bundle_id])
    return found


def unsupported_why(inputs: AuditInputs, bundle_id: str) -> str | None:
    """Why no bundle can support the published row of `bundle_id` (None: one may)."""
    audited = inputs.audited.get(bundle_id)
    if bundle_id not in inputs.on_branch:
        return inputs.incomplete.get(bundle_id, "no such bundle on the branch")
    if audited is not None and audited.verdict != "verified":
        return f"{audited.verdict}: {audited.detail}"
    return None


def checked_rows(inputs: AuditInputs) -> list[TableRow]:
    """The board's rows as its bundles give them: the published rows, each audited one
    replaced by the row its bundle derives and those no bundle supports left out (rows not in
    a sample are taken as published)."""
    return [
        inputs.derived.get(bundle_id, row)
        for bundle_id, row in inputs.published.items()
        if unsupported_why(inputs, bundle_id) is None
    ]


def _unsupported_row(bundle_id: str, why: str) -> AuditFinding:
    return AuditFinding(
        kind="unsupported-row",
        bundle_id=bundle_id,
        detail=f"no verified bundle supports this row ({why})",
    )


def compare_rows(published: TableRow, derived: TableRow) -> list[AuditFinding]:
    """The fields (but the board's: `published_at`, `ranking_metric`, `score`) in which the
    published row differs from the one its bundle derives."""
    said, made = published.model_dump(mode="json"), derived.model_dump(mode="json")
    return [
        _differs(published.bundle_id, name, said[name], made[name])
        for name in COMPARED_FIELDS
        if name not in SCORE_FIELDS and _json(said[name]) != _json(made[name])
    ]


def _differs(bundle_id: str, name: str, said: Any, made: Any) -> AuditFinding:
    return AuditFinding(
        kind="field-differs",
        bundle_id=bundle_id,
        field=name,
        published=_shown(said),
        derived=_shown(made),
        detail=f"the table's {name} is not what the bundle gives",
    )


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _shown(value: Any) -> str:
    text = _json(value)
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."


def _bundle_findings(inputs: AuditInputs) -> list[AuditFinding]:
    return [
        AuditFinding(
            kind="missing-from-board",
            bundle_id=bundle_id,
            detail="this bundle verifies but the published table has no row for it",
        )
        for bundle_id, audited in sorted(inputs.audited.items())
        if audited.verdict == "verified" and bundle_id not in inputs.published
    ]


def _signature_findings(inputs: AuditInputs) -> list[AuditFinding]:
    """A signature that does not verify; one by a key the allowed signers do not list; an
    unsigned bundle where the leaderboard requires signatures; a key whose principals are not
    its committer's. A leaderboard naming no signers asks for none (as review), unless it
    requires signatures."""
    found: list[AuditFinding] = []
    signers, required = inputs.signers, inputs.definitions.require_signature
    for bundle_id, audited in sorted(inputs.audited.items()):
        detail = None
        if audited.signature_problem is not None:
            detail = f"its signature does not verify: {audited.signature_problem}"
        elif audited.verdict != "verified":
            continue
        elif audited.signer is None and required:
            detail = "unsigned, where the leaderboard requires a signature"
        elif signers is None:
            continue
        elif audited.signer is not None and not audited.principals:
            when = f" as valid at {audited.landed_at}, when it landed" if audited.landed_at else ""
            detail = f"signed by key {audited.signer}, which the allowed signers do not list{when}"
        elif audited.committer_problem is not None:
            detail = audited.committer_problem
        if detail is not None:
            found.append(AuditFinding(kind="signature", bundle_id=bundle_id, detail=detail))
    return found


def _score_findings(inputs: AuditInputs) -> list[AuditFinding]:
    """What the task's definition makes of each audited row (`ranking_metric`, `score`,
    `stale`, `ci_low`, `ci_high`), scored again from the row its bundle derives. A task nobody
    defined ranks by the first numeric metric of its earliest-published row, of the board's
    rows as its bundles give them (`checked_rows`)."""
    rows = checked_rows(inputs)
    scorings: dict[str, TaskScoring] = {}
    for row in sorted(rows, key=lambda row: (row.published, row.bundle_id)):
        if row.task_name not in scorings:
            definition = inputs.definitions.get(row.task_name)
            fallback = None
            if definition is None:
                fallback = first_metric(r for r in rows if r.task_name == row.task_name)
            scorings[row.task_name] = TaskScoring(definition, fallback)
    found: list[AuditFinding] = []
    for bundle_id in sorted(inputs.derived.keys() & inputs.published.keys()):
        published, derived = inputs.published[bundle_id], inputs.derived[bundle_id]
        want = asdict(scorings[derived.task_name].score(derived))
        for name in SCORE_FIELDS:
            said = getattr(published, name)
            if _json(said) != _json(want[name]):
                found.append(_differs(bundle_id, name, said, want[name]))
    return found
