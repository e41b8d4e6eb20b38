"""Stage 7, judged: a pull request's checks as pure functions of what was read about it.

A pull request is judged by what it changes, not by what its branch holds: what the Hub's diff
of it names and what its trees show its commits changed (`bundler.hub.review.changes`, whose
`diff` check fails where the two disagree), and only the bundles whose archive it changes
(`proposed_bundles`) are reviewed. Each is classified against the target branch's copy (new,
replacement, unchanged) and held to the repository's policy and to its task's definition
(`bundler.hub.tasks.definitions`), and the PR as a whole must touch nothing but both files
(archive and sidecar) of each bundle it adds or replaces, and must not conflict. A PR that
fails `layout`, or proposes more bundles than the cap, is judged without downloading anything.
A PR is clean when every check passed.

Nothing here reads the network: `bundler.hub.review.gather` reads the PR into a
`GatheredPullRequest` (asking `layout_check`, `proposed_bundles`, `listed_size_problem`,
`verified_claim` and `classify` what to read), and `judge_pull_request` turns it into the PR's
review, so the checks can be tested on values, without a server.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field, computed_field

from bundler.core import exitcodes
from bundler.core.checks import CheckResult, exception_rate, failed, passed, warned
from bundler.core.limits import MAX_ARCHIVE_BYTES, MAX_SIDECAR_BYTES
from bundler.core.model import Model, RemedyField
from bundler.hub.client.remote import RemoteFile
from bundler.hub.repo.paths import (
    BUNDLES_DIR,
    TABLES_DIR,
    TASKS_FILE,
    bundle_ids_in,
    bundle_of_path,
    repo_archive,
    repo_paths,
    repo_sidecar,
)
from bundler.hub.review.acceptance import AcceptanceNote, acceptance_notes, clean_with
from bundler.hub.review.changes import PullRequestChanges, changed_on_target, diff_check, few
from bundler.hub.review.signing import signature_check
from bundler.hub.tasks.definitions import TaskDefinitions
from bundler.local.allowed_signers import AllowedSigners
from bundler.local.diff import BundleDiff
from bundler.local.layout import BundleId
from bundler.local.manifest import BundleClaim
from bundler.local.schema import Provenance
from bundler.local.verify import BundleReading

OPEN_STATES = ("open", "draft")
MAX_BUNDLES = 100
"""How many bundles one PR may propose before it is judged without downloading any."""

Classification = Literal["new", "replacement", "unchanged"]
CommentOutcome = Literal["not-asked", "posted", "already-posted"]
MergeOutcome = Literal["not-asked", "merged", "refused", "failed"]
RowCount = tuple[int | None, str | None]
"""A split's row count on the Hub, or None with the reason (RowCountResolver.rows)."""


# ------------------------------------------------------------------ what was gathered


class PullRequestFacts(Model):
    """What the Hub's details of a pull request say about it, as plain values; its review
    starts from them."""

    num: int
    title: str
    author: str
    status: str
    url: str
    base_branch: str
    conflicting_files: list[str] | bool | None = Field(default=None, exclude=True)
    """The Hub's own conflict report (the paths, True for some unnamed ones, or nothing), which
    the `conflicts` check judges; not part of the report."""


@dataclass(frozen=True)
class GatheredBundle:
    """What was read about one bundle the PR changes. Past a failed verification nothing more
    is read, so the fields after `reading` keep their defaults."""

    bundle: BundleId
    reading: BundleReading
    """The verifying read of the PR's copy."""
    row_count: RowCount = (None, None)
    """The row count of the split its task's definition names (RowCountResolver.rows)."""
    main: BundleReading | None = None
    """The verifying read of the target branch's copy, for a replacement whose PR copy was
    placed."""
    diff: BundleDiff | None = None
    """How the PR's copy differs from `main`, when `main` verified."""
    diff_failure: str | None = None
    """Why the two copies could not be compared, when the comparison failed."""
    staged: Path | None = None
    """Where the verified archive of the PR's copy is (its sidecar beside it): what a merge
    commits."""
    refused: str | None = None
    """Why the PR's copy was not downloaded (listed sizes the format does not allow); then
    `reading` is empty."""


