"""Stage 7, judged: a pull request's checks as pure functions of what was read about it.

A pull request is judged by what it changes, not by what its branch holds: `changed_paths`
compares the listing of its base (the newest commit of its history that is also on the target
branch) with its head's, and only the bundles whose archive differs (`proposed_bundles`) are
reviewed. Each is classified against the target branch's copy (new, replacement, unchanged) and
held to the repository's policy, and the PR as a whole must touch nothing but the files of the
bundles whose archive it adds or replaces and must not conflict. A PR is clean when every check
passed.

Nothing here reads the network: `bundler.hub.review_gather` reads the PR into a
`GatheredPullRequest` (asking `proposed_bundles`, `verified_claim`, `unreadable_row` and
`classify` what to read), and `judge_pull_request` turns it into the PR's review, so the checks
can be tested on values, without a server.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import ConfigDict, Field, computed_field

from bundler.core import exitcodes
from bundler.core.checks import CheckResult, failed, passed, warned
from bundler.core.errors import RowError
from bundler.core.model import Model
from bundler.hub.acceptance import acceptance_lines as acceptance_lines  # --accept
from bundler.hub.acceptance import clean_with as clean_with
from bundler.hub.layout import bundle_ids_in, repo_archive, repo_paths, repo_row
from bundler.hub.remote import RemoteFile, git_blob_id
from bundler.hub.rows import BundleRow, build_row, read_row, row_files, utc_timestamp
from bundler.hub.session import MAX_SMALL_FILE_BYTES
from bundler.local.diff import BundleDiff
from bundler.local.layout import BundleId
from bundler.local.manifest import BundleClaim
from bundler.local.schema import Provenance
from bundler.local.verify import BundleReading

OPEN_STATES = ("open", "draft")
PUBLISHED_AT_SKEW = timedelta(minutes=5)
"""How far a submitter's clock may be from the Hub's: `published_at` comes from the one, commit
dates from the other. Clocks kept by NTP agree within a second; five minutes spare a machine
that drifts, and bound what a forged date within them can gain."""

Classification = Literal["new", "replacement", "unchanged"]
CommentOutcome = Literal["not-asked", "posted", "already-posted"]
MergeOutcome = Literal["not-asked", "merged", "refused", "failed"]
RowCount = tuple[int | None, str | None]
"""A split's row count on the Hub, or None with the reason (RowCountResolver.rows)."""


# ------------------------------------------------------------------ what was gathered


class PublicationWindow(Model):
    """When the rows of a PR can honestly say their bundle was published. upload stamps
    `published_at` (rows.utc_timestamp) as it starts, before it commits the rows, so no row is
    dated after the PR's head commit. No commit is sure to come before the stamp, though:
    upload reads the target branch only after stamping, then verifies, uploads the archives
    and, when the branch moved (412), reads it again. A date before the PR's base commit is
    therefore what a backdated row looks like (an earlier date ranks a bundle ahead of the
    others on the card) but also what a long upload can give, so it is warned, not failed: the
    PR is not clean, and a maintainer judges."""

    model_config = ConfigDict(frozen=True)

    earliest: datetime | None
    """The date of the PR's base commit (None when the PR has no base on the target branch)."""
    latest: datetime
    """The date of the PR's head commit."""


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
    row_data: bytes | None = None
    """The PR's row file, read when `unreadable_row` had nothing against it."""
    row_count: RowCount = (None, None)
    """The row count of the split the bundle claims to have run on."""
    main: BundleReading | None = None
    """The verifying read of the target branch's copy, for a replacement whose PR copy was
    placed."""
    diff: BundleDiff | None = None
    """How the PR's copy differs from `main`, when `main` verified."""
    diff_failure: str | None = None
    """Why the two copies could not be compared, when the comparison failed."""


@dataclass(frozen=True)
class GatheredPullRequest:
    """Everything the checks of one pull request look at."""

    facts: PullRequestFacts
    head: str
    base: str | None
    """The commit the PR branched from (None when it is not on the target branch any more)."""
    window: PublicationWindow
    head_files: dict[str, RemoteFile]
    base_files: dict[str, RemoteFile]
    main_files: dict[str, RemoteFile]
    """The target branch's files at its tip."""
    bundles: tuple[GatheredBundle, ...] = ()


# ------------------------------------------------------------------------- verdicts


