"""Stage 5, on the Hub: plan and make the commits that publish verified bundles.

An upload is planned, then executed. The plan compares every local bundle with what the Hub
holds on the target branch (and, with --create-pr, in the submitter's open pull request): a
bundle whose archive is there with the same sha256 is unchanged; one that is not there is new;
one there with other content EXTENDS it when it is a resumed run of the same setup (same claims
but for counts and coverage, every old prediction present with the same sha256, more rows), and
is otherwise a conflict, refused unless --replace.

Execution commits up to BUNDLES_PER_COMMIT bundles at a time, each commit made against the head
it was planned on (`parent_commit`), so a concurrent upload makes the Hub answer 412 instead of
being clobbered; the batch is then re-planned on the new head (`hub.commit_replanned`). A commit
to a branch also carries the dataset card, rendered from every row the branch will hold. A pull
request commit touches only the paths its bundles own, never the card or any other shared file,
so two open pull requests and the branch never conflict on merge. Each submitter (the token's
user) has one open bundler pull request per repository, found by its author and the `[bundler]`
title marker, and later uploads add commits to it; its title and description are rewritten to
say what the whole pull request adds, extends and replaces.

This module loads the Hub client; `bundler.hub.upload` imports it only once the local bundles are
being verified, so that loading and verifying overlap.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from huggingface_hub import CommitOperationAdd
from huggingface_hub.community import DiscussionComment

from bundler.core.errors import BundlerError, HubAccessError, HubError, RowError, TemporaryError
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import bundler_version
from bundler.hub.access import check_upload
from bundler.hub.card import RowReader, card_acceptable, card_refused, render_dataset_card
from bundler.hub.download import fetch_bundle
from bundler.hub.layout import README, repo_archive, repo_paths, repo_row, repo_sidecar
from bundler.hub.pullrequest import (
    PR_MARKER,
    ClaimDifference,
    ProposedBundle,
    pr_title,
    read_pr_state,
    render_pr_description,
)
from bundler.hub.rows import BundleRow, build_row, read_row, row_bytes, utc_timestamp
from bundler.hub.session import (
    REPO_TYPE,
    HubSession,
    PlannedCommit,
    RemoteFile,
    commit_replanned,
    git_blob_id,
)
from bundler.hub.upload import (
    BUNDLES_PER_COMMIT,
    Action,
    BundlePlan,
    LocalBundle,
    UploadOptions,
    UploadReport,
)
from bundler.local.diff import claim_differences as bundle_claim_differences
from bundler.local.fileio import CHUNK_SIZE
from bundler.local.layout import TEMP_PREFIX, BundleId
from bundler.local.manifest import PREDICTIONS_DIR, Sidecar
from bundler.local.verify import manifest_digests, read_bundle

EXTENSIBLE_CLAIMS = frozenset({"predictions", "coverage", "warnings", "bundler_version"})
"""The claims a resumed run may change; any other difference makes it a different result."""


def _git_blob_id_of_file(path: Path, size: int) -> str:
    digest = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            digest.update(chunk)
    return digest.hexdigest()


def _identity(remote: RemoteFile | None) -> str | None:
    """What a remote archive is: its sha256 (LFS) or its git blob id (a regular file)."""
    if remote is None:
        return None
    return remote.lfs_sha256 or remote.blob_id


def holds(remote: RemoteFile | None, bundle: LocalBundle) -> bool:
    """Whether the Hub's archive is this bundle's: by sha256 (its LFS oid), or by git blob id
    when the Hub stored it as a regular file."""
    if remote is None:
        return False
    if remote.lfs_sha256 is not None:
        return remote.lfs_sha256 == bundle.sidecar.archive.sha256
    return remote.blob_id == _git_blob_id_of_file(bundle.archive, bundle.size)


def companions_present(bundle: LocalBundle, remote: dict[str, RemoteFile]) -> bool:
    """The sidecar as published and every row file the bundle owns are there. Rows are not
    compared byte for byte: they carry the first publication time, which the Hub's copy keeps."""
    key = bundle.key
    sidecar = remote.get(repo_sidecar(key))
    if sidecar is None or sidecar.blob_id != git_blob_id(bundle.sidecar_data):
        return False
    return all(path in remote for path in repo_paths(key) if path != repo_archive(key))


