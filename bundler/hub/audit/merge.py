"""Merging the reports of an audit's shards (bundler.hub.audit.shards) into the verdict the
whole audit gives: every shard's findings, in the whole audit's order, and what no shard
judges (the parts, task tables, charts and card), checked at the commit the shards audited
from the parts' rows as every shard's bundles give them.

A shard's report comes back as a CI artifact: it is read bounded (MAX_AUDIT_REPORT_BYTES) and
validated, and reports of another commit, repository, shard count or bundler version, or two
reports of one shard, are refused, each naming its file. A file holding the error a shard
ended on is no report: its shard is missing. A merge lacking a shard is never clean.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from bundler.core.errors import InputError, UsageError
from bundler.core.limits import MAX_AUDIT_REPORT_BYTES
from bundler.core.model import Model
from bundler.core.version import VERSION
from bundler.hub.audit.board import board_findings, list_board, read_parts
from bundler.hub.audit.findings import AuditFinding, AuditMerge, AuditReport, in_audit_order
from bundler.hub.audit.pace import Pacer
from bundler.hub.audit.run import read_rules
from bundler.hub.audit.shards import Shard, owner
from bundler.hub.client.session import HubSession
from bundler.local.fileio import read_bounded

MAX_SHOWN_ERROR = 300
"""An error a shard ended on, as the merge quotes it, is cut to this."""


class _Document(Model):
    """What any --json document says of itself."""

    kind: str
    error: str | None = None
    exit_code: int | None = None


@dataclass
class ShardReports:
    """The shards' reports given to a merge, checked to be of one audit."""

    reports: dict[int, AuditReport]
    """By shard number."""
    files: list[str]
    notes: list[str]
    """Files that hold no shard's report because the shard ended on an error."""

    @property
    def first(self) -> AuditReport:
        return next(iter(self.reports.values()))

    @property
    def missing(self) -> list[int]:
        count = self.first.shard.count if self.first.shard else 0
        return [n for n in range(1, count + 1) if n not in self.reports]


def read_reports(paths: Sequence[Path]) -> ShardReports:
    """The shards' reports in `paths`, refused (UsageError naming the file) unless they are
    shards of one audit: one repository, commit, shard count and bundler version."""
    reports: dict[int, AuditReport] = {}
    where: dict[int, str] = {}
    notes: list[str] = []
    for path in paths:
        report = _read_report(path)
        if isinstance(report, str):
            notes.append(report)
            continue
        assert report.shard is not None
        number = report.shard.index
        if reports:
            _same_audit(path, report, where, next(iter(reports.values())))
        if number in reports:
            raise UsageError(f"{path}: shard {number} again ({where[number]} is shard {number})")
        reports[number], where[number] = report, str(path)
    if not reports:
        raise UsageError(
            f"no shard's report among {len(paths)} file(s): " + "; ".join(notes or ["none given"])
        )
    return ShardReports(reports, [str(path) for path in paths], notes)


def _read_report(path: Path) -> AuditReport | str:
    """One shard's report, or (a string) why the file holds none: the shard ended on an
    error. UsageError for anything else."""
    try:
        data = read_bounded(path, MAX_AUDIT_REPORT_BYTES)
        document = _Document.model_validate_json(data)
    except InputError as error:
        raise UsageError(error.message) from None
    except ValidationError as error:
        raise UsageError(f"{path}: not a JSON report: {_first(error)}") from None
    if document.kind == "error":
        said = (document.error or "no error given")[:MAX_SHOWN_ERROR]
        return f"{path}: no report: the shard ended on an error (exit {document.exit_code}): {said}"
    if document.kind != "audit":
        raise UsageError(f"{path}: a report of {document.kind[:40]!r}, not an audit's")
    try:
        report = AuditReport.model_validate_json(data)
    except ValidationError as error:
        raise UsageError(f"{path}: not an audit's report: {_first(error)}") from None
    if report.shard is None:
        raise UsageError(f"{path}: the report of a whole audit, not of one shard")
    shard = report.shard
    try:
        Shard(shard.index, shard.count)
    except ValueError as error:
        raise UsageError(f"{path}: {error}") from None
    strays = [i for i in shard.covered if owner(i, shard.count) != shard.index]
    covered = set(shard.covered)
    beyond = [*shard.unsupported, *(row.bundle_id for row in shard.corrected)]
    beyond = [i for i in beyond if i not in covered]
    problem = None
    if strays:
        problem = f"covers {strays[0][:80]!r}, another shard's"
    elif len(covered) != len(shard.covered):
        problem = "covers ids twice"
    elif beyond:
        problem = f"judges the row of {beyond[0][:80]!r}, which it does not cover"
    if problem is not None:
        raise UsageError(f"{path}: shard {shard.index} of {shard.count} {problem}")
    return report


