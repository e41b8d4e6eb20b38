"""Stage 5, planned: what an upload commits, decided from values alone.

The plan compares every verified local bundle with what the repository holds on the target
branch (and, with --create-pr, in the submitter's open pull request): a bundle whose archive is
there with the same sha256 is unchanged; one that is not there is new; one there with other
content EXTENDS it when it is a resumed run of the same setup (same claims but for counts and
coverage, every old prediction present with the same sha256, more rows), and is otherwise a
conflict, refused unless --replace.

Nothing here reads the network. `triage` says, from the repository's file listing alone, what
more must be read about a bundle (the Hub's sidecar of a changed bundle, the Hub's predictions
of one that may extend it); `bundler.hub.publish.evidence` reads exactly that into
`HubEvidence`, and `decide` then plans the bundle. `batches` cuts the plan into commits,
`commit_message` words them, and `replan` judges a batch again on a head that moved. So the
whole plan can be shown (--dry-run) and tested without a server.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, SecretStr

from bundler.core.error_shape import ErrorShape
from bundler.core.errors import TemporaryError
from bundler.core.model import Model, RemedyField
from bundler.hub.client.limits import HubLimits
from bundler.hub.client.remote import RemoteFile, git_blob_id
from bundler.hub.client.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.leaderboard.rows import TableRow, build_row
from bundler.hub.publish.pr_description import ClaimDifference, ProposedBundle
from bundler.hub.repo.paths import FILES_PER_BUNDLE, repo_paths, unsharded_paths
from bundler.hub.tasks.definitions import TaskDefinitions
from bundler.local.fileio import CHUNK_SIZE
from bundler.local.layout import BundleId
from bundler.local.manifest import PREDICTIONS_DIR, Sidecar
from bundler.local.verifycache import VerifiedBundle

MAX_FILES_PER_COMMIT = 100
"""The Hub recommends about 100 files per commit at most (huggingface.co/docs/hub/repositories-
recommendations: "Commit size: <100 files", "upload files in multiple commits"); the blobs of
several commits still go up together (bundler.hub.publish.ahead)."""
SHARED_FILES = 2
"""What every commit to a branch writes beside the bundles: the all-tasks table and the card
(plus one table per task it touches)."""
PR_BUNDLES_PER_COMMIT = MAX_FILES_PER_COMMIT // FILES_PER_BUNDLE
"""The bundles a pull request's commit holds: their own files only."""

Action = Literal[
    "new", "extends", "replace", "repair", "unchanged", "conflict", "refused", "held-back"
]
Outcome = Literal[
    "planned", "published", "proposed", "already-there", "held-back", "refused", "failed"
]
VERB: dict[Action, str] = {
    "new": "adds",
    "extends": "extends",
    "replace": "replaces",
    "repair": "repairs",
}
"""What a commit does to a bundle, by the bundle's planned action; the actions to publish are
exactly these."""


class UploadOptions(Model):
    model_config = ConfigDict(frozen=True)

    repo_id: str
    revision: str = "main"
    create_pr: bool = False
    replace: bool = False
    allow_partial: bool = False
    dry_run: bool = False
    message: str | None = None
    token: SecretStr | None = None
    commit_attempts: int = Field(default=COMMIT_ATTEMPTS, ge=1)
    retry_wait_seconds: float = Field(
        default=COMMIT_RETRY_SECONDS, ge=0, description="first wait after a failed commit; doubles"
    )
    lock_wait: float = Field(
        default=0, ge=0, description="seconds to wait for another run to release the folder"
    )
    max_wait_seconds: float | None = Field(
        default=None,
        ge=0,
        description="longest wait for a Hub rate-limit window to reset (None: "
        "BUNDLER_MAX_WAIT, else 300 s); a longer one ends the upload with exit 75",
    )
    limits: HubLimits | None = Field(
        default=None,
        description="what a commit may leave in the repository (None: the Hub's numbers, or "
        "BUNDLER_MAX_REPO_FILES); a batch past them is refused before it is sent, and the "
        "later batches go on",
    )


