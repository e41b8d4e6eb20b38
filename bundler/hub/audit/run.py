"""Auditing one revision of a leaderboard: read what it publishes, download and verify its
bundles (or a sample of them), and judge (bundler.hub.audit.findings, for the rows;
bundler.hub.audit.board, for the parts, task tables, charts and card).

The work is ordered so that a run stopped by the rate limit leaves the most for the next: the
bundles the sample takes whatever the board holds (all of them, without a sample) are judged
first, then the parts of the all-tasks table are read, then the rest of the sample (the bundles
the board has no row for). Each verdict is kept (bundler.hub.audit.verdicts) and each part's
bytes too (bundler.hub.leaderboard.tablecache): the next run downloads neither again.

Cost, for B bundles on the branch of which D are downloaded (all, or the sample), and P parts:
API requests, which the Hub counts apart, 3 (the head, two lookups) plus a listing page per
1,000 files of `bundles/`, of the table's parts, of the task tables and of the charts (6 for a
small board without charts, measured by tests/test_audit.py); file requests
(the Hub's "resolvers"), 2 per downloaded bundle (its archive and its sidecar), one per part
not kept by an earlier run, the task definitions and the allowed signers (2 at most), and each
task table or card that is not what the bundles give (one that is costs none: the listing names
its bytes); for bundles signed by a listed key, what finding their committers costs
(bundler.hub.audit.committers). Downloads are paced (bundler.hub.audit.pace) and one at a time,
each verified and removed before the next: the disk holds one bundle at a time, the memory one
part at a time besides the rows read (each part checked before it is decoded,
bundler.hub.audit.parts).

One shard of a spread audit (bundler.hub.audit.shards) judges its own bundles and rows only,
reading every part to find them; the parts' own findings, and the task tables, charts and card,
are the merge's (bundler.hub.audit.merge).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bundler.core.errors import HubAccessError, HubError, TemporaryError, UsageError
from bundler.core.limits import MAX_SIGNERS_FILE_BYTES, MAX_TASKS_FILE_BYTES
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import VERSION
from bundler.hub.audit.board import board_findings, list_board, read_parts
from bundler.hub.audit.committers import judge_committers
from bundler.hub.audit.findings import (
    AuditedBundle,
    AuditInputs,
    AuditReport,
    checked_rows,
    findings_of,
    sample_rank,
    sampled,
)
from bundler.hub.audit.pace import Pacer
from bundler.hub.audit.shards import Shard, shard_scope
from bundler.hub.audit.verdicts import KeptVerdict, VerdictKey, keep, recall
from bundler.hub.client.remote import RemoteFile
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.rows import TableRow, build_row
from bundler.hub.repo.download import fetch_bundle
from bundler.hub.repo.paths import (
    ALLOWED_SIGNERS,
    BUNDLES_DIR,
    TASKS_FILE,
    bundle_of_path,
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
    shard: Shard | None = None
    """Judge only this shard's part of the board (bundler.hub.audit.shards); None: all of it."""

    def __post_init__(self) -> None:
        if self.shard is not None and self.sample is not None:
            raise UsageError("a shard judges every bundle it covers: it takes no sample")


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
    definitions, signers = read_rules(session, head, pacer)
    board = list_board(session, head)
    inputs = AuditInputs(
        {},
        {str(bundle) for bundle in bundles},
        incomplete,
        signers=signers,
        definitions=definitions,
        archives={str(bundle): files[0].path for bundle, files in bundles.items()},
    )
    report = AuditReport(
        repo_id=session.repo_id,
        revision=options.revision,
        commit=head,
        bundles_on_branch=len(bundles) + len(incomplete),
        rows_published=0,
        sample=options.sample,
        seed=options.seed,
    )
    if (shard := options.shard) is not None:
        bundles = {bundle: files for bundle, files in bundles.items() if shard.owns(str(bundle))}
    first = first_judged(bundles, options.sample, options.seed)
    staging = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}audit-"))
    try:
        progress.begin(f"auditing {session.repo_id}", len(first), unit="bundles")
        _judge(session, head, first, bundles, inputs, staging, pacer, progress)
        read_parts(session, head, board, pacer)
        done = {str(bundle) for bundle in first}
        chosen = sampled(bundles, set(board.rows), options.sample, options.seed) - done
        rest = [bundle for bundle in sorted(bundles) if str(bundle) in chosen]
        progress.begin(f"auditing {session.repo_id}", len(rest), unit="bundles")
        _judge(session, head, rest, bundles, inputs, staging, pacer, progress)
        inputs.published, inputs.held_in = board.rows, board.held_in
        inputs.derived = {
            bundle_id: _stamped(row, board.rows.get(bundle_id))
            for bundle_id, row in inputs.derived.items()
        }
        if shard is None:
            found, report.unchecked = board_findings(
                session, head, board, checked_rows(inputs), pacer, definitions, signers
            )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        report.file_requests, report.waits = pacer.total, pacer.waits
    sidecars = {str(b): f[1] for b, f in bundles.items()}
    judge_committers(session, head, inputs.audited, sidecars, signers)
    report.rows_published = len(board.rows)
    report.audited = [inputs.audited[bundle_id] for bundle_id in sorted(inputs.audited)]
    if shard is None:
        report.findings = board.findings + findings_of(inputs) + found
    else:  # the parts, task tables, charts and card are the merge's to check
        report.findings = [f for f in findings_of(inputs) if shard.owns(f.bundle_id or "")]
        report.shard = shard_scope(shard, inputs)
    return report


def _stamped(derived: TableRow, published: TableRow | None) -> TableRow:
    """The row a bundle derives, with the `published_at` of the board's row for it (never
    compared: the board's stamp is in no file of the bundle)."""
    stamp = UNPUBLISHED if published is None else published.published_at
    return derived.model_copy(update={"published_at": stamp})


def first_judged(bundles: Iterable[BundleId], size: int | None, seed: int) -> list[BundleId]:
    """The bundles judged before the board's parts are read, so that a run the rate limit
    stops has judged them: every bundle, in the order of their ids, without a `size`; else the
    first `size` in the sample's order (`sample_rank`), each of which the sample takes,
    whatever the parts hold (one the board has a row for is among its first `size` of those;
    one it has none for is taken anyway)."""
    if size is None:
        return sorted(bundles)
    return sorted(bundles, key=lambda bundle: sample_rank(seed, str(bundle)))[:size]


def _judge(
    session: HubSession,
    head: str,
    chosen: list[BundleId],
    bundles: dict[BundleId, Listed],
    inputs: AuditInputs,
    staging: Path,
    pacer: Pacer,
    progress: ProgressSink,
) -> None:
    """Judge each of `chosen`, into `inputs` (its row derived when it verifies)."""
    for bundle in chosen:
        audited, row = _audit_one(session, head, bundle, bundles[bundle], staging, pacer)
        inputs.audited[audited.bundle_id] = audited
        if row is not None:
            inputs.derived[row.bundle_id] = row
        progress.advance()


def read_rules(
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