def _first(error: ValidationError) -> str:
    """The first problem pydantic found, in a line of bounded length."""
    first = error.errors(include_url=False, include_input=False)[0]
    place = ".".join(str(step) for step in first["loc"])
    return f"{place + ': ' if place else ''}{first['msg']}"[:200]


def _same_audit(path: Path, report: AuditReport, where: dict[int, str], ref: AuditReport) -> None:
    """UsageError unless `report` is a shard of the audit `ref` is one of."""
    shard, other = report.shard, ref.shard
    assert shard is not None and other is not None
    first = where[other.index]
    if (report.repo_id, report.commit) != (ref.repo_id, ref.commit):
        raise UsageError(
            f"{path}: shard {shard.index} audited {report.repo_id} at {report.commit[:12]}; "
            f"{first}: {ref.repo_id} at {ref.commit[:12]}",
            hint="the shards of one audit audit one commit: give each the same commit sha",
        )
    if shard.count != other.count:
        raise UsageError(
            f"{path}: a shard of {shard.count}; {first}: a shard of {other.count}",
            hint="the shards of one audit are spread over one count",
        )
    if shard.bundler_version != other.bundler_version:
        raise UsageError(
            f"{path}: made by bundler {shard.bundler_version}; {first}: by {other.bundler_version}",
            hint="audit every shard with one version of the bundler",
        )
    if (shard.ids_total, report.bundles_on_branch, report.rows_published) != (
        other.ids_total,
        ref.bundles_on_branch,
        ref.rows_published,
    ):
        raise UsageError(f"{path}: a board of another size than {first}'s, at the same commit")


def merge(
    given: ShardReports, session_of: Callable[[str], HubSession], pacer: Pacer | None = None
) -> AuditReport:
    """The shards' reports as one verdict: every shard's findings, and, when no shard is
    missing, the parts, task tables, charts and card checked at the audited commit (module
    docstring). A missing shard makes it incomplete: not clean, and nothing board-wide checked."""
    pacer = pacer or Pacer()
    ref, reports = given.first, list(given.reports.values())
    assert ref.shard is not None
    count = ref.shard.count
    if ref.shard.bundler_version != VERSION:
        raise UsageError(
            f"{given.files[0]}: made by bundler {ref.shard.bundler_version}, not {VERSION}",
            hint="merge with the version that audited",
        )
    missing = given.missing
    merged = AuditReport(
        repo_id=ref.repo_id,
        revision=ref.revision,
        commit=ref.commit,
        bundles_on_branch=ref.bundles_on_branch,
        rows_published=ref.rows_published,
        sample=None,
        seed=ref.seed,
        audited=sorted(
            (bundle for report in reports for bundle in report.audited),
            key=lambda bundle: bundle.bundle_id,
        ),
        unchecked=[*given.notes, *(note for report in reports for note in report.unchecked)],
        file_requests=sum(report.file_requests for report in reports),
        waits=[wait for report in reports for wait in report.waits],
        merge=AuditMerge(
            count=count, merged=sorted(given.reports), missing=missing, reports=given.files
        ),
    )
    found = in_audit_order(finding for report in reports for finding in report.findings)
    if missing:
        merged.unchecked.append(
            f"shard(s) {', '.join(map(str, missing))} of {count}: no report, so their bundles "
            "were not audited, nor the parts, task tables, charts and card"
        )
        merged.findings = found
        return merged
    board_wide, unchecked = _board_findings(session_of(ref.repo_id), reports, pacer)
    merged.findings = [*board_wide[0], *found, *board_wide[1]]
    merged.unchecked += unchecked
    merged.file_requests += pacer.total
    merged.waits += pacer.waits
    return merged


def _board_findings(
    session: HubSession, reports: list[AuditReport], pacer: Pacer
) -> tuple[tuple[list[AuditFinding], list[AuditFinding]], list[str]]:
    """What the parts hold (their own findings first), and the task tables, charts and card
    checked against the board's rows as every shard's bundles give them."""
    commit = reports[0].commit
    definitions, signers = read_rules(session, commit, pacer)
    board = list_board(session, commit)
    read_parts(session, commit, board, pacer)
    unsupported = {i for report in reports if report.shard for i in report.shard.unsupported}
    corrected = {
        row.bundle_id: row for report in reports if report.shard for row in report.shard.corrected
    }
    rows = [
        corrected.get(bundle_id, row)
        for bundle_id, row in board.rows.items()
        if bundle_id not in unsupported
    ]
    found, unchecked = board_findings(session, commit, board, rows, pacer, definitions, signers)
    return (board.findings, found), unchecked