class BundlePlan(Model):
    bundle_id: str
    action: Action
    outcome: Outcome = "planned"
    detail: str | None = None
    remedy: RemedyField = None
    """What the person can do about it (publish a partial bundle, replace the Hub's copy)."""
    sha256: str | None = None
    size: int | None = None
    branch_sha256: str | None = None
    """The archive on the Hub that this bundle extends or replaces."""
    temporary: bool = False
    """Failed only for a reason that may pass (the Hub unavailable or rate limiting)."""

    @property
    def to_publish(self) -> bool:
        return self.action in VERB and self.outcome == "planned"


class UploadReport(Model, ErrorShape):
    repo_id: str
    revision: str
    dry_run: bool
    pull_request_num: int | None = None
    pull_request_url: str | None = None
    opens_pull_request: bool = False
    """With create_pr: no open pull request of the submitter's was found and bundles are to be
    proposed, so one is (or, in a dry run, would be) opened; else it is pull_request_num's."""
    commits: list[str] = Field(default_factory=list)
    bundles: list[BundlePlan] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    error: str | None = None
    """The Hub error that ended the upload early, if one did; else the first that refused a
    batch of it (the Hub's limits, or the Hub refusing its content), the later batches
    going on; else, when it exits 1, what a person must look at (bundler.hub.publish.outcome)."""
    hint: str | None = None
    """What to do about `error`."""
    error_kind: str | None = None
    """`error`'s kind (bundler.core.errors; bundler.core.causes when no error ended it)."""
    error_temporary: bool = False
    card_refused: str | None = None
    """Why the dataset card was left out of the commits (the bundles were committed without
    it; regenerating the card commits it once the problem is fixed)."""
    left_off_board: list[str] = Field(default_factory=list)
    """Bundles on the branch left off its board, each with why (a file missing, a bundle that
    failed verification): named by every upload to the branch until they are fixed or
    removed, and a person must look (exit 1); they never stop this upload's bundles."""
    charts_not_drawn: list[str] = Field(default_factory=list)
    """Charts the last commit went without, each with why (matplotlib failed to draw it): the
    board's tables and card are whole; the chart is drawn by the next commit that can."""

    @property
    def exit_code(self) -> int:
        """1 when a person must look (refused, failed checks, conflicts, a refused card, bundles
        on the branch left off its board); else
        75 when something failed only for a temporary reason; else 0. Held-back bundles count
        as neither: they wait for their run to complete."""
        person = (self.error is not None and not self.error_temporary) or bool(
            self.card_refused is not None or self.left_off_board
        )
        person = person or any(
            bundle.outcome == "refused" or (bundle.outcome == "failed" and not bundle.temporary)
            for bundle in self.bundles
        )
        if person:
            return 1
        if self.error is not None or any(b.outcome == "failed" for b in self.bundles):
            return TemporaryError.exit_code
        return 0


@dataclass
class LocalBundle:
    """A verified local bundle; `row` is set from the plan once it knows the publication time.
    Planning asks every bundle for its facts only (`bundle_id`, `archive_sha256`, `size`); the
    sidecar is parsed for the bundles it publishes."""

    archive_path: str
    """The archive's path, as the folder's listing gave it (a Path made only when asked for:
    an upload of thousands of bundles already there never asks)."""
    verified: VerifiedBundle
    row: TableRow | None = None

    @cached_property
    def archive(self) -> Path:
        return Path(self.archive_path)

    @property
    def sidecar(self) -> Sidecar:
        return self.verified.sidecar

    @property
    def sidecar_data(self) -> bytes:
        return self.verified.sidecar_data

    @property
    def metrics_text(self) -> str:
        return self.verified.metrics_text

    @property
    def bundle_id(self) -> str:
        return self.verified.facts.bundle_id

    @cached_property
    def key(self) -> BundleId:
        """The verified bundle id, from which every repository path is derived (parsed once:
        planning asks for it several times a bundle, for thousands of bundles)."""
        return BundleId.parse(self.bundle_id)

    @cached_property
    def repo_paths(self) -> tuple[str, str]:
        """Its archive's and its sidecar's paths in the repository (`repo_paths`), made once:
        every look at a listing asks for them."""
        return repo_paths(self.key)

    @property
    def repo_archive(self) -> str:
        return self.repo_paths[0]

    @property
    def repo_sidecar(self) -> str:
        return self.repo_paths[1]

    @cached_property
    def sidecar_blob_id(self) -> str:
        """Its sidecar's git blob id, to compare with a listing's."""
        return git_blob_id(self.sidecar_data)

    @property
    def archive_sha256(self) -> str:
        return self.verified.facts.archive_sha256

    @property
    def size(self) -> int:
        return self.verified.facts.archive_size

    def archive_blob_id(self) -> str:
        """The archive's git blob id, for a Hub that stored it as a regular file."""
        digest = hashlib.sha1(b"blob %d\0" % self.size, usedforsecurity=False)
        with self.archive.open("rb") as handle:
            while chunk := handle.read(CHUNK_SIZE):
                digest.update(chunk)
        return digest.hexdigest()

    def repo_files(self) -> dict[str, Path | bytes]:
        """Every file the bundle owns in the repository: its archive and its sidecar."""
        return {self.repo_archive: self.archive, self.repo_sidecar: self.sidecar_data}


