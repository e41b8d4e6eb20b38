"""Stage 5: publish verified bundles to a Hugging Face dataset repository.

An upload is planned, then executed. The plan compares every local bundle with what the Hub
holds at the target revision: a bundle whose archive is there with the same sha256 is
unchanged, one there with other content is a conflict, the rest are new. Execution commits up
to BUNDLES_PER_COMMIT bundles at a time (four files each, plus the dataset card), each commit
made against the head it was planned on (`parent_commit`), so a concurrent upload makes the Hub
answer 412 instead of one upload silently clobbering the other's card; the batch is then
re-planned on the new head and committed again. The commit is not retried by the client, so
after a server error, a rate limit or a dropped connection the batch is re-planned too: if the
commit landed after all, re-planning finds its files there and nothing is committed twice.
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from huggingface_hub import CommitOperationAdd
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from bundler.card import render_dataset_card, render_pr_description
from bundler.errors import BundlerError, HubAccessError, HubError
from bundler.fileio import CHUNK_SIZE
from bundler.hub import REPO_TYPE, HubSession, RemoteFile, is_transient, retry_after_of, status_of
from bundler.layout import README, ROWS_DIR, BundleId
from bundler.lock import bundles_lock
from bundler.manifest import Sidecar
from bundler.progress import NoProgress, ProgressSink
from bundler.rows import BundleRow, build_row, read_row, row_files, utc_timestamp
from bundler.verify import find_archives, read_bundle
from bundler.version import bundler_version

BUNDLES_PER_COMMIT = 24
"""Four files a bundle plus the card stays under the Hub's ~100 files per commit."""
COMMIT_ATTEMPTS = 8
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0

Action = Literal["new", "replace", "repair", "unchanged", "conflict", "refused"]
Outcome = Literal["planned", "published", "already-there", "refused", "failed"]


class UploadOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    repo_id: str
    revision: str = "main"
    create_pr: bool = False
    private: bool = False
    replace: bool = False
    allow_partial: bool = False
    dry_run: bool = False
    message: str | None = None
    token: SecretStr | None = None
    commit_attempts: int = Field(default=COMMIT_ATTEMPTS, ge=1)
    retry_wait_seconds: float = Field(
        default=RETRY_BASE_SECONDS, ge=0, description="first wait after a failed commit; doubles"
    )
    lock_wait: float = Field(
        default=0, ge=0, description="seconds to wait for another run to release the folder"
    )


class BundlePlan(BaseModel):
    bundle_id: str
    action: Action
    outcome: Outcome = "planned"
    detail: str | None = None
    sha256: str | None = None
    size: int | None = None


class UploadReport(BaseModel):
    repo_id: str
    revision: str
    dry_run: bool
    repo_created: bool = False
    pull_request_url: str | None = None
    commits: list[str] = Field(default_factory=list)
    bundles: list[BundlePlan] = Field(default_factory=list)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        bad = ("refused", "failed")
        return 1 if self.error or any(bundle.outcome in bad for bundle in self.bundles) else 0


@dataclass(frozen=True)
class LocalBundle:
    """A verified local bundle and the files it becomes in the repository."""

    archive: Path
    sidecar: Sidecar
    sidecar_data: bytes
    row: BundleRow
    row_files: dict[str, bytes]

    @property
    def bundle_id(self) -> str:
        return self.sidecar.bundle_id

    @property
    def key(self) -> BundleId:
        """The verified bundle id, from which every repository path is derived."""
        return BundleId.parse(self.sidecar.bundle_id)

    @property
    def archive_path(self) -> str:
        return self.key.repo_archive

    @property
    def sidecar_path(self) -> str:
        return self.key.repo_sidecar

    @property
    def row_path(self) -> str:
        return self.key.repo_row

    def repo_paths(self) -> list[str]:
        return list(self.key.repo_paths)