def claim_differences(old: Sidecar, new: Sidecar) -> list[ClaimDifference]:
    """The claims of two sidecars that differ, field by field, as `bundler diff` finds them,
    worded for a pull request's description."""

    def show(value: object) -> str:
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    return [
        ClaimDifference(field=found.field, old=show(found.a), new=show(found.b))
        for found in bundle_claim_differences(old, new)
    ]


@dataclass
class Destination:
    """Where commits go: the target branch, or the submitter's pull request on it."""

    base: str
    create_pr: bool
    pr_num: int | None = None
    pr_url: str | None = None
    pr_title: str | None = None
    pr_description: str | None = None
    pr_comment_id: str | None = None
    """The description is the pull request's first comment; its id, to rewrite it."""
    pr_state: list[ProposedBundle] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"refs/pr/{self.pr_num}" if self.pr_num is not None else self.base

    @property
    def opens_pr(self) -> bool:
        return self.create_pr and self.pr_num is None


_VERB: dict[Action, str] = {
    "new": "adds",
    "extends": "extends",
    "replace": "replaces",
    "repair": "repairs",
}
"""What a commit does to a bundle, by the bundle's planned action."""


class Publisher:
    """Carries out one upload; see the module docstring for the protocol."""

    def __init__(self, options: UploadOptions, progress: ProgressSink | None = None) -> None:
        self.options = options
        self.progress = progress or NoProgress()
        token = options.token.get_secret_value() if options.token else None
        self.session = HubSession(options.repo_id, token=token, max_wait=options.max_wait_seconds)
        self.report = UploadReport(
            repo_id=options.repo_id, revision=options.revision, dry_run=options.dry_run
        )
        self.session.on_wait(self.report.warnings.append)  # rate-limit waits (hub.ratelimit)
        self.destination = Destination(base=options.revision, create_pr=options.create_pr)
        self.user: str | None = None
        self.rows = RowReader(self.session)
        self.published_at = utc_timestamp()
        self._expected: dict[str, str | None] = {}
        """Per bundle, the archive the commit target held when planned (None: no archive)."""
        self._proposals: dict[str, ProposedBundle] = {}
        self._planned: tuple[str, str, dict[str, RemoteFile]] | None = None
        """(ref, head, remote files) from planning, reused by the first commit's plan."""

    def run(self, local: list[LocalBundle], set_aside: list[BundlePlan]) -> UploadReport:
        """Publish the verified `local` bundles; `set_aside` are those verification refused or
        held back (upload.gather_local), reported as they are."""
        self.report.bundles.extend(set_aside)
        if not local:
            return self.report
        try:
            repo_exists = self._prepare_repository()
            if self.options.create_pr and repo_exists and self.user is not None:
                self._find_open_pr()
            plans = self._plan(local, repo_exists)
        except BundlerError as error:
            self._stopped_by(error)  # the bundles refused or held back above stay reported
            return self.report
        if not self.options.dry_run:
            pending = [bundle for bundle in local if plans[bundle.bundle_id].action in _TO_PUBLISH]
            self._publish(pending, plans)
            if self.destination.pr_num is not None:
                self._describe_pr(plans)
        self.report.pull_request_num = self.destination.pr_num
        self.report.pull_request_url = self.destination.pr_url
        return self.report

    # ------------------------------------------------------------------ preparation

    def _prepare_repository(self) -> bool:
        """Check the token and the repository; create the dataset repository if missing."""
        session = self.session
        rights = session.upload_rights(dry_run=self.options.dry_run)  # hub.access
        self.user = rights.user if rights is not None else None
        if session.dataset_exists():
            check_upload(rights, repo_exists=True, create_pr=self.options.create_pr)
            return True
        other = session.other_type_exists()
        if other is not None:
            raise HubAccessError(
                f"{self.options.repo_id} is a {other} repository, not a dataset",
                hint="bundles are published to a dataset repository; choose another --repo",
            )
        check_upload(rights, repo_exists=False, create_pr=self.options.create_pr)
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
        """The submitter's open bundler pull request on the target branch, if there is one:
        by author and title marker, never by what it holds, so every upload finds it."""
        session, user = self.session, self.user
        discussions = session.call(
            "listing pull requests",
            lambda: list(
                session.api.get_repo_discussions(
                    session.repo_id,
                    author=user,
                    discussion_type="pull_request",
                    discussion_status="open",
                    repo_type=REPO_TYPE,
                )
            ),
        )
        mine = sorted(
            (
                discussion
                for discussion in discussions
                if discussion.author == user
                and discussion.status in ("open", "draft")
                and PR_MARKER in discussion.title
            ),
            key=lambda discussion: discussion.num,
        )
        for discussion in mine:
            details = session.call(
                f"reading pull request #{discussion.num}",
                partial(
                    session.api.get_discussion_details,
                    session.repo_id,
                    discussion.num,
                    repo_type=REPO_TYPE,
                ),
            )
            if details.target_branch not in (
                self.destination.base,
                f"refs/heads/{self.destination.base}",
            ):
                continue
            first = next((event for event in details.events if event.type == "comment"), None)
            destination = self.destination
            destination.pr_num, destination.pr_url = discussion.num, discussion.url
            destination.pr_title = discussion.title
            if first is not None:
                content = first.content if isinstance(first, DiscussionComment) else ""
                destination.pr_description, destination.pr_comment_id = content, first.id
                destination.pr_state = read_pr_state(content)
            return

    # --------------------------------------------------------------------- planning

    def _plan(self, local: list[LocalBundle], repo_exists: bool) -> dict[str, BundlePlan]:
        base_remote: dict[str, RemoteFile] = {}
        target_remote: dict[str, RemoteFile] = {}
        base_head = ""
        if repo_exists:
            session = self.session
            base_head = session.head(self.destination.base)
            paths = [path for bundle in local for path in repo_paths(bundle.key)]
            base_remote = session.paths_info([*paths, README], base_head)
            target_remote = base_remote
            self._planned = (self.destination.base, base_head, base_remote)
            if self.destination.pr_num is not None:
                ref = self.destination.ref
                pr_head = session.head(ref)
                archives = [repo_archive(bundle.key) for bundle in local]
                target_remote = session.paths_info(archives, pr_head)
                self._planned = (ref, pr_head, target_remote)
        plans: dict[str, BundlePlan] = {}
        for bundle in local:
            plan = self._classify(bundle, base_remote, target_remote, base_head)
            self._expected[bundle.bundle_id] = _identity(
                target_remote.get(repo_archive(bundle.key))
            )
            plans[bundle.bundle_id] = plan
            self.report.bundles.append(plan)
        return plans

    def _classify(
        self,
        bundle: LocalBundle,
        base_remote: dict[str, RemoteFile],
        target_remote: dict[str, RemoteFile],
        base_head: str,
    ) -> BundlePlan:
        key, base = bundle.key, self.destination.base
        plan = BundlePlan(
            bundle_id=bundle.bundle_id,
            action="new",
            sha256=bundle.sidecar.archive.sha256,
            size=bundle.size,
        )
        on_base = base_remote.get(repo_archive(key))
        if holds(on_base, bundle):
            if self.options.create_pr or companions_present(bundle, base_remote):
                plan.action, plan.outcome = "unchanged", "already-there"
                plan.detail = f"already on {base}" if self.options.create_pr else None
                return plan
            plan.action = "repair"
            plan.detail = "the archive is there; its sidecar or rows are not"
            bundle.row = self._row(bundle, self._first_published(bundle, base_head))
            return plan
        if self.destination.pr_num is not None and holds(
            target_remote.get(repo_archive(key)), bundle
        ):
            plan.action, plan.outcome = "unchanged", "already-there"
            plan.detail = f"already proposed in pull request #{self.destination.pr_num}"
            return plan
        old: Sidecar | None = None
        if on_base is not None:
            old = self._judge_change(bundle, plan, on_base, base_head)
        if plan.action in _TO_PUBLISH:
            bundle.row = self._row(bundle, self.published_at)
            self._proposals[bundle.bundle_id] = self._proposal(bundle, plan, old)
        return plan

    def _judge_change(
        self, bundle: LocalBundle, plan: BundlePlan, on_base: RemoteFile, base_head: str
    ) -> Sidecar | None:
        """The Hub holds other content under this id: does this bundle extend it (a resumed
        run), or is it a conflict (a replacement with --replace)? Returns the Hub's sidecar."""
        old, old_data = self._old_sidecar(bundle.key, base_head) or (None, b"")
        plan.replaces_sha256 = on_base.lfs_sha256 or (old.archive.sha256 if old else None)
        problem = "its sidecar on the Hub is unreadable"
        if old is not None:
            problem = self._extension_problem(bundle, old, old_data, base_head) or ""
            if not problem:
                plan.action = "extends"
                plan.detail = (
                    f"extends the bundle on {self.destination.base} "
                    f"({old.coverage.rows_present} -> {bundle.sidecar.coverage.rows_present} rows)"
                )
                return old
        if self.options.replace:
            plan.action = "replace"
            plan.detail = f"replaces different content on {self.destination.base}: {problem}"
        else:
            plan.action, plan.outcome = "conflict", "refused"
            plan.detail = (
                f"the repository holds different content for this bundle ({problem}); "
                "pass --replace to overwrite it"
            )
        return old

    def _old_sidecar(self, key: BundleId, commit: str) -> tuple[Sidecar, bytes] | None:
        """The Hub's sidecar for `key` at `commit`, parsed, with its bytes; None if unreadable."""
        try:
            data = self.session.read_small_file(repo_sidecar(key), commit)
            return Sidecar.model_validate_json(data), data
        except (TemporaryError, HubAccessError):
            raise
        except (HubError, ValueError):
            return None

    def _extension_problem(
        self, bundle: LocalBundle, old: Sidecar, old_data: bytes, commit: str
    ) -> str | None:
        """Why `bundle` does not extend the Hub's `old` one (read as `old_data`), or None when
        it does: the same claims but for counts and coverage, more rows, and every prediction
        of the Hub's (verified) copy present with the same sha256."""
        differing = [
            difference.field
            for difference in claim_differences(old, bundle.sidecar)
            if difference.field.split(".")[0] not in EXTENSIBLE_CLAIMS
        ]
        if differing:
            return "it differs in " + ", ".join(differing)
        before, after = old.coverage.rows_present, bundle.sidecar.coverage.rows_present
        if after <= before:
            return f"it has {after} rows, the Hub's copy {before}"
        key = bundle.key
        with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as staging:
            sidecar = Path(staging) / repo_sidecar(key)  # the bytes read for `old`, not again
            sidecar.parent.mkdir(parents=True)
            sidecar.write_bytes(old_data)
            archive = fetch_bundle(self.session, key, commit, {repo_archive(key)}, Path(staging))
            reading = read_bundle(archive, self.progress)
            verification = reading.verification()
            if not verification.ok:
                return f"the Hub's copy fails verification ({verification.describe_failures()})"
            prefix = f"{PREDICTIONS_DIR}/"
            old_predictions = {
                name: sha256
                for name, sha256 in manifest_digests(archive).items()
                if name.startswith(prefix)
            }
        new_files = manifest_digests(bundle.archive)
        changed = sorted(
            path for path, sha in old_predictions.items() if new_files.get(path) != sha
        )
        if changed:
            return (
                f"{len(changed)} prediction(s) of the Hub's copy are missing or different in it, "
                f"first {changed[0]}"
            )
        return None

    def _first_published(self, bundle: LocalBundle, commit: str) -> str:
        """When the Hub's row says this very archive was first published; else now."""
        try:
            row = read_row(self.session.read_small_file(repo_row(bundle.key), commit))
        except (TemporaryError, HubAccessError):
            raise
        except (HubError, RowError, ValueError):  # no row there, or not one the bundler wrote
            return self.published_at
        same = row.archive_sha256 == bundle.sidecar.archive.sha256
        return row.published_at if same else self.published_at

    def _row(self, bundle: LocalBundle, published_at: str) -> BundleRow:
        return build_row(bundle.sidecar, bundle.metrics_text, published_at)

    def _proposal(
        self, bundle: LocalBundle, plan: BundlePlan, old: Sidecar | None
    ) -> ProposedBundle:
        sidecar = bundle.sidecar
        changed = plan.action in ("extends", "replace")
        return ProposedBundle(
            bundle_id=bundle.bundle_id,
            verb="extends" if plan.action == "extends" else "replaces" if changed else "adds",
            coverage=sidecar.coverage.status,
            predictions=sidecar.predictions.count,
            errors=sidecar.predictions.errors,
            exceptions=sidecar.predictions.exceptions,
            is_pinned=sidecar.statics.is_pinned,
            sha256=sidecar.archive.sha256,
            submitter=sidecar.submitter.name,
            old_sha256=plan.replaces_sha256 if changed else None,
            old_submitter=old.submitter.name if changed and old else None,
            old_predictions=old.predictions.count if changed and old else None,
            differences=claim_differences(old, sidecar) if changed and old else [],
            warnings=sidecar.warnings,
        )

    # ------------------------------------------------------------------- publishing

    def _publish(self, pending: list[LocalBundle], plans: dict[str, BundlePlan]) -> None:
        batches = [
            pending[start : start + BUNDLES_PER_COMMIT]
            for start in range(0, len(pending), BUNDLES_PER_COMMIT)
        ]
        self.progress.begin(
            f"uploading to {self.options.repo_id}",
            sum(bundle.size for bundle in pending),
            unit="bytes",
        )
        for batch in batches:
            try:
                self._publish_batch(batch, plans)
            except BundlerError as error:
                temporary = self._stopped_by(error)
                for bundle in pending:
                    plan = plans[bundle.bundle_id]
                    if plan.outcome == "planned":
                        plan.outcome, plan.detail, plan.temporary = "failed", str(error), temporary
                return

    def _stopped_by(self, error: BundlerError) -> bool:
        """Record in the report the Hub error that ended the upload, so what was refused or
        published before it is still reported, and whether it was temporary. An error the
        user must fix first (token, access, repository, revision) is raised instead."""
        if isinstance(error, HubAccessError):
            raise error
        temporary = isinstance(error, TemporaryError)
        self.report.error, self.report.hint = error.message, error.hint
        self.report.error_temporary = temporary
        return temporary

    def _publish_batch(self, batch: list[LocalBundle], plans: dict[str, BundlePlan]) -> None:
        committing: list[LocalBundle] = []
        planned: list[PlannedCommit] = []

        def plan() -> PlannedCommit | None:
            destination = self.destination
            ref = destination.ref
            if self._planned is not None and self._planned[0] == ref:
                _, head, remote = self._planned
            else:
                head = self.session.head(ref)
                paths = [path for bundle in batch for path in repo_paths(bundle.key)]
                remote = self.session.paths_info([*paths, README], head)
            self._planned = None
            todo = self._still_to_publish(batch, head, remote, plans)
            committing[:] = todo
            if not todo:
                return None
            operations = [
                CommitOperationAdd(path, content)
                for bundle in todo
                for path, content in bundle.repo_files().items()
            ]
            card_path = None
            if not self.options.create_pr and self.report.card_refused is None:
                card = self._card(head, todo)
                held = remote.get(README)
                changed = held is None or held.blob_id != git_blob_id(card)
                if changed and card_acceptable(card, self.report):  # checked locally first
                    operations.append(CommitOperationAdd(README, card))
                    card_path = README
            summary, description = self._message(todo, plans)
            planned[:] = [
                PlannedCommit(
                    revision=ref,
                    parent=head,
                    operations=operations,
                    summary=summary,
                    description=description,
                    doing="opening the pull request" if destination.opens_pr else "committing",
                    create_pr=destination.opens_pr,
                    card=card_path,
                    on_card_refused=partial(card_refused, self.report),
                )
            ]
            return planned[0]

        opening = self.destination.opens_pr
        info = commit_replanned(
            self.session,
            plan,
            attempts=self.options.commit_attempts,
            retry_wait=self.options.retry_wait_seconds,
            on_transient=self._find_open_pr if opening else None,
        )
        if info is None:
            return
        self.report.commits.append(info.oid)
        destination = self.destination
        if info.pr_num is not None and destination.pr_num is None:
            destination.pr_num, destination.pr_url = info.pr_num, info.pr_url
            # The pull request opened with the title and description of the commit that
            # opened it: what the rest of this upload compares with before rewriting them.
            destination.pr_title = planned[0].summary
            destination.pr_description = planned[0].description
            destination.pr_state = [self._proposals[b.bundle_id] for b in committing]
        for bundle in committing:
            self._landed(bundle, plans[bundle.bundle_id])

    def _landed(self, bundle: LocalBundle, plan: BundlePlan) -> None:
        plan.outcome = "proposed" if self.options.create_pr else "published"
        if self.options.create_pr and self.destination.pr_num is not None:
            plan.detail = f"proposed in pull request #{self.destination.pr_num}"
        if bundle.row is not None:
            path = repo_row(bundle.key)
            self.rows.remember(path, row_bytes(bundle.row), bundle.row)
        self.progress.advance(bundle.size)

    def _still_to_publish(
        self,
        batch: list[LocalBundle],
        head: str,
        remote: dict[str, RemoteFile],
        plans: dict[str, BundlePlan],
    ) -> list[LocalBundle]:
        """Re-plan a batch on the current `head`: what landed meanwhile (ours after a lost
        response, or another uploader's identical bundle) is done, and its detail says where
        it was found, since no commit of this run is known to hold it; a bundle someone else
        changed meanwhile is refused unless --replace."""
        todo: list[LocalBundle] = []
        for bundle in batch:
            plan = plans[bundle.bundle_id]
            if plan.outcome != "planned":
                continue
            held = remote.get(repo_archive(bundle.key))
            if holds(held, bundle) and (
                plan.action != "repair" or companions_present(bundle, remote)
            ):
                self._landed(bundle, plan)
                plan.detail = (
                    f"found on the Hub at {head[:12]} when the commit was planned again "
                    "(a commit whose answer was lost, or an identical upload)"
                )
            elif _identity(held) != self._expected[bundle.bundle_id] and not self.options.replace:
                plan.action, plan.outcome = "conflict", "refused"
                plan.detail = (
                    "another upload changed this bundle on the Hub meanwhile; "
                    "pass --replace to overwrite it"
                )
            else:
                todo.append(bundle)
        return todo

    def _card(self, head: str, todo: list[LocalBundle]) -> bytes:
        """The card for the branch as it will be: its rows at `head` plus this commit's."""
        overriding = {repo_row(b.key): b.row for b in todo if b.row is not None}
        rows, unreadable = self.rows.rows_at(head, overriding)
        for path in unreadable:
            warning = f"{path}: not a readable row; left out of the dataset card"
            if warning not in self.report.warnings:
                self.report.warnings.append(warning)
        return render_dataset_card(self.options.repo_id, rows).encode("utf-8")

    def _message(self, todo: list[LocalBundle], plans: dict[str, BundlePlan]) -> tuple[str, str]:
        destination = self.destination
        if destination.opens_pr:
            proposed = self._pr_proposals([bundle.bundle_id for bundle in todo])
            return (
                pr_title(proposed, self.user or "unknown", self.options.message),
                render_pr_description(
                    self.options.repo_id, self.user or "unknown", proposed, bundler_version()
                ),
            )
        actions = [plans[bundle.bundle_id].action for bundle in todo]
        counts = [
            f"{_VERB[action].removesuffix('s')} {actions.count(action)}"
            for action in _VERB
            if action in actions
        ]
        listed = ", ".join(bundle.bundle_id for bundle in todo)
        summary = self.options.message or (
            f"{', '.join(counts).capitalize()} statics bundle(s): {listed}"
        )
        if len(summary) > 200:
            summary = summary[:197] + "..."
        lines = []
        for bundle in todo:
            plan = plans[bundle.bundle_id]
            verb = _VERB[plan.action]
            line = f"- {verb} {bundle.bundle_id} ({bundle.sidecar.coverage.status})"
            if plan.replaces_sha256:
                line += f": archive {plan.replaces_sha256} -> {plan.sha256}"
            lines.append(line)
        return summary, "Bundles in this commit:\n\n" + "\n".join(lines) + "\n"

    def _pr_proposals(self, committed: list[str]) -> list[ProposedBundle]:
        """What the whole pull request proposes: its earlier proposals, updated by those of
        the bundles `committed` now."""
        merged = {bundle.bundle_id: bundle for bundle in self.destination.pr_state}
        merged.update({bundle_id: self._proposals[bundle_id] for bundle_id in committed})
        return list(merged.values())

    def _describe_pr(self, plans: dict[str, BundlePlan]) -> None:
        """Rewrite the pull request's title and description to say what it now proposes.
        A failure here leaves the bundles proposed; it is reported as a warning."""
        destination, session = self.destination, self.session
        num = destination.pr_num
        assert num is not None
        proposed_now = [
            bundle_id
            for bundle_id, plan in plans.items()
            if plan.outcome == "proposed" and bundle_id in self._proposals
        ]
        if not proposed_now:
            return
        proposed = self._pr_proposals(proposed_now)
        user = self.user or "unknown"
        title = pr_title(proposed, user, self.options.message)
        description = render_pr_description(self.options.repo_id, user, proposed, bundler_version())
        # Each on its own: the Hub may let a submitter rename its pull request, and refuse
        # it the description's edit.
        if title != destination.pr_title:
            self._update_pr(
                "its title",
                partial(
                    session.call,
                    "renaming the pull request",
                    partial(
                        session.api.rename_discussion,
                        session.repo_id,
                        num,
                        title,
                        repo_type=REPO_TYPE,
                    ),
                ),
            )
        if description != destination.pr_description:
            self._update_pr("its description", partial(self._edit_description, description))

    def _edit_description(self, description: str) -> None:
        """The description is the pull request's first comment."""
        destination, session = self.destination, self.session
        if destination.pr_comment_id is None:
            self._find_open_pr()
        num, comment_id = destination.pr_num, destination.pr_comment_id
        if num is not None and comment_id is not None:
            session.call(
                "updating the pull request's description",
                partial(
                    session.api.edit_discussion_comment,
                    session.repo_id,
                    num,
                    comment_id,
                    description,
                    repo_type=REPO_TYPE,
                ),
            )

    def _update_pr(self, what: str, change: Callable[[], object]) -> None:
        """One change to the pull request; a failure leaves the bundles proposed, and is
        reported as a warning that says what is now out of date."""
        try:
            change()
        except BundlerError as error:
            self.report.warnings.append(
                f"pull request #{self.destination.pr_num}: {what} could not be updated, so it "
                f"does not say all the pull request proposes ({error.message})"
            )


_TO_PUBLISH: tuple[Action, ...] = tuple(_VERB)
"""The actions that commit something: those a commit message has a verb for."""
