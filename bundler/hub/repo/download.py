"""Stage 6: download bundles from a dataset repository into a local bundles directory.

Every bundle is fetched into a staging folder inside the output directory, verified there, and
only then moved into place. A bundle that fails verification goes to `.rejected/` beside the
good ones, never among them, so a downloaded directory can be trusted as a whole. All files come
from one commit (the revision's head when the download starts), so a concurrent upload cannot
mix two versions of a bundle.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from bundler.core.errors import UnusableSetting, UsageError, WriteError
from bundler.core.limits import MAX_ARCHIVE_BYTES, MAX_SIDECAR_BYTES
from bundler.core.model import Model
from bundler.core.progress import NoProgress, ProgressSink
from bundler.hub.client.answers import checked_details
from bundler.hub.client.remote import RemoteFile, git_blob_id
from bundler.hub.client.session import HubSession
from bundler.hub.repo.paths import (
    BUNDLES_DIR,
    bundle_ids_in,
    bundle_of_path,
    repo_archive,
    repo_paths,
    repo_sidecar,
    unsharded_bundle_of,
)
from bundler.hub.repo.treediff import folder_changes
from bundler.local.fileio import sha256_file, unusable_output_folder, write_error
from bundler.local.layout import REJECTED_DIR, TEMP_PREFIX, BundleId, LayoutError

if TYPE_CHECKING:
    from bundler.local.verify import BundleReading

FetchOutcome = Literal["downloaded", "already-there", "rejected", "missing", "failed"]
"""`already-there`: the folder held the same archive and sidecar, so nothing was fetched;
`failed`: fetched, but its files could not be saved in the output folder."""
DOWNLOAD_WORKERS = 8
"""Requests at a time, as `hf download` makes them."""


class FetchedBundle(Model):
    bundle_id: str
    outcome: FetchOutcome
    archive: str | None = None
    detail: str | None = None


class DownloadReport(Model):
    repo_id: str
    revision: str
    commit: str
    bundles_dir: str
    bundles: list[FetchedBundle] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    """Repository paths under bundles/ that are not a bundle layout: named, never fetched."""

    @property
    def exit_code(self) -> int:
        ok = ("downloaded", "already-there")
        return 0 if all(bundle.outcome in ok for bundle in self.bundles) else 1


def download(
    repo_id: str,
    bundles_dir: Path,
    *,
    revision: str = "main",
    bundle_ids: list[str] | None = None,
    pull_request: int | None = None,
    token: str | None = None,
    progress: ProgressSink | None = None,
) -> DownloadReport:
    """Fetch the bundles of `revision` (or just `bundle_ids`; or those `pull_request` adds or
    changes) into `bundles_dir`, verified, with DOWNLOAD_WORKERS requests at a time as `hf
    download` makes them. A bundle already there with the same archive and sidecar is not
    fetched again."""
    progress = progress or NoProgress()
    if bundles_dir.exists() and not bundles_dir.is_dir():
        raise UsageError(f"{bundles_dir}: exists and is not a directory")
    asked = sorted({_parse_requested(text) for text in bundle_ids or []})
    session = HubSession(repo_id, token=token)
    if pull_request is not None:
        revision = f"refs/pr/{pull_request}"
    commit = session.head(revision)
    if pull_request is not None:
        asked = sorted(set(asked) | proposed_bundles(session, pull_request, commit))
    if asked or pull_request is not None:  # only these bundles' files, however large the repo
        listed = session.paths_info(
            [path for bundle in asked for path in repo_paths(bundle)], commit
        )
    else:
        listed = session.list_files(BUNDLES_DIR, commit)
    available, invalid = bundle_ids_in(listed)
    report = DownloadReport(
        repo_id=repo_id,
        revision=revision,
        commit=commit,
        bundles_dir=str(bundles_dir),
        warnings=[_not_downloaded(path) for path in invalid],
    )
    report.bundles.extend(
        FetchedBundle(bundle_id=str(bundle), outcome="missing", detail="not in the repository")
        for bundle in asked
        if bundle not in set(available)
    )
    wanted = [bundle for bundle in available if not _present(bundle, listed, bundles_dir)]
    report.bundles.extend(
        FetchedBundle(
            bundle_id=str(bundle),
            outcome="already-there",
            archive=str(bundle.local_archive(bundles_dir)),
            detail="the same archive and sidecar are already in the folder",
        )
        for bundle in available
        if bundle not in set(wanted)
    )
    try:  # a folder that cannot take the staging folder can take no bundle either
        bundles_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=bundles_dir, prefix=f"{TEMP_PREFIX}download-"))
    except OSError as error:
        raise unusable_output_folder(bundles_dir, error) from None

    def one(bundle: BundleId) -> FetchedBundle:
        place = staging / f"{len(bundle.player_dir)}-{bundle.player_dir}-{bundle.target}"
        try:
            place.mkdir()
            return fetch_verified(
                session, bundle, commit, listed, place, bundles_dir, NoProgress()
            )[0]
        except WriteError as error:  # this bundle's place alone: the others still go
            return FetchedBundle(bundle_id=str(bundle), outcome="failed", detail=str(error))

    try:
        progress.begin(f"downloading from {repo_id}", len(wanted), unit="bundles")
        with ThreadPoolExecutor(DOWNLOAD_WORKERS) as pool:
            for fetched in pool.map(one, wanted):
                report.bundles.append(fetched)
                progress.advance()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report.bundles.sort(key=lambda fetched: fetched.bundle_id)
    return report


def _not_downloaded(path: str) -> str:
    """Why an archive-like path under `bundles/` is not downloaded."""
    if unsharded_bundle_of(path) is not None:
        return (
            f"{path}: where layout 2 kept a bundle, not downloaded until the bundler's next "
            "commit to the branch moves it into its shard"
        )
    return f"{path}: not a bundle layout, not downloaded"


def _present(bundle: BundleId, listed: dict[str, RemoteFile], bundles_dir: Path) -> bool:
    """Whether the folder already holds this bundle's archive and sidecar as the Hub does."""
    archive, sidecar = listed.get(repo_archive(bundle)), listed.get(repo_sidecar(bundle))
    local_archive, local_sidecar = (
        bundle.local_archive(bundles_dir),
        bundle.local_sidecar(bundles_dir),
    )
    if archive is None or sidecar is None or archive.lfs_sha256 is None:
        return False
    if not (local_archive.is_file() and local_sidecar.is_file()):
        return False
    try:
        same_archive = sha256_file(local_archive) == (archive.lfs_sha256, archive.size)
        return same_archive and git_blob_id(local_sidecar.read_bytes()) == sidecar.blob_id
    except OSError:
        return False


