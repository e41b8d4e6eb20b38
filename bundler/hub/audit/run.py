"""Auditing one revision of a leaderboard: read what it publishes, download and verify its
bundles (or a sample of them), and judge (bundler.hub.audit.findings).

Cost, for B bundles on the branch of which D are downloaded (all, or the sample): API requests,
which the Hub counts apart, 3 plus a listing page per 1,000 files of `bundles/`; file requests
(the Hub's "resolvers"), 2 per downloaded bundle (its archive and its sidecar) plus the table,
the task definitions and the allowed signers (3 at most); for bundles signed by a listed key,
what finding their committers costs (bundler.hub.audit.committers). A bundle judged by an
earlier run (bundler.hub.audit.verdicts) costs none. Downloads are paced
(bundler.hub.audit.pace) and one at a time, each verified and removed before the next: the disk
holds one bundle at a time.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bundler.core.errors import HubAccessError, HubError, RowError, TemporaryError
from bundler.core.limits import MAX_SIGNERS_FILE_BYTES, MAX_TASKS_FILE_BYTES
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import VERSION
from bundler.hub.audit.committers import judge_committers
from bundler.hub.audit.findings import (
    AuditedBundle,
    AuditFinding,
    AuditInputs,
    AuditReport,
    findings_of,
    sampled,
)
from bundler.hub.audit.pace import Pacer
from bundler.hub.audit.verdicts import KeptVerdict, VerdictKey, keep, recall
from bundler.hub.client.remote import RemoteFile
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.branch import MAX_TABLE_BYTES
from bundler.hub.leaderboard.format3 import published_table
from bundler.hub.leaderboard.rows import TableRow, build_row
from bundler.hub.repo.download import fetch_bundle
from bundler.hub.repo.paths import (
    ALLOWED_SIGNERS,
    BUNDLES_DIR,
    TABLE_PARTS_DIR,
    TASKS_FILE,
    bundle_of_path,
    part_number,
    repo_paths,
    unsharded_bundle_of,
    unsharded_paths,
)
from bundler.hub.tasks.definitions import TaskDefinitions
from bundler.local.allowed_signers import AllowedSigners
from bundler.local.layout import TEMP_PREFIX, BundleId
from bundler.local.verify import read_bundle

DEFAULT_SEED = 0
UNPUBLISHED = "1970-01-01T00:00:00Z"
"""The `published_at` of a row derived for a bundle the table has no row for (never compared)."""
Listed = tuple[RemoteFile, RemoteFile]
"""A bundle's archive and sidecar, as the branch lists them."""


@dataclass(frozen=True)
class AuditOptions:
    revision: str = "main"
    sample: int | None = None
    """Download this many of the bundles the board lists (and every one it does not); None:
    every bundle."""
    seed: int = DEFAULT_SEED


def audit(
    session: HubSession,
    options: AuditOptions,
    progress: ProgressSink | None = None,
    pacer: Pacer | None = None,
) -> AuditReport:
    """Audit `options.revision` of the session's leaderboard (see the package docstring)."""
    progress, pacer = progress or NoProgress(), pacer or Pacer()
    head = session.head(options.revision)
    bundles, incomplete = bundles_on_branch(session.list_files(BUNDLES_DIR, head))
    problem = None
    try:
        published = published_rows(session, head, pacer)
    except RowError as error:
        published, problem = {}, AuditFinding(kind="unreadable-table", detail=str(error))
    definitions, signers = _read_rules(session, head, pacer)
    chosen = sampled(bundles, set(published), options.sample, options.seed)
    inputs = AuditInputs(
        published,
        {str(bundle) for bundle in bundles},
        incomplete,
        signers=signers,
        definitions=definitions,
    )
    report = AuditReport(
        repo_id=session.repo_id,
        revision=options.revision,
        commit=head,
        bundles_on_branch=len(bundles) + len(incomplete),
        rows_published=len(published),
        sample=options.sample,
        seed=options.seed,
    )
    staging = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}audit-"))
    try:
        progress.begin(f"auditing {session.repo_id}", len(chosen), unit="bundles")
        for bundle in sorted(b for b in bundles if str(b) in chosen):
            audited, row = _audit_one(session, head, bundle, bundles[bundle], staging, pacer)
            if audited.signer is not None and signers is not None:
                audited.principals = sorted(signers.principals_of(audited.signer))
            inputs.audited[audited.bundle_id] = audited
            if row is not None:
                stamp = (
                    published[row.bundle_id].published_at if row.bundle_id in published else None
                )
                inputs.derived[row.bundle_id] = row.model_copy(
                    update={"published_at": stamp or UNPUBLISHED}
                )
            progress.advance()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        report.file_requests, report.waits = pacer.total, pacer.waits
    judge_committers(session, head, inputs.audited, {str(b): f[1] for b, f in bundles.items()})
    report.audited = [inputs.audited[bundle_id] for bundle_id in sorted(inputs.audited)]
    report.findings = ([problem] if problem else []) + findings_of(inputs)
    return report