@dataclass(frozen=True)
class RepositoryView:
    """What the repository holds of the bundles being planned: the files at the head of the
    base branch and, when the submitter's pull request is open, at its head."""

    base: str
    base_head: str = ""
    base_files: dict[str, RemoteFile] = field(default_factory=dict)
    pr_num: int | None = None
    pr_files: dict[str, RemoteFile] | None = None
    published: dict[str, str] = field(default_factory=dict)
    """When the branch's table says each bundle's very archive was first published."""
    definitions: TaskDefinitions | None = None
    """The maintainers' task definitions on the base branch: a bundle contradicting its task's
    definition is refused (review would refuse it)."""
    unsharded: frozenset[BundleId] = frozenset()
    """Bundles the base branch still keeps where layout 2 did, until its next commit moves
    them into their shards (bundler.hub.leaderboard.branch)."""

    def base_paths(self, bundle: BundleId) -> tuple[str, str]:
        """Where the base branch keeps the bundle's archive and sidecar, to read them."""
        return unsharded_paths(bundle) if bundle in self.unsharded else repo_paths(bundle)

    @property
    def target_files(self) -> dict[str, RemoteFile]:
        """The files where the commits go: the pull request's, or the branch's."""
        return self.base_files if self.pr_files is None else self.pr_files


Triage = Literal["on-base", "repair", "in-pr", "fresh", "changed"]
"""What the listing alone says of a bundle: its archive is on the base branch (with its
companions, or anyway for a pull request), or there without them (to repair), or already in
the pull request, or nowhere (fresh), or the base holds other content under its id."""


@dataclass(frozen=True)
class HubEvidence:
    """What was read from the Hub about one bundle, as `triage` asked for it."""

    old_sidecar: Sidecar | None = None
    """The base branch's sidecar of a changed bundle; None when it could not be read."""
    extension_problem: str | None = None
    """Why the bundle does not extend the Hub's copy; None when it does (or was not asked)."""


@dataclass(frozen=True)
class Decision:
    """One bundle's plan, and what publishing it needs: its row, and its entry in the pull
    request's description."""

    plan: BundlePlan
    row: TableRow | None = None
    proposal: ProposedBundle | None = None
    expected: str | None = None
    """The archive the commit target held when planned (its sha256 or blob id; None: none)."""


def holds(remote: RemoteFile | None, bundle: LocalBundle) -> bool:
    """Whether the Hub's archive is this bundle's: by sha256 (its LFS oid), or by git blob id
    when the Hub stored it as a regular file."""
    if remote is None:
        return False
    if remote.lfs_sha256 is not None:
        return remote.lfs_sha256 == bundle.archive_sha256
    return remote.blob_id == bundle.archive_blob_id()


def companions_present(bundle: LocalBundle, remote: dict[str, RemoteFile]) -> bool:
    """The sidecar beside the archive is there as published: a bundle owns its archive and
    its sidecar and nothing else (`repo_paths`)."""
    sidecar = remote.get(bundle.repo_sidecar)
    return sidecar is not None and sidecar.blob_id == bundle.sidecar_blob_id


def triage(bundle: LocalBundle, view: RepositoryView, *, create_pr: bool) -> Triage:
    on_base = view.base_files.get(bundle.repo_archive)
    if holds(on_base, bundle):
        return "on-base" if create_pr or companions_present(bundle, view.base_files) else "repair"
    if view.pr_num is not None and holds(view.target_files.get(bundle.repo_archive), bundle):
        return "in-pr"
    return "fresh" if on_base is None else "changed"