def fetch_verified(
    session: HubSession,
    bundle: BundleId,
    commit: str,
    listed: Iterable[str],
    staging: Path,
    bundles_dir: Path,
    progress: ProgressSink,
) -> tuple[FetchedBundle, BundleReading]:
    """Fetch one bundle's archive and sidecar (those of them `listed` at `commit`) into
    `staging`, verify them there, and move them into `bundles_dir`, or its `.rejected/` when
    verification fails; also returns what the verifying read found. WriteError, with nothing
    of the bundle left in `bundles_dir`, when its files cannot be put there. Verifying loads
    here, not with this module, which an upload imports to fetch the Hub's copy of a changed
    bundle only (docs/performance.md)."""
    from bundler.local.verify import read_bundle

    player_dir = bundle.player_dir
    names = [bundle.archive_name, bundle.sidecar_name]
    staged = fetch_bundle(session, bundle, commit, listed, staging).parent
    reading = read_bundle(staged / names[0], progress)
    verification = reading.verification()
    destination = (
        bundles_dir / player_dir if verification.ok else bundles_dir / REJECTED_DIR / player_dir
    )
    placed: list[Path] = []
    target = destination
    try:
        destination.mkdir(parents=True, exist_ok=True)
        for name in names:
            target = destination / name
            if (staged / name).exists():
                os.replace(staged / name, target)
                placed.append(target)
    except OSError as error:
        for path in placed:  # an archive without its sidecar would pass for a bundle
            path.unlink(missing_ok=True)
        failure = write_error(target, error)
        failure.hint = "clear that path and download again"
        raise failure from None
    if verification.ok:
        fetched = FetchedBundle(
            bundle_id=str(bundle), outcome="downloaded", archive=str(destination / names[0])
        )
    else:
        fetched = FetchedBundle(
            bundle_id=str(bundle),
            outcome="rejected",
            archive=str(destination / names[0]),
            detail="failed verification, kept apart: " + verification.describe_failures(),
        )
    return fetched, reading


def proposed_bundles(session: HubSession, number: int, head: str) -> set[BundleId]:
    """The bundles whose files pull request `number` (at `head`) adds or changes against the
    head of the branch it targets: what a maintainer reviewing it wants, never the branch's
    every bundle. Found by comparing trees (`treediff`), at the cost of what differs."""
    details = session.call(
        f"reading pull request #{number}",
        partial(
            checked_details,
            session.api.get_discussion_details,
            session.repo_id,
            number,
            repo_type="dataset",
        ),
    )
    if not details.is_pull_request:
        raise UsageError(f"#{number} is a discussion, not a pull request")
    base = session.head(details.target_branch or "main")
    proposed: set[BundleId] = set()
    for change in folder_changes(session, BUNDLES_DIR, head, base):
        changed = [path for path, file in change.now.items() if change.then.get(path) != file]
        proposed |= {bundle for bundle in map(bundle_of_path, changed) if bundle is not None}
    return proposed


def fetch_bundle(
    session: HubSession,
    bundle: BundleId,
    commit: str,
    listed: Iterable[str],
    staging: Path,
    paths: tuple[str, str] | None = None,
) -> Path:
    """Download a bundle's archive and sidecar (those of them `listed`) into `staging`, in the
    repository's layout, one request each, and return where the archive is: unverified, for
    the caller to read. `paths` are where they are, when not where `repo_paths` puts them (a
    layout-2 bundle, to move). A file larger than the format allows is refused before it is
    read past that size."""
    archive, sidecar = paths or repo_paths(bundle)
    for path, limit in ((archive, MAX_ARCHIVE_BYTES), (sidecar, MAX_SIDECAR_BYTES)):
        if path not in listed:
            continue  # a missing sidecar is reported by verification, not silently skipped
        target = staging / path
        target.parent.mkdir(parents=True, exist_ok=True)
        session.download_file(path, commit, target, limit)
    return staging / archive


def _parse_requested(text: str) -> BundleId:
    try:
        return BundleId.parse(text)
    except LayoutError as error:
        raise UnusableSetting("bundle_ids", text, str(error)) from None