class BundleReview(Model):
    bundle_id: str
    classification: Classification
    sha256: str | None
    """The PR's archive sha256 as the Hub lists it."""
    main_sha256: str | None
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
    base: str | None
    """The commit the PR branched from (None when it is not on the target branch any more)."""
    checks: list[CheckResult] = Field(default_factory=list)
    bundles: list[BundleReview] = Field(default_factory=list)
    digest: str = ""
    """sha256 of the Markdown report, which the posted comment carries to be recognised."""
    comment: CommentOutcome = "not-asked"
    merge: MergeOutcome = "not-asked"
    merge_detail: str | None = None
    reviewed: bool = True
    """False when the Hub failed while reading this PR (its `review` check says why)."""
    error_code: int = exitcodes.LOOK
    """The exit code the failure that stopped this PR's review or merge asks for."""
    markdown: str = Field(default="", exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def clean(self) -> bool:
        return all(check.status == "passed" for check in self.checks) and all(
            bundle.clean for bundle in self.bundles
        )

    @property
    def exit_code(self) -> int:
        if not self.reviewed or self.merge == "failed":
            return self.error_code
        return exitcodes.OK if self.clean and self.merge != "refused" else exitcodes.LOOK


def pull_request_review(
    facts: PullRequestFacts, *, head: str, base: str | None, reviewed: bool = True
) -> PullRequestReview:
    """A PR's review, before any check: what the Hub says about it, and where it stands."""
    return PullRequestReview(**dict(facts), head=head, base=base, reviewed=reviewed)


def unreviewed(facts: PullRequestFacts, reason: str, error_code: int) -> PullRequestReview:
    """The review of a PR the Hub failed to give: its failed `review` check says why."""
    pr = pull_request_review(facts, head="", base=None, reviewed=False)
    pr.checks.append(failed("review", f"could not be reviewed: {reason}"))
    pr.error_code = error_code
    return pr


def judge_pull_request(
    gathered: GatheredPullRequest, max_exception_rate: float
) -> PullRequestReview:
    """The PR's review: its own checks, then each bundle it changes."""
    facts = gathered.facts
    head_files, base_files, main_files = (
        gathered.head_files,
        gathered.base_files,
        gathered.main_files,
    )
    pr = pull_request_review(facts, head=gathered.head, base=gathered.base)
    changed = changed_paths(base_files, head_files)
    on_main = changed_paths(base_files, main_files)
    pr.checks.append(state_check(facts.status, facts.base_branch, gathered.base is not None))
    pr.checks.append(layout_check(changed, base_files, head_files))
    pr.checks.append(
        conflict_check(facts.conflicting_files, changed & on_main, head_files, main_files)
    )
    pr.bundles = [judge_bundle(bundle, gathered, max_exception_rate) for bundle in gathered.bundles]
    return pr


def judge_bundle(
    gathered: GatheredBundle, pr: GatheredPullRequest, max_exception_rate: float
) -> BundleReview:
    """One bundle's review: verification first; past it, its row and the repository's policy."""
    bundle = gathered.bundle
    proposed = pr.head_files[repo_archive(bundle)]
    current = pr.main_files.get(repo_archive(bundle))
    review = BundleReview(
        bundle_id=str(bundle),
        classification=classify(proposed, current),
        sha256=proposed.lfs_sha256,
        main_sha256=current.lfs_sha256 if current else None,
    )
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
    checked, row = row_check(bundle, pr.head_files, reading, gathered.row_data)
    review.checks.append(checked)
    if row is not None:
        review.checks.append(published_at_check(row, pr.window))
    review.checks.extend(policy_checks(claim, gathered.row_count, max_exception_rate))
    if gathered.main is not None:
        review.checks.append(replacement_check(review, gathered))
    return review


# ----------------------------------------------------- what the gathering asks first


def same_file(a: RemoteFile | None, b: RemoteFile | None) -> bool:
    return (a.blob_id if a else None) == (b.blob_id if b else None)


def changed_paths(before: dict[str, RemoteFile], after: dict[str, RemoteFile]) -> set[str]:
    """Paths added, removed or modified between two listings."""
    return {
        path
        for path in before.keys() | after.keys()
        if not same_file(before.get(path), after.get(path))
    }


def proposed_bundles(changed: set[str], head_files: dict[str, RemoteFile]) -> list[BundleId]:
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


def unreadable_row(bundle: BundleId, head_files: dict[str, RemoteFile]) -> CheckResult | None:
    """Why the PR's row of `bundle` is not read (its failed `row` check); None to read it."""
    path = repo_row(bundle)
    remote = head_files.get(path)
    if remote is None:
        return failed("row", f"{path} is missing", hint="re-run bundler upload --create-pr")
    if remote.size > MAX_SMALL_FILE_BYTES:
        return failed("row", f"{path} is implausibly large ({remote.size} bytes)")
    return None


# ------------------------------------------------------------------- the PR's checks


def state_check(status: str, base_branch: str, base_found: bool) -> CheckResult:
    if status not in OPEN_STATES:
        return failed("state", f"the PR is {status}")
    if not base_found:
        return warned(
            "state",
            f"the PR's history shares no commit with {base_branch}; compared with its head",
            hint="the branch was rewritten since the PR was opened",
        )
    if status == "draft":
        return warned("state", "the PR is a draft")
    return passed("state", f"open against {base_branch}")


def layout_check(
    changed: set[str], base_files: dict[str, RemoteFile], head_files: dict[str, RemoteFile]
) -> CheckResult:
    """Whether the PR changes anything but the bundles whose archive it adds or changes: a
    bundle PR touches only the paths those bundles own, never README.md or another shared
    file, nor the sidecar or rows of a bundle whose archive it leaves as it is. Such a bundle is
    not reviewed, so nothing else would check those files, and its rows' `published_at` ranks
    it on the leaderboard."""
    in_head, _ = bundle_ids_in(head_files)
    in_base, _ = bundle_ids_in(base_files)
    bundles = {*in_head, *in_base}
    owned = {path for bundle in bundles for path in repo_paths(bundle)}
    proposed = {
        path for bundle in bundles if repo_archive(bundle) in changed for path in repo_paths(bundle)
    }
    touched = proposed_bundles(changed, head_files)
    outside = sorted(path for path in changed if path not in owned)
    others = sorted(path for path in changed & owned if path not in proposed)
    removed = [str(b) for b in in_base if repo_archive(b) in changed and b not in in_head]
    problems = []
    if outside:
        problems.append(f"changes files no bundle owns: {', '.join(outside)}")
    if others:
        problems.append(
            f"changes the files of bundle(s) whose archive it does not change: {', '.join(others)}"
        )
    if removed:
        problems.append(f"removes bundle(s): {', '.join(removed)}")
    if problems:
        return failed(
            "layout",
            "; ".join(problems),
            hint="a bundle PR changes only the files of the bundles it adds or replaces",
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


def row_check(
    bundle: BundleId,
    head_files: dict[str, RemoteFile],
    reading: BundleReading,
    data: bytes | None,
) -> tuple[CheckResult, BundleRow | None]:
    """The viewer's rows must say what the verified bundle says: nothing else verifies
    them, and they are what people read. Only `published_at` is the submitter's to set
    (the `published-at` check judges it), so the row is returned when it is the bundle's.
    `data` is the row file as read (the gathering reads it unless `unreadable_row` objects)."""
    path = repo_row(bundle)
    problem = unreadable_row(bundle, head_files)
    if problem is not None:
        return problem, None
    assert data is not None, f"{path} was listed but not read"
    assert reading.sidecar is not None and reading.metrics_text is not None
    try:
        row = read_row(data)
    except RowError as error:
        return failed("row", f"{path}: {error.message}"), None
    expected = build_row(reading.sidecar, reading.metrics_text, row.published_at)
    hint = "the viewer would show what the bundle does not back"
    differing = [
        name for name in BundleRow.model_fields if getattr(row, name) != getattr(expected, name)
    ]
    if differing:
        detail = f"{path} differs from the bundle on {', '.join(differing)}"
        return failed("row", detail, hint=hint), None
    wrong = [
        file_path
        for file_path, content in row_files(expected).items()
        if file_path not in head_files or head_files[file_path].blob_id != git_blob_id(content)
    ]
    if wrong:
        return failed("row", f"not the bundle's row: {', '.join(wrong)}", hint=hint), None
    return passed("row", "the viewer's rows match the bundle"), row


def published_at_check(row: BundleRow, window: PublicationWindow) -> CheckResult:
    """The row's `published_at` against the window the PR's commits give (PublicationWindow
    says why a date after it fails and a date before it is only warned)."""
    published, shown = row.published, row.published_at
    if published > window.latest + PUBLISHED_AT_SKEW:
        return failed(
            "published-at",
            f"{shown} is after the PR's head commit ({utc_timestamp(window.latest)})",
            hint="upload dates a row when it publishes it, never in the future",
        )
    if window.earliest is not None and published < window.earliest - PUBLISHED_AT_SKEW:
        return warned(
            "published-at",
            f"{shown} is before the PR's base commit ({utc_timestamp(window.earliest)})",
            hint="an earlier date ranks the bundle ahead of others; only a long upload explains it",
        )
    return passed("published-at", shown)


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
    """Coverage judged again, against the pinned split's row count on the Hub: a submitter
    can pass `--expect` equal to the rows they ran."""
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
    rate = counts.exceptions / counts.count if counts.count else 0.0
    detail = f"{counts.exceptions} of {counts.count} predictions raised ({rate:.1%})"
    if rate > limit:
        return failed("exceptions", f"{detail}, above {limit:.1%}")
    return passed("exceptions", detail)


def submitter_check(claim: BundleClaim) -> CheckResult:
    name = (claim.submitter.name or "").strip()
    if not name:
        return warned("submitter", "no submitter name", hint="collect with --submitter-name")
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
        f"replaces the copy on the target branch (sha256 {(review.main_sha256 or '?')[:12]}"
        f" → {(review.sha256 or '?')[:12]}, submitter {before} → {after}): {compared}",
        hint="a maintainer decides whether the new result supersedes the old one",
    )