def extension_predictions_problem(
    old_files: dict[str, str], new_files: dict[str, str]
) -> str | None:
    """Why a bundle whose manifest lists `new_files` (name to sha256) does not hold every
    prediction of the Hub's verified copy, which lists `old_files`; None when it does."""
    prefix = f"{PREDICTIONS_DIR}/"
    changed = sorted(
        path
        for path, sha in old_files.items()
        if path.startswith(prefix) and new_files.get(path) != sha
    )
    if changed:
        return (
            f"{len(changed)} prediction(s) of the Hub's copy are missing or different in it, "
            f"first {changed[0]}"
        )
    return None


def decide(
    bundle: LocalBundle,
    view: RepositoryView,
    evidence: HubEvidence,
    options: UploadOptions,
    published_at: str,
) -> Decision:
    """Plan one bundle from the listing and what was read about it; `published_at` stamps the
    rows of what this upload publishes."""
    key, base = bundle.key, view.base
    plan = BundlePlan(
        bundle_id=bundle.bundle_id,
        action="new",
        sha256=bundle.archive_sha256,
        size=bundle.size,
    )
    on_target = view.target_files.get(bundle.repo_archive)
    expected = on_target.identity if on_target else None
    defined = view.definitions
    definition = defined.get(key.task) if defined is not None else None
    contradiction = definition.mismatch(bundle.verified.statics) if definition else None
    twin = defined.twin_of(key.task) if defined is not None and definition is None else None
    if contradiction is not None or twin is not None:
        plan.action, plan.outcome = "refused", "refused"
        plan.detail = (
            f"contradicts the definition of task {key.task} on {base}: {contradiction}"
            if twin is None
            else f"task {key.task} is a twin of the task {twin} defined on {base} (the same "
            f"name but for letter case or Unicode forms): collect the run as task {twin}"
        ) + " (leaderboard/tasks.json, kept by the maintainers)"
        return Decision(plan, expected=expected)
    seen = triage(bundle, view, create_pr=options.create_pr)
    if seen == "on-base":
        plan.action, plan.outcome = "unchanged", "already-there"
        plan.detail = f"already on {base}" if options.create_pr else None
        return Decision(plan, expected=expected)
    if seen == "repair":
        plan.action = "repair"
        plan.detail = "the archive is there; its sidecar or rows are not"
        row = _row(bundle, view.published.get(bundle.bundle_id, published_at))
        return Decision(plan, row=row, expected=expected)
    if seen == "in-pr":
        plan.action, plan.outcome = "unchanged", "already-there"
        plan.detail = f"already proposed in pull request #{view.pr_num}"
        return Decision(plan, expected=expected)
    old = None
    if seen == "changed":
        on_base = view.base_files[bundle.repo_archive]
        old = evidence.old_sidecar
        _judge_change(plan, on_base, old, evidence.extension_problem, options, base)
        if plan.action == "extends" and old is not None:
            rows = (old.coverage.rows_present, bundle.sidecar.coverage.rows_present)
            plan.detail = f"extends the bundle on {base} ({rows[0]} -> {rows[1]} rows)"
    if plan.action not in VERB:
        return Decision(plan, expected=expected)
    return Decision(
        plan,
        row=_row(bundle, published_at),
        proposal=_proposal(bundle, plan, old),
        expected=expected,
    )


def _judge_change(
    plan: BundlePlan,
    on_base: RemoteFile,
    old: Sidecar | None,
    extension_problem: str | None,
    options: UploadOptions,
    base: str,
) -> None:
    """The Hub holds other content under this id: does this bundle extend it (a resumed run),
    or is it a conflict (a replacement with --replace)?"""
    plan.branch_sha256 = on_base.lfs_sha256 or (old.archive.sha256 if old else None)
    problem = "its sidecar on the Hub is unreadable"
    if old is not None:
        if extension_problem is None:
            plan.action = "extends"
            return
        problem = extension_problem
    if options.replace:
        plan.action = "replace"
        plan.detail = f"replaces different content on {base}: {problem}"
    else:
        plan.action, plan.outcome, plan.remedy = "conflict", "refused", "replace"
        plan.detail = f"the repository holds different content for this bundle ({problem})"