@dataclass(frozen=True)
class GatheredPullRequest:
    """Everything the checks of one pull request look at."""

    facts: PullRequestFacts
    head: str
    head_files: dict[str, RemoteFile]
    """The head's files that the PR changes or that differ from the target branch's."""
    main_files: dict[str, RemoteFile]
    """The target branch's files at its tip, at the same paths."""
    changes: PullRequestChanges
    """What the PR changes, by the Hub's diff and by its trees."""
    bundles: tuple[GatheredBundle, ...] = ()
    definitions: TaskDefinitions = field(default_factory=TaskDefinitions)
    """The task definitions on the target branch."""
    signers: AllowedSigners | None = None
    """The allowed signers on the target branch; None when it names none."""
    author_orgs: frozenset[str] = frozenset()
    """The organizations the Hub lists the author in, asked only when a signing key's
    principals do not name the author."""
    max_bundles: int = MAX_BUNDLES
    at: int = field(default_factory=lambda: int(time.time()))
    """When the allowed signers are judged (seconds since the epoch): now, as the bundles would
    land if merged now; on the branch, a bundle is judged at the time it landed, as git judges
    a commit by its time."""


# ------------------------------------------------------------------------- verdicts


class BundleReview(Model):
    bundle_id: str
    classification: Classification
    sha256: str | None
    """The PR's archive sha256 as the Hub lists it."""
    branch_sha256: str | None
    """The target branch's archive sha256, for a replacement or an unchanged bundle."""
    coverage: str | None = None
    predictions: int | None = None
    submitter: str | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    diff: BundleDiff | None = None
    """For a replacement: how this PR's copy differs from the target branch's."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def clean(self) -> bool:
        return all(check.status == "passed" for check in self.checks)


class PullRequestReview(PullRequestFacts):
    head: str
    checks: list[CheckResult] = Field(default_factory=list)
    bundles: list[BundleReview] = Field(default_factory=list)
    digest: str = ""
    """sha256 of the Markdown report, which the posted comment carries to be recognised."""
    comment: CommentOutcome = "not-asked"
    merge: MergeOutcome = "not-asked"
    merge_detail: str | None = None
    merge_remedy: RemedyField = None
    """What would let a refused merge through (accepting the warnings in its way)."""
    reviewed: bool = True
    """False when anything failed while reviewing this PR (its `review` check says why)."""
    merge_commit: str | None = None
    """The commit that merged the PR's reviewed files, tables and card into the branch."""
    error_code: int = exitcodes.LOOK
    """The exit code the failure that stopped this PR's review or merge asks for."""
    accepted: list[str] = Field(default_factory=list)
    """The checks whose warnings the maintainer accepted for the merge (`--accept`)."""
    acceptance: list[str] = Field(default_factory=list)
    """What the report says of them: each accepted warning and by whom, each warning still in
    the way, each failure (never accepted); worded from `acceptance_notes`."""
    acceptance_notes: list[AcceptanceNote] = Field(default_factory=list, exclude=True)
    """The same as data, for the words of the posted report and of the command line, which say
    how a warning is accepted."""
    markdown: str = Field(default="", exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def clean(self) -> bool:
        return all(check.status == "passed" for check in self.checks) and all(
            bundle.clean for bundle in self.bundles
        )

    @property
    def mergeable(self) -> bool:
        """Clean, or its only findings are warnings of the accepted checks."""
        return self.reviewed and clean_with(self, self.accepted)

    @property
    def exit_code(self) -> int:
        if not self.reviewed or self.merge == "failed":
            return self.error_code
        return exitcodes.OK if self.mergeable and self.merge != "refused" else exitcodes.LOOK

    def accept(self, checks: list[str], by: str) -> None:
        """Accept the warnings of `checks` (never a failure), as `by`, for the merge."""
        self.accepted = list(checks)
        if not self.clean:
            self.acceptance_notes = acceptance_notes(self, checks, by)
            self.acceptance = [note.line for note in self.acceptance_notes]


def pull_request_review(
    facts: PullRequestFacts, *, head: str, reviewed: bool = True
) -> PullRequestReview:
    """A PR's review, before any check: what the Hub says about it, and where it stands."""
    return PullRequestReview(**dict(facts), head=head, reviewed=reviewed)


def unreviewed(facts: PullRequestFacts, reason: str, error_code: int) -> PullRequestReview:
    """The review of a PR the Hub failed to give: its failed `review` check says why."""
    pr = pull_request_review(facts, head="", reviewed=False)
    pr.checks.append(failed("review", f"could not be reviewed: {reason}"))
    pr.error_code = error_code
    return pr


def judge_pull_request(
    gathered: GatheredPullRequest, max_exception_rate: float
) -> PullRequestReview:
    """The PR's review: its own checks, then each bundle it changes."""
    facts, changes = gathered.facts, gathered.changes
    head_files, main_files = gathered.head_files, gathered.main_files
    pr = pull_request_review(facts, head=gathered.head)
    pr.checks.append(state_check(facts.status, facts.base_branch))
    pr.checks.append(diff_check(changes))
    pr.checks.append(layout_check(changes.changed, head_files, gathered.max_bundles))
    both = changed_on_target(changes, main_files)
    pr.checks.append(conflict_check(facts.conflicting_files, both, head_files, main_files))
    pr.bundles = [judge_bundle(bundle, gathered, max_exception_rate) for bundle in gathered.bundles]
    return pr


def judge_bundle(
    gathered: GatheredBundle, pr: GatheredPullRequest, max_exception_rate: float
) -> BundleReview:
    """One bundle's review: listed sizes and verification first; past them, its task's
    definition and the repository's policy."""
    bundle = gathered.bundle
    proposed = pr.head_files[repo_archive(bundle)]
    current = pr.main_files.get(repo_archive(bundle))
    review = BundleReview(
        bundle_id=str(bundle),
        classification=classify(proposed, current),
        sha256=proposed.lfs_sha256,
        branch_sha256=current.lfs_sha256 if current else None,
    )
    if gathered.refused is not None:
        review.checks.append(failed("size", gathered.refused, hint="the bundle was not downloaded"))
        return review
    reading = gathered.reading
    claim = verified_claim(reading)
    if claim is None:
        verification = reading.verification()
        review.checks.append(
            failed(
                "verification",
                verification.describe_failures() or "the bundle could not be read",
                hint="never merge a bundle that fails verification",
            )
        )
        return review
    review.checks.append(passed("verification", "archive, sidecar and every claim verified"))
    review.coverage = claim.coverage.status
    review.predictions = claim.predictions.count
    review.submitter = claim.submitter.name
    review.checks.append(task_check(bundle, claim, pr.definitions))
    signer, required = reading.verification().signer, pr.definitions.require_signature
    review.checks.append(
        signature_check(
            signer,
            pr.facts.author,
            pr.signers,
            required=required,
            author_orgs=pr.author_orgs,
            at=pr.at,
        )
    )
    review.checks.extend(policy_checks(claim, gathered.row_count, max_exception_rate))
    if gathered.main is not None:
        review.checks.append(replacement_check(review, gathered))
    return review


# ----------------------------------------------------- what the gathering asks first


def same_file(a: RemoteFile | None, b: RemoteFile | None) -> bool:
    return (a.blob_id if a else None) == (b.blob_id if b else None)


def proposed_bundles(changed: Collection[str], head_files: dict[str, RemoteFile]) -> list[BundleId]:
    """The bundles whose archive the PR adds or changes: the ones it is reviewed for."""
    in_head, _ = bundle_ids_in(head_files)
    return [bundle for bundle in in_head if repo_archive(bundle) in changed]


def classify(proposed: RemoteFile, current: RemoteFile | None) -> Classification:
    """The PR's archive against the target branch's (None: the branch has none)."""
    if current is None:
        return "new"
    return "unchanged" if same_file(proposed, current) else "replacement"


def verified_claim(reading: BundleReading) -> BundleClaim | None:
    """What the bundle claims, when it verified and its claim and sidecar were read; None when
    it is not to be judged further (nor read about)."""
    if not reading.verification().ok or reading.sidecar is None:
        return None
    return reading.claim


def listed_size_problem(bundle: BundleId, head_files: dict[str, RemoteFile]) -> str | None:
    """Why the PR's copy of `bundle` is not to be downloaded at all, from the sizes the
    listing gives: beyond what the format allows. None to download (its sidecar first)."""
    archive, sidecar = head_files[repo_archive(bundle)], head_files.get(repo_sidecar(bundle))
    if archive.size > MAX_ARCHIVE_BYTES:
        return f"{archive.path} is listed at {archive.size} bytes, above {MAX_ARCHIVE_BYTES}"
    if sidecar is not None and sidecar.size > MAX_SIDECAR_BYTES:
        return f"{sidecar.path} is listed at {sidecar.size} bytes, above {MAX_SIDECAR_BYTES}"
    return None


def claimed_size_problem(archive: RemoteFile, claimed: int | None) -> str | None:
    """The archive's listed size against the size its sidecar claims (None: unreadable
    sidecar, left to verification)."""
    if claimed is not None and claimed != archive.size:
        return f"{archive.path} is listed at {archive.size} bytes; its sidecar says {claimed}"
    return None


# ------------------------------------------------------------------- the PR's checks


def state_check(status: str, base_branch: str) -> CheckResult:
    if status not in OPEN_STATES:
        return failed("state", f"the PR is {status}")
    if status == "draft":
        return warned("state", "the PR is a draft")
    return passed("state", f"open against {base_branch}")


def layout_check(
    changed: Collection[str],
    head_files: dict[str, RemoteFile],
    max_bundles: int = MAX_BUNDLES,
) -> CheckResult:
    """Whether the PR proposes bundles and nothing else: every path it changes is the archive
    or the sidecar of a bundle (as `repo_paths` spells them, names a file system can hold),
    and of each bundle it touches it adds or replaces both files. Never README.md, the task
    definitions, anything under leaderboard/ (only the bundler's own commits write those), a
    removed bundle, a sidecar changed without its archive, or more bundles than the cap. A PR
    failing this is judged without downloading anything."""
    problems = []
    definitions = sorted(path for path in changed if path == TASKS_FILE)
    shared = sorted(
        path for path in changed if path.startswith(f"{TABLES_DIR}/") and path != TASKS_FILE
    )
    touched: dict[BundleId, set[str]] = {}
    outside: list[str] = []
    for path in sorted(set(changed) - set(definitions) - set(shared)):
        bundle = bundle_of_path(path)
        if bundle is None:
            outside.append(path)
        else:
            touched.setdefault(bundle, set()).add(path)
    if definitions:
        problems.append(f"changes the maintainers' task definitions: {TASKS_FILE}")
    if shared:
        problems.append(f"changes the leaderboard's tables: {few(shared)}")
    if outside:
        under = [p for p in outside if p.startswith(f"{BUNDLES_DIR}/")]
        others = [p for p in outside if p not in under]
        if others:
            problems.append(f"changes files no bundle owns: {few(others)}")
        if under:
            problems.append(f"changes paths that are no bundle's file: {few(under)}")
    removed = sorted(
        str(b) for b, paths in touched.items() if any(p not in head_files for p in paths)
    )
    halves = sorted(
        path
        for b, paths in touched.items()
        if str(b) not in removed
        for path in repo_paths(b)
        if path not in paths or path not in head_files
    )
    if removed:
        problems.append(f"removes bundle(s): {few(removed)}")
    if halves:
        problems.append(
            f"leaves as it is (or without) the other file of a bundle it changes: {few(halves)}"
        )
    if len(touched) > max_bundles:
        problems.append(f"proposes {len(touched)} bundles, more than the {max_bundles} allowed")
    if problems:
        return failed(
            "layout",
            "; ".join(problems),
            hint="a bundle PR adds or replaces the archive and sidecar of its bundles, nothing"
            " else; its bundles were not downloaded",
        )
    if not touched:
        return warned("layout", "the PR adds or changes no bundle")
    return passed("layout", f"only the files of its {len(touched)} bundle(s)")


def conflict_check(
    hub: list[str] | bool | None,
    both: set[str],
    head_files: dict[str, RemoteFile],
    main_files: dict[str, RemoteFile],
) -> CheckResult:
    """Conflicts the Hub reports (`hub`), and paths the target branch changed since the PR's
    base (`both`: the PR changed them too) to something other than what the PR proposes."""
    ours = {path for path in both if not same_file(head_files.get(path), main_files.get(path))}
    paths = sorted(ours | (set(hub) if isinstance(hub, list) else set()))
    if paths:
        return failed(
            "conflicts",
            f"conflicts with the target branch on {', '.join(paths)}",
            hint="the submitter must bring the PR up to date, or it is closed",
        )
    if hub is True:
        return failed("conflicts", "the Hub reports conflicting files")
    return passed("conflicts", "merges cleanly")


# --------------------------------------------------------------- one bundle's checks


def task_check(bundle: BundleId, claim: BundleClaim, definitions: TaskDefinitions) -> CheckResult:
    """The bundle against its task's definition: the dataset, split and revisions the
    maintainers accept. A task without one is warned: it would be ranked by its first bundle."""
    definition = definitions.get(bundle.task)
    twin = definitions.twin_of(bundle.task)
    if definition is None and twin is not None:
        return failed(
            "task",
            f"task {bundle.task} is a twin of the defined task {twin} (the same name but for "
            "letter case or Unicode forms)",
            hint=f"collect the run again as task {twin}",
        )
    if definition is None:
        return warned(
            "task",
            f"task {bundle.task} has no definition: ranked by its earliest bundle's first metric",
            remedy="define-task",
        )
    problem = definition.mismatch(claim.statics)
    if problem is not None:
        return failed(
            "task",
            f"not a result of task {bundle.task}: {problem}",
            hint="the task's definition names the dataset and split its results run on",
        )
    return passed(
        "task",
        f"{definition.hf_repo_id} split {definition.split}, ranked by {definition.metric}",
    )


def policy_checks(claim: BundleClaim, row_count: RowCount, limit: float) -> list[CheckResult]:
    """The repository's policy on a verified bundle's claim; `limit` is the share of
    predictions that may have raised."""
    checks = [coverage_check(claim), dataset_rows_check(claim, row_count), pin_check(claim)]
    checks.append(harness_check(claim))
    checks.append(exception_check(claim, limit))
    checks.append(submitter_check(claim))
    return checks


def coverage_check(claim: BundleClaim) -> CheckResult:
    coverage = claim.coverage
    of = f" of {coverage.expected_rows}" if coverage.expected_rows is not None else ""
    detail = f"{coverage.status}: {coverage.rows_present}{of} rows"
    if coverage.status == "complete":
        return passed("coverage", detail)
    return warned("coverage", detail, hint="not a result on the whole dataset split")


def dataset_rows_check(claim: BundleClaim, row_count: RowCount) -> CheckResult:
    """Coverage judged again, against the row count on the Hub of the split its task's
    definition names (the gathering reads it): a submitter can pass `--expect` equal to the
    rows they ran."""
    count, why = row_count
    coverage = claim.coverage
    statics = claim.statics
    where = f"{statics.hf_repo_id}@{statics.revision_label} split {statics.dataset_split}"
    if count is None:
        return warned("dataset-rows", why or "row count not resolved")
    if coverage.status == "complete" and (
        coverage.expected_rows != count or coverage.rows_present != count
    ):
        return failed(
            "dataset-rows",
            f"claims complete with {coverage.rows_present} of {coverage.expected_rows} rows;"
            f" {where} has {count}",
            hint="the run does not cover the whole split",
        )
    if coverage.rows_present < count:
        return warned("dataset-rows", f"{coverage.rows_present} of the {count} rows of {where}")
    return passed("dataset-rows", f"all {count} rows of {where}")


def pin_check(claim: BundleClaim) -> CheckResult:
    statics = claim.statics
    if not statics.is_pinned:
        return warned(
            "pin",
            f"{statics.hf_repo_id} is unpinned: the rows it ran on cannot be pinned down",
            hint="run the harness with a pinned dataset revision",
        )
    return passed("pin", f"{statics.hf_repo_id}@{statics.resolved_revision}")


def harness_check(claim: BundleClaim) -> CheckResult:
    provenance = Provenance.model_validate(claim.provenance)
    described = f"gptnt {provenance.gptnt_version} @ {provenance.git_sha}"
    if provenance.is_dirty:
        return warned(
            "harness",
            f"{described}: the harness tree had uncommitted changes",
            hint="the version alone does not say what ran",
        )
    return passed("harness", described)


def exception_check(claim: BundleClaim, limit: float) -> CheckResult:
    counts = claim.predictions
    rate = exception_rate(counts.exceptions, counts.count)
    detail = f"{counts.exceptions} of {counts.count} predictions raised ({rate:.1%})"
    if rate > limit:
        return failed("exceptions", f"{detail}, above {limit:.1%}")
    return passed("exceptions", detail)


def submitter_check(claim: BundleClaim) -> CheckResult:
    name = (claim.submitter.name or "").strip()
    if not name:
        return warned("submitter", "no submitter name", remedy="name-submitter")
    return passed("submitter", name)


def replacement_check(review: BundleReview, gathered: GatheredBundle) -> CheckResult:
    """The copy on the target branch (`gathered.main`, verified like any other) compared with
    the PR's by `bundler diff`'s comparison; `review.diff` is set when they could be compared.
    Always a warning: a maintainer decides."""
    assert gathered.main is not None, "a replacement check needs the target branch's copy"
    old = gathered.main.claim
    if gathered.diff is not None:
        review.diff = gathered.diff
        compared = gathered.diff.verdict
    elif gathered.diff_failure is not None:
        compared = f"not compared: {gathered.diff_failure}"
    else:
        compared = "not compared: the copy on the target branch fails verification"
    before = (old.submitter.name if old else None) or "no one named"
    after = review.submitter or "no one named"
    return warned(
        "replacement",
        f"replaces the copy on the target branch (sha256 {(review.branch_sha256 or '?')[:12]}"
        f" → {(review.sha256 or '?')[:12]}, submitter {before} → {after}): {compared}",
        hint="a maintainer decides whether the new result supersedes the old one",
    )