def git_blob_id(data: bytes) -> str:
    """The id git (and the Hub) gives a regular file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _git_blob_id_of_file(path: Path, size: int) -> str:
    digest = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            digest.update(chunk)
    return digest.hexdigest()


def gather_local(
    bundles_dir: Path, *, allow_partial: bool, progress: ProgressSink
) -> tuple[list[LocalBundle], list[BundlePlan]]:
    """Verify every local bundle; a bundle that fails, or is partial without --allow-partial,
    is refused here and never reaches the Hub."""
    accepted: dict[str, LocalBundle] = {}
    refused: list[BundlePlan] = []

    def refuse(label: str, detail: str) -> None:
        refused.append(
            BundlePlan(bundle_id=label, action="refused", outcome="refused", detail=detail)
        )

    for archive in find_archives([bundles_dir]):
        reading = read_bundle(archive, progress)
        verification = reading.verification()
        label = verification.bundle_id or str(archive)
        if (
            not verification.ok
            or reading.sidecar is None
            or reading.sidecar_data is None
            or reading.metrics_text is None
        ):
            refuse(label, f"{archive}: failed verification ({verification.describe_failures()})")
            continue
        sidecar = reading.sidecar
        if sidecar.coverage.status == "partial" and not allow_partial:
            refuse(label, "partial coverage; pass --allow-partial to publish it marked partial")
            continue
        twin = accepted.get(sidecar.bundle_id)
        if twin is not None:
            if twin.sidecar.archive.sha256 != sidecar.archive.sha256:
                # Two different results under one name: neither may silently win.
                del accepted[sidecar.bundle_id]
                refuse(label, f"{twin.archive} and {archive} differ; publish one of them")
            continue  # an identical copy elsewhere in the folder is the same bundle
        row = build_row(sidecar, reading.metrics_text, published_at=utc_timestamp())
        accepted[sidecar.bundle_id] = LocalBundle(
            archive=archive,
            sidecar=sidecar,
            sidecar_data=reading.sidecar_data,
            row=row,
            row_files=row_files(row),
        )
    return list(accepted.values()), refused


def classify(bundle: LocalBundle, remote: dict[str, RemoteFile]) -> Action:
    """Compare one bundle with what the Hub holds: by the archive's sha256 (its LFS oid), or by
    git blob id when the Hub stored it as a regular file."""
    archive = remote.get(bundle.archive_path)
    if archive is None:
        return "new"
    if archive.lfs_sha256 is not None:
        same = archive.lfs_sha256 == bundle.sidecar.archive.sha256
    else:
        same = archive.blob_id == _git_blob_id_of_file(bundle.archive, bundle.sidecar.archive.size)
    if not same:
        return "conflict"
    held = remote.get(bundle.sidecar_path)
    if held is None or held.blob_id != git_blob_id(bundle.sidecar_data):
        return "repair"
    # A row holds its publication date, so a row built now differs from the one published:
    # only a missing row needs repair.
    if any(path not in remote for path in bundle.row_files):
        return "repair"
    return "unchanged"


@dataclass
class Destination:
    """Where commits go: the target branch, or a pull request opened on it."""

    base: str
    create_pr: bool
    title_key: str | None = None
    pr_num: int | None = None
    pr_url: str | None = None

    @property
    def ref(self) -> str:
        return f"refs/pr/{self.pr_num}" if self.pr_num is not None else self.base

    @property
    def opens_pr(self) -> bool:
        return self.create_pr and self.pr_num is None


def pr_key(bundle_ids: list[str]) -> str:
    """Names the set of bundles a pull request carries, so re-running the same upload finds and
    updates the same pull request instead of opening another."""
    joined = "\n".join(sorted(bundle_ids)).encode("utf-8")
    return hashlib.sha256(joined).hexdigest()[:12]


def pr_title(count: int, key: str) -> str:
    return f"Add {count} GPTNT statics bundle(s) [bundler {key}]"


class Publisher:
    """Carries out one upload; see the module docstring for the protocol."""

    def __init__(self, options: UploadOptions, progress: ProgressSink | None = None) -> None:
        self.options = options
        self.progress = progress or NoProgress()
        token = options.token.get_secret_value() if options.token else None
        self.session = HubSession(options.repo_id, token=token)
        self.report = UploadReport(
            repo_id=options.repo_id, revision=options.revision, dry_run=options.dry_run
        )
        self.destination = Destination(base=options.revision, create_pr=options.create_pr)

    def run(self, bundles_dir: Path) -> UploadReport:
        local, refused = gather_local(
            bundles_dir, allow_partial=self.options.allow_partial, progress=self.progress
        )
        self.report.bundles.extend(refused)
        if not local:
            return self.report
        self.destination.title_key = pr_key([bundle.bundle_id for bundle in local])
        repo_exists = self._prepare_repository()
        if self.options.create_pr and repo_exists:
            self._find_open_pr()
        plans = self._plan(local, repo_exists)
        if self.options.dry_run:
            return self.report
        pending = [bundle for bundle in local if plans[bundle.bundle_id].action in _TO_PUBLISH]
        batches = [
            pending[start : start + BUNDLES_PER_COMMIT]
            for start in range(0, len(pending), BUNDLES_PER_COMMIT)
        ]
        for number, batch in enumerate(batches, start=1):
            self.progress.begin(f"publishing batch {number} of {len(batches)}", len(batch))
            try:
                self._publish_batch(batch, plans)
            except BundlerError as error:
                self.report.error = str(error)
                for bundle in pending:
                    if plans[bundle.bundle_id].outcome == "planned":
                        plans[bundle.bundle_id].outcome = "failed"
                        plans[bundle.bundle_id].detail = str(error)
                if isinstance(error, HubAccessError):
                    raise
                break
        self.report.pull_request_url = self.destination.pr_url
        return self.report

    def _prepare_repository(self) -> bool:
        """Check the token and the repository; create the dataset repository if missing."""
        session = self.session
        if not self.options.dry_run:
            session.whoami()
        if session.dataset_exists():
            return True
        other = session.other_type_exists()
        if other is not None:
            raise HubAccessError(
                f"{self.options.repo_id} is a {other} repository, not a dataset",
                hint="bundles are published to a dataset repository; choose another --repo",
            )
        if self.options.dry_run:
            return False
        try:
            session.api.create_repo(
                self.options.repo_id,
                repo_type=REPO_TYPE,
                private=self.options.private,
                exist_ok=True,
            )
        except Exception as error:
            raise session.describe(error, doing="creating the dataset repository") from None
        self.report.repo_created = True
        return True

    def _find_open_pr(self) -> None:
        key = self.destination.title_key
        discussions = self.session.call(
            "listing pull requests",
            lambda: list(
                self.session.api.get_repo_discussions(
                    self.options.repo_id, discussion_type="pull_request", repo_type=REPO_TYPE
                )
            ),
        )
        for discussion in discussions:
            if discussion.status in ("open", "draft") and f"[bundler {key}]" in discussion.title:
                self.destination.pr_num = discussion.num
                self.destination.pr_url = discussion.url
                return

    def _plan(self, local: list[LocalBundle], repo_exists: bool) -> dict[str, BundlePlan]:
        remote: dict[str, RemoteFile] = {}
        if repo_exists:
            head = self.session.head(self.destination.ref)
            paths = [path for bundle in local for path in bundle.repo_paths()]
            remote = self.session.paths_info(paths, head)
        plans: dict[str, BundlePlan] = {}
        for bundle in local:
            action = classify(bundle, remote)
            plan = BundlePlan(
                bundle_id=bundle.bundle_id,
                action="replace" if action == "conflict" and self.options.replace else action,
                sha256=bundle.sidecar.archive.sha256,
                size=bundle.sidecar.archive.size,
            )
            if plan.action == "unchanged":
                plan.outcome = "already-there"
            elif plan.action == "conflict":
                plan.outcome = "refused"
                plan.detail = "the repository holds different content for this bundle; " + (
                    "pass --replace to overwrite it"
                )
            plans[bundle.bundle_id] = plan
            self.report.bundles.append(plan)
        return plans

    def _publish_batch(self, batch: list[LocalBundle], plans: dict[str, BundlePlan]) -> None:
        last_problem = "no attempt made"
        attempts = self.options.commit_attempts
        for attempt in range(attempts):
            head = self.session.head(self.destination.ref)
            remote = self.session.paths_info(
                [path for bundle in batch for path in bundle.repo_paths()], head
            )
            todo = self._still_to_publish(batch, remote, plans)
            if not todo:
                return
            try:
                self._commit(todo, head)
            except Exception as error:
                if isinstance(error, BundlerError):
                    raise
                status = status_of(error)
                if status in (409, 412):  # someone else committed first: re-plan on their head
                    last_problem = f"HTTP {status} (a concurrent commit)"
                    time.sleep(random.uniform(0.05, 0.4))
                    continue
                if not is_transient(error):
                    raise self.session.describe(
                        error, doing="committing", create_pr=self.options.create_pr
                    ) from None
                last_problem = str(self.session.describe(error, doing="committing"))
                if self.destination.opens_pr:
                    self._find_open_pr()  # the pull request may have been opened after all
                backoff = self.options.retry_wait_seconds * 2**attempt
                time.sleep(retry_after_of(error) or min(backoff, RETRY_MAX_SECONDS))
                continue
            for bundle in todo:
                plans[bundle.bundle_id].outcome = "published"
                self.progress.advance()
            return
        for bundle in batch:
            plan = plans[bundle.bundle_id]
            if plan.outcome == "planned":
                plan.outcome = "failed"
                plan.detail = f"not published after {attempts} attempts; last: {last_problem}"

    def _still_to_publish(
        self,
        batch: list[LocalBundle],
        remote: dict[str, RemoteFile],
        plans: dict[str, BundlePlan],
    ) -> list[LocalBundle]:
        """Re-plan a batch on the current head: what landed meanwhile (ours after a lost
        response, or another uploader's identical bundle) is done; a conflict that appeared
        meanwhile is refused unless --replace."""
        todo: list[LocalBundle] = []
        for bundle in batch:
            plan = plans[bundle.bundle_id]
            if plan.outcome != "planned":
                continue
            action = classify(bundle, remote)
            if action == "unchanged":
                plan.outcome = "published" if plan.action != "unchanged" else "already-there"
            elif action == "conflict" and plan.action == "new" and not self.options.replace:
                plan.action, plan.outcome = "conflict", "refused"
                plan.detail = "another upload published different content for this bundle"
            else:
                todo.append(bundle)
        return todo

    def _commit(self, todo: list[LocalBundle], head: str) -> None:
        card = render_dataset_card(self.options.repo_id, self._rows_after(todo, head))
        operations = [CommitOperationAdd(README, card.encode("utf-8"))]
        for bundle in todo:
            operations += [
                CommitOperationAdd(bundle.archive_path, bundle.archive),
                CommitOperationAdd(bundle.sidecar_path, bundle.sidecar_data),
            ]
            operations += [
                CommitOperationAdd(path, data) for path, data in bundle.row_files.items()
            ]
        summary, description = self._message(todo)
        info = self.session.api.create_commit(
            self.options.repo_id,
            operations,
            commit_message=summary,
            commit_description=description,
            repo_type=REPO_TYPE,
            revision=self.destination.ref,
            create_pr=self.destination.opens_pr,
            parent_commit=head,
        )
        self.report.commits.append(info.oid)
        if info.pr_num is not None and self.destination.pr_num is None:
            self.destination.pr_num = info.pr_num
            self.destination.pr_url = info.pr_url

    def _rows_after(self, todo: list[LocalBundle], head: str) -> list[BundleRow]:
        """Every bundle's row once `todo` is committed on `head`, for the dataset card."""
        rows = {bundle.row_path: bundle.row for bundle in todo}
        for path in self.session.list_files(ROWS_DIR, head):
            if path not in rows:
                fetch = partial(
                    self.session.api.hf_hub_download,
                    self.options.repo_id,
                    path,
                    repo_type=REPO_TYPE,
                    revision=head,
                )
                rows[path] = read_row(
                    Path(self.session.call(f"reading {path}", fetch)).read_bytes()
                )
        return list(rows.values())

    def _message(self, todo: list[LocalBundle]) -> tuple[str, str]:
        ids = [bundle.bundle_id for bundle in todo]
        if self.destination.opens_pr:
            key = self.destination.title_key or pr_key(ids)
            description = render_pr_description(
                self.options.repo_id,
                [bundle.row for bundle in todo],
                bundler_version(),
                marker=f"bundler {key}",
            )
            return pr_title(len(ids), key), description
        listed = ", ".join(ids)
        summary = self.options.message or f"Add {len(ids)} statics bundle(s): {listed}"
        if len(summary) > 200:
            summary = summary[:197] + "..."
        lines = [f"- {bundle.bundle_id} ({bundle.sidecar.coverage.status})" for bundle in todo]
        return summary, "Bundles in this commit:\n\n" + "\n".join(lines) + "\n"


_TO_PUBLISH: tuple[Action, ...] = ("new", "replace", "repair")


def upload(
    bundles_dir: Path, options: UploadOptions, progress: ProgressSink | None = None
) -> UploadReport:
    """Verify the bundles in `bundles_dir` and publish them; see UploadReport for the outcome.
    Raises HubAccessError for problems the user must fix first (token, access, repo, revision),
    and BundlesLockedError when another run holds the folder longer than options.lock_wait."""
    with bundles_lock(bundles_dir, operation="upload", wait=options.lock_wait, create=False):
        return Publisher(options, progress).run(bundles_dir)


__all__ = ["HubError", "UploadOptions", "UploadReport", "upload"]