def published_rows(session: HubSession, head: str, pacer: Pacer) -> dict[str, TableRow]:
    """The rows the leaderboard publishes at `head`, by bundle id: its all-tasks table's (none
    when it has none). RowError for a table that is not one the bundler writes."""
    if TABLE_PARTS_DIR not in session.entries([TABLE_PARTS_DIR], head):
        return {}
    files: dict[str, bytes] = {}
    for path in sorted(session.list_folder(TABLE_PARTS_DIR, head)):
        if part_number(path) is not None:
            pacer.take(1)
            files[path] = session.read_file(path, head, MAX_TABLE_BYTES)
    table = published_table(files)
    return {row.bundle_id: row for row in table.rows()}


def _read_rules(
    session: HubSession, head: str, pacer: Pacer
) -> tuple[TaskDefinitions, AllowedSigners | None]:
    """The task definitions (the ranking columns, whether signatures are required) and the
    allowed signers (None: the leaderboard names none) at `head`."""
    present = session.paths_info([TASKS_FILE, ALLOWED_SIGNERS], head)
    definitions, signers = TaskDefinitions(), None
    if TASKS_FILE in present:
        pacer.take(1)
        definitions = TaskDefinitions.parse(
            session.read_file(TASKS_FILE, head, MAX_TASKS_FILE_BYTES)
        )
    if ALLOWED_SIGNERS in present:
        pacer.take(1)
        signers = AllowedSigners.parse(
            session.read_file(ALLOWED_SIGNERS, head, MAX_SIGNERS_FILE_BYTES)
        )
    return definitions, signers


def bundles_on_branch(
    listed: dict[str, RemoteFile],
) -> tuple[dict[BundleId, Listed], dict[str, str]]:
    """The bundles `bundles/` holds whole, with their two files, and those holding one file
    alone, with which is missing. A bundle where layout 2 kept it (no shard) counts, unless its
    shard holds it too; any other file is no bundle's."""
    sharded: dict[BundleId, dict[str, RemoteFile]] = {}
    loose: dict[BundleId, dict[str, RemoteFile]] = {}
    for path, entry in listed.items():
        if (bundle := bundle_of_path(path)) is not None:
            sharded.setdefault(bundle, {})[path] = entry
        elif (bundle := unsharded_bundle_of(path)) is not None:
            loose.setdefault(bundle, {})[path] = entry
    whole: dict[BundleId, Listed] = {}
    incomplete: dict[str, str] = {}
    for bundle, files in [
        *sharded.items(),
        *((b, f) for b, f in loose.items() if b not in sharded),
    ]:
        paths = repo_paths(bundle) if bundle in sharded else unsharded_paths(bundle)
        archive, sidecar = (files.get(path) for path in paths)
        if archive is not None and sidecar is not None:
            whole[bundle] = (archive, sidecar)
        else:
            incomplete[str(bundle)] = (
                f"its {'archive' if archive is None else 'sidecar'} is missing"
            )
    return whole, incomplete


def _audit_one(
    session: HubSession,
    head: str,
    bundle: BundleId,
    listed: Listed,
    staging: Path,
    pacer: Pacer,
) -> tuple[AuditedBundle, TableRow | None]:
    """One bundle's verdict (kept, or made and kept), and the row it derives if it verifies."""
    archive, sidecar = listed
    key = VerdictKey(
        session.api.endpoint, session.repo_id, str(bundle), archive.identity, sidecar.blob_id
    )
    kept = recall(key)
    cached = kept is not None
    if kept is None:
        paths = (archive.path, sidecar.path)
        pacer.take(len(paths))
        try:
            local = fetch_bundle(session, bundle, head, paths, staging, paths)
        except (TemporaryError, HubAccessError):
            raise
        except HubError as error:  # too large, refused: judged again by the next run
            return AuditedBundle(
                bundle_id=str(bundle), verdict="unreadable", detail=str(error)
            ), None
        kept = _verdict(key, local)
        shutil.rmtree(staging / BUNDLES_DIR, ignore_errors=True)
        keep(kept)
    audited = AuditedBundle(
        bundle_id=str(bundle),
        verdict=kept.verdict,
        detail=kept.detail,
        signer=kept.signer,
        signature_problem=kept.signature_problem,
        cached=cached,
    )
    parsed = kept.parsed_sidecar()
    if kept.verdict != "verified" or parsed is None or kept.metrics_json is None:
        return audited, None
    row = build_row(parsed, kept.metrics_json, UNPUBLISHED)
    return audited, TableRow(**row.model_dump(), sidecar_blob_id=sidecar.blob_id)


def _verdict(key: VerdictKey, archive: Path) -> KeptVerdict:
    """The verdict on the bundle downloaded at `archive`."""
    reading = read_bundle(archive, NoProgress())
    verification = reading.verification()
    ok = verification.ok and reading.sidecar_data is not None and reading.metrics_text is not None
    signature = next((c.detail for c in verification.failures() if c.name == "signature"), None)
    return KeptVerdict(
        bundler_version=VERSION,
        endpoint=key.endpoint,
        repo_id=key.repo_id,
        bundle_id=key.bundle_id,
        archive=key.archive,
        sidecar_blob_id=key.sidecar_blob_id,
        verdict="verified" if ok else "failed",
        detail=None if ok else verification.describe_failures(),
        signer=verification.signer,
        signature_problem=signature,
        sidecar=reading.sidecar_data.decode("utf-8") if ok and reading.sidecar_data else None,
        metrics_json=reading.metrics_text if ok else None,
    )