def _row(bundle: LocalBundle, published_at: str) -> TableRow:
    row = build_row(bundle.sidecar, bundle.metrics_text, published_at)
    return TableRow(**row.model_dump(), sidecar_blob_id=git_blob_id(bundle.sidecar_data))


def _proposal(bundle: LocalBundle, plan: BundlePlan, old: Sidecar | None) -> ProposedBundle:
    sidecar = bundle.sidecar
    changed = plan.action in ("extends", "replace")
    differences: list[ClaimDifference] = []
    if changed and old:  # only a changed bundle is compared (bundler.hub.publish.differences)
        from bundler.hub.publish.differences import claim_differences

        differences = claim_differences(old, sidecar)
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
        old_sha256=plan.branch_sha256 if changed else None,
        old_submitter=old.submitter.name if changed and old else None,
        old_predictions=old.predictions.count if changed and old else None,
        differences=differences,
        warnings=sidecar.warnings,
    )


def batches(pending: list[LocalBundle], *, to_branch: bool) -> list[list[LocalBundle]]:
    """The commits that publish `pending`, each within MAX_FILES_PER_COMMIT files: the bundles'
    own files and, on a branch, the shared tables and card and one table per task touched."""
    cut: list[list[LocalBundle]] = []
    files = 0
    tasks: set[str] = set()
    for bundle in pending:
        task = bundle.key.task
        cost = FILES_PER_BUNDLE + (1 if to_branch and task not in tasks else 0)
        if not cut or files + cost > MAX_FILES_PER_COMMIT:
            cut.append([])
            files, tasks = (SHARED_FILES if to_branch else 0), set()
            cost = FILES_PER_BUNDLE + (1 if to_branch else 0)
        cut[-1].append(bundle)
        files += cost
        tasks.add(task)
    return cut


def commit_message(
    todo: list[LocalBundle], plans: dict[str, BundlePlan], message: str | None
) -> tuple[str, str]:
    """The summary and description of a commit to a branch that publishes `todo`."""
    actions = [plans[bundle.bundle_id].action for bundle in todo]
    counts = [
        f"{VERB[action].removesuffix('s')} {actions.count(action)}"
        for action in VERB
        if action in actions
    ]
    listed = ", ".join(bundle.bundle_id for bundle in todo)
    summary = message or f"{', '.join(counts).capitalize()} statics bundle(s): {listed}"
    if len(summary) > 200:
        summary = summary[:197] + "..."
    lines = []
    for bundle in todo:
        plan = plans[bundle.bundle_id]
        line = f"- {VERB[plan.action]} {bundle.bundle_id} ({bundle.sidecar.coverage.status})"
        if plan.branch_sha256:
            line += f": archive {plan.branch_sha256} -> {plan.sha256}"
        lines.append(line)
    return summary, "Bundles in this commit:\n\n" + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Replanned:
    """A batch judged again on a head that moved (see `replan`)."""

    todo: list[LocalBundle]
    found: list[LocalBundle]
    """Already on the Hub as planned: a commit whose answer was lost, or an identical upload."""


def replan(
    batch: list[LocalBundle],
    remote: dict[str, RemoteFile],
    plans: dict[str, BundlePlan],
    expected: dict[str, str | None],
    *,
    replace: bool,
) -> Replanned:
    """Judge a batch again on the current head's files `remote`: what landed meanwhile is
    found, a bundle someone else changed meanwhile becomes a conflict (unless --replace), and
    the rest is still to commit. Marks the conflicts in `plans`."""
    todo: list[LocalBundle] = []
    found: list[LocalBundle] = []
    for bundle in batch:
        plan = plans[bundle.bundle_id]
        if plan.outcome != "planned":
            continue
        held = remote.get(bundle.repo_archive)
        if holds(held, bundle) and (plan.action != "repair" or companions_present(bundle, remote)):
            found.append(bundle)
        elif (held.identity if held else None) != expected[bundle.bundle_id] and not replace:
            plan.action, plan.outcome, plan.remedy = "conflict", "refused", "replace"
            plan.detail = "another upload changed this bundle on the Hub meanwhile"
        else:
            todo.append(bundle)
    return Replanned(todo=todo, found=found)
