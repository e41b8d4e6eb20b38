"""Stage 7: review the pull requests of a dataset repository, and merge the clean ones.

A pull request is judged by what it changes, not by what its branch holds: its base is the
newest commit of its history that is also on the target branch, and only the bundles whose
files differ between that base and the PR's head are fetched, each into a temporary staging
folder with download's containment and verified there. Each is then classified against the
target branch's copy (new, replacement, unchanged) and held to the repository's policy, and the
PR as a whole must touch nothing but the files of the bundles whose archive it adds or replaces
and must not conflict. A PR is clean when every check passed; only a clean PR is merged, and
the dataset card is regenerated on the target branch afterwards (PRs never carry it).
Submitters can push to their PR at any time, so the head is read again right before merging
and a PR that moved is not merged.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Literal

from huggingface_hub import GitCommitInfo, HfApi, get_token
from huggingface_hub.community import DiscussionComment, DiscussionWithDetails
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
from pydantic import ConfigDict, Field, SecretStr, computed_field

from bundler.core import exitcodes
from bundler.core.checks import CheckResult, failed, passed, warned
from bundler.core.errors import (
    BundlerError,
    HubAccessError,
    HubError,
    RowError,
    UsageError,
    WriteTokenRequired,
)
from bundler.core.model import Model
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import bundler_version
from bundler.hub.access import require_review
from bundler.hub.download import FetchedBundle, fetch_verified
from bundler.hub.layout import bundle_ids_in, repo_archive, repo_paths, repo_row
from bundler.hub.markdown import markdown_template
from bundler.hub.refresh import CardRefresh, refresh_card
from bundler.hub.remote import RemoteFile, git_blob_id
from bundler.hub.rowcount import RowCountResolver
from bundler.hub.rows import BundleRow, build_row, read_row, row_files, utc_timestamp
from bundler.hub.session import MAX_SMALL_FILE_BYTES, REPO_TYPE, HubSession, status_of
from bundler.local.diff import BundleDiff, diff_verified
from bundler.local.layout import TEMP_PREFIX, BundleId
from bundler.local.manifest import BundleClaim
from bundler.local.schema import Provenance
from bundler.local.verify import BundleReading

MAX_EXCEPTION_RATE = 0.05
"""Default share of predictions that may have raised an exception in the harness."""
REVIEW_TEMPLATE = "review.md.j2"
MARKER = re.compile(r"<!-- bundler-review sha256:([0-9a-f]{64}) -->")
OPEN_STATES = ("open", "draft")
PUBLISHED_AT_SKEW = timedelta(minutes=5)
"""How far a submitter's clock may be from the Hub's: `published_at` comes from the one, commit
dates from the other. Clocks kept by NTP agree within a second; five minutes spare a machine
that drifts, and bound what a forged date within them can gain."""

Classification = Literal["new", "replacement", "unchanged"]
CommentOutcome = Literal["not-asked", "posted", "already-posted"]
MergeOutcome = Literal["not-asked", "merged", "refused", "failed"]


class ReviewOptions(Model):
    model_config = ConfigDict(frozen=True)

    repo_id: str
    pull_requests: list[int] = Field(default_factory=list)
    comment: bool = False
    merge: bool = False
    max_exception_rate: float = Field(default=MAX_EXCEPTION_RATE, ge=0, le=1)
    token: SecretStr | None = None


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


class PullRequestReview(Model):
    num: int
    title: str
    author: str
    status: str
    url: str
    base_branch: str
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


class ReviewReport(Model):
    repo_id: str
    max_exception_rate: float
    pull_requests: list[PullRequestReview] = Field(default_factory=list)
    card: CardRefresh | None = None
    card_error: str | None = None
    """Why the dataset card could not be regenerated after a merge."""
    card_error_code: int = exitcodes.LOOK

    @property
    def exit_code(self) -> int:
        """0 all clean (and merged where asked), 75 when only temporary Hub failures stood in
        the way (a retry may get past them), else 1."""
        codes = [pr.exit_code for pr in self.pull_requests]
        if self.card_error is not None:
            codes.append(self.card_error_code)
        return exitcodes.combine(*codes)


def review(options: ReviewOptions, progress: ProgressSink | None = None) -> ReviewReport:
    """Review (and with the options, comment on and merge) the repository's pull requests.
    Raises WriteTokenRequired before doing anything when a comment or a merge is asked for
    without a write token."""
    return Reviewer(options, progress).run()


# ---------------------------------------------------------------------------- the reviewer


class Reviewer:
    def __init__(self, options: ReviewOptions, progress: ProgressSink | None = None) -> None:
        self.options = options
        self.progress = progress or NoProgress()
        self.token = options.token.get_secret_value() if options.token else None
        self.session = HubSession(options.repo_id, token=self.token)
        self.row_counts = RowCountResolver(self.token)

    @property
    def api(self) -> HfApi:
        return self.session.api

    def run(self) -> ReviewReport:
        reviewer = self._writer() if self.options.comment or self.options.merge else None
        if not self.session.dataset_exists():
            raise HubAccessError(
                f"dataset {self.options.repo_id} was not found or is not visible with this token",
                hint="check --repo, and that the token can see the repository",
            )
        report = ReviewReport(
            repo_id=self.options.repo_id, max_exception_rate=self.options.max_exception_rate
        )
        merged_into: set[str] = set()
        try:
            with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}review-") as work:
                for details in self._pull_requests():
                    pr = self._review_or_report(details, Path(work) / f"pr-{details.num}")
                    pr.markdown = render_markdown(report, pr)
                    pr.digest = hashlib.sha256(pr.markdown.encode("utf-8")).hexdigest()
                    report.pull_requests.append(pr)
                    if not pr.reviewed:
                        continue  # nothing to say on the PR, and nothing to merge
                    if reviewer is not None and self.options.comment:
                        self._comment(pr, reviewer)
                    if self.options.merge:
                        self._merge(pr)
                        if pr.merge == "merged":
                            merged_into.add(pr.base_branch)
        finally:  # merged PRs never leave a stale card behind, whatever happened after
            for branch in sorted(merged_into):
                try:
                    report.card = refresh_card(self.session, branch)
                except BundlerError as error:
                    report.card_error, report.card_error_code = str(error), error.exit_code
        return report

    def _review_or_report(self, details: DiscussionWithDetails, work: Path) -> PullRequestReview:
        """One PR's review; a Hub failure on this PR is its failed `review` check, so the other
        PRs are still reviewed (access problems stop everything: they concern them all)."""
        try:
            return self._review(details, work)
        except HubError as error:
            if isinstance(error, HubAccessError):
                raise
            pr = _pull_request(details, head="", base=None, reviewed=False)
            pr.checks.append(failed("review", f"could not be reviewed: {error}"))
            pr.error_code = error.exit_code
            return pr
        finally:
            shutil.rmtree(work, ignore_errors=True)  # one PR's bundles on disk at a time

    def _writer(self) -> str:
        """The account a write token belongs to; WriteTokenRequired for none or a read token."""
        options = self.options
        asked = tuple(
            flag for flag, on in (("--comment", options.comment), ("--merge", options.merge)) if on
        )
        if (self.token or get_token()) is None:
            raise WriteTokenRequired("missing", asked)
        rights = self.session.rights()
        if rights.role == "read":
            raise WriteTokenRequired("read-only", asked)
        require_review(rights, comment=options.comment, merge=options.merge)  # hub.access
        return rights.user

    def _pull_requests(self) -> list[DiscussionWithDetails]:
        """Every PR to review, all looked up before any is reviewed, so a wrong number stops
        the command before it changed anything."""
        nums = self.options.pull_requests
        if not nums:
            listing = self.session.call(
                "listing pull requests",
                lambda: list(
                    self.api.get_repo_discussions(
                        self.options.repo_id,
                        discussion_type="pull_request",
                        discussion_status="open",
                        repo_type=REPO_TYPE,
                    )
                ),
            )
            nums = sorted(d.num for d in listing if d.status in OPEN_STATES)
        found = [self._details(num) for num in dict.fromkeys(nums)]
        for details in found:
            if not details.is_pull_request:
                raise UsageError(
                    f"#{details.num} in {self.options.repo_id} is a discussion, not a PR"
                )
        return found

    def _details(self, num: int) -> DiscussionWithDetails:
        def fetch() -> DiscussionWithDetails | None:
            try:
                return self.api.get_discussion_details(
                    self.options.repo_id, num, repo_type=REPO_TYPE
                )
            except HfHubHTTPError as error:
                if status_of(error) == 404 and not isinstance(error, RepositoryNotFoundError):
                    return None
                raise

        details = self.session.call(f"reading PR #{num}", fetch)
        if details is None:
            raise UsageError(f"{self.options.repo_id} has no pull request #{num}")
        return details

    # ----------------------------------------------------------------------- one PR

    def _review(self, details: DiscussionWithDetails, work: Path) -> PullRequestReview:
        session = self.session
        base_branch = _base_branch(details)
        head = session.head(f"refs/pr/{details.num}")
        tip = session.head(base_branch)
        pr_history = self._history(head)
        on_target = {commit.commit_id for commit in self._history(tip)}
        fork = next((commit for commit in pr_history if commit.commit_id in on_target), None)
        base = fork.commit_id if fork else None
        window = PublicationWindow(
            earliest=fork.created_at if fork else None, latest=pr_history[0].created_at
        )
        head_files = session.list_files("", head)
        main_files = session.list_files("", tip)
        base_files = session.list_files("", base) if base not in (None, tip) else main_files
        pr = _pull_request(details, head=head, base=base)
        changed = _changed(base_files, head_files)
        on_main = _changed(base_files, main_files)
        pr.checks.append(_state_check(details.status, base_branch, base is not None))
        touched, layout = _layout_check(changed, base_files, head_files)
        pr.checks.append(layout)
        pr.checks.append(_conflict_check(details, changed & on_main, head_files, main_files))
        self.progress.begin(f"reviewing PR #{details.num}", len(touched))
        for bundle in touched:
            pr.bundles.append(
                self._review_bundle(bundle, head, head_files, tip, main_files, window, work)
            )
            self.progress.advance()
        return pr

    def _history(self, revision: str) -> list[GitCommitInfo]:
        """The commits of `revision`, newest (the revision itself) first. The PR's base is the
        newest commit of its history that the target branch also has."""
        return self.session.call(
            "reading the commit history",
            lambda: self.api.list_repo_commits(
                self.options.repo_id, repo_type=REPO_TYPE, revision=revision
            ),
        )

    # ------------------------------------------------------------------- one bundle

    def _review_bundle(
        self,
        bundle: BundleId,
        head: str,
        head_files: dict[str, RemoteFile],
        tip: str,
        main_files: dict[str, RemoteFile],
        window: PublicationWindow,
        work: Path,
    ) -> BundleReview:
        proposed = head_files[repo_archive(bundle)]
        current = main_files.get(repo_archive(bundle))
        classification: Classification = (
            "new" if current is None else "unchanged" if _same(proposed, current) else "replacement"
        )
        review = BundleReview(
            bundle_id=str(bundle),
            classification=classification,
            sha256=proposed.lfs_sha256,
            main_sha256=current.lfs_sha256 if current else None,
        )
        fetched, reading = self._fetch(bundle, head, head_files, work / "pr")
        verification = reading.verification()
        if not verification.ok or reading.claim is None or reading.sidecar is None:
            review.checks.append(
                failed(
                    "verification",
                    verification.describe_failures() or "the bundle could not be read",
                    hint="never merge a bundle that fails verification",
                )
            )
            return review
        review.checks.append(passed("verification", "archive, sidecar and every claim verified"))
        claim = reading.claim
        review.coverage = claim.coverage.status
        review.predictions = claim.predictions.count
        review.submitter = claim.submitter.name
        row_check, row = self._row_check(bundle, head, head_files, reading)
        review.checks.append(row_check)
        if row is not None:
            review.checks.append(_published_at_check(row, window))
        review.checks.extend(self._policy_checks(claim))
        if classification == "replacement" and fetched.archive is not None:
            review.checks.append(
                self._replacement_check(
                    bundle, review, tip, main_files, Path(fetched.archive), reading, work
                )
            )
        return review

    def _fetch(
        self, bundle: BundleId, commit: str, listed: dict[str, RemoteFile], into: Path
    ) -> tuple[FetchedBundle, BundleReading]:
        """download's fetch: staged, verified, then placed (or kept apart in .rejected/)."""
        into.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=into, prefix=f"{TEMP_PREFIX}staging-"))
        return fetch_verified(
            self.session, bundle, commit, set(listed), staging, into, self.progress
        )

    def _row_check(
        self,
        bundle: BundleId,
        head: str,
        head_files: dict[str, RemoteFile],
        reading: BundleReading,
    ) -> tuple[CheckResult, BundleRow | None]:
        """The viewer's rows must say what the verified bundle says: nothing else verifies
        them, and they are what people read. Only `published_at` is the submitter's to set
        (the `published-at` check judges it), so the row is returned when it is the bundle's."""
        path = repo_row(bundle)
        remote = head_files.get(path)
        if remote is None:
            missing = failed("row", f"{path} is missing", hint="re-run bundler upload --create-pr")
            return missing, None
        if remote.size > MAX_SMALL_FILE_BYTES:
            return failed("row", f"{path} is implausibly large ({remote.size} bytes)"), None
        data = self.session.read_small_file(path, head)
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

    def _policy_checks(self, claim: BundleClaim) -> list[CheckResult]:
        checks = [_coverage_check(claim), self._dataset_rows_check(claim), _pin_check(claim)]
        checks.append(_harness_check(claim))
        checks.append(_exception_check(claim, self.options.max_exception_rate))
        checks.append(_submitter_check(claim))
        return checks

    def _dataset_rows_check(self, claim: BundleClaim) -> CheckResult:
        """Coverage judged again, against the pinned split's row count on the Hub: a submitter
        can pass `--expect` equal to the rows they ran."""
        count, why = self.row_counts.rows(claim.statics)
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

    def _replacement_check(
        self,
        bundle: BundleId,
        review: BundleReview,
        tip: str,
        main_files: dict[str, RemoteFile],
        proposed: Path,
        proposed_reading: BundleReading,
        work: Path,
    ) -> CheckResult:
        """The copy on the target branch is fetched too (it is verified like any other) and
        the two are compared with `bundler diff`'s comparison, of the readings already made."""
        fetched, reading = self._fetch(bundle, tip, main_files, work / "main")
        old = reading.claim
        if fetched.outcome == "downloaded" and fetched.archive is not None:
            try:
                review.diff = diff_verified(
                    Path(fetched.archive), reading, proposed, proposed_reading
                )
                compared = review.diff.verdict
            except BundlerError as error:
                compared = f"not compared: {error.message}"
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

    # ------------------------------------------------------------- comment and merge

    def _comment(self, pr: PullRequestReview, reviewer: str) -> None:
        """Post the report, unless this account's latest report on the PR is the same one."""
        details = self._details(pr.num)
        latest = None
        for event in details.events:
            if isinstance(event, DiscussionComment) and event.author == reviewer:
                found = MARKER.search(event.content or "")
                if found:
                    latest = found.group(1)
        if latest == pr.digest:
            pr.comment = "already-posted"
            return
        body = f"{pr.markdown.rstrip()}\n\n<!-- bundler-review sha256:{pr.digest} -->\n"
        post = partial(
            self.api.comment_discussion, self.options.repo_id, pr.num, body, repo_type=REPO_TYPE
        )
        try:
            post()
        except Exception as error:
            raise self.session.describe(error, doing=f"commenting on PR #{pr.num}") from None
        pr.comment = "posted"

    def _merge(self, pr: PullRequestReview) -> None:
        if not pr.clean:
            pr.merge, pr.merge_detail = "refused", "not every check passed"
            return
        if self.session.head(f"refs/pr/{pr.num}") != pr.head:
            pr.merge, pr.merge_detail = "refused", "the PR changed while it was reviewed"
            return
        merge = partial(
            self.api.merge_pull_request, self.options.repo_id, pr.num, repo_type=REPO_TYPE
        )
        try:
            merge()
        except Exception as error:
            described = self.session.describe(error, doing=f"merging PR #{pr.num}")
            if isinstance(described, HubAccessError):
                raise described from None
            pr.merge = "refused" if status_of(error) in (400, 409) else "failed"
            pr.merge_detail, pr.error_code = described.message, described.exit_code
            return
        pr.merge = "merged"


# ----------------------------------------------------------------- checks as functions


def _same(a: RemoteFile | None, b: RemoteFile | None) -> bool:
    return (a.blob_id if a else None) == (b.blob_id if b else None)


def _base_branch(details: DiscussionWithDetails) -> str:
    return (details.target_branch or "main").removeprefix("refs/heads/")


def _pull_request(
    details: DiscussionWithDetails, *, head: str, base: str | None, reviewed: bool = True
) -> PullRequestReview:
    """A PR's review, before any check: what the Hub says about it, and where it stands."""
    return PullRequestReview(
        num=details.num,
        title=details.title,
        author=details.author,
        status=details.status,
        url=details.url,
        base_branch=_base_branch(details),
        head=head,
        base=base,
        reviewed=reviewed,
    )


def _changed(before: dict[str, RemoteFile], after: dict[str, RemoteFile]) -> set[str]:
    """Paths added, removed or modified between two listings."""
    return {
        path
        for path in before.keys() | after.keys()
        if not _same(before.get(path), after.get(path))
    }


def _state_check(status: str, base_branch: str, base_found: bool) -> CheckResult:
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


def _layout_check(
    changed: set[str], base_files: dict[str, RemoteFile], head_files: dict[str, RemoteFile]
) -> tuple[list[BundleId], CheckResult]:
    """The bundles whose archive the PR adds or changes, and whether it changes anything else:
    a bundle PR touches only the paths those bundles own, never README.md or another shared
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
    touched = [b for b in in_head if repo_archive(b) in changed]
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
        return touched, failed(
            "layout",
            "; ".join(problems),
            hint="a bundle PR changes only the files of the bundles it adds or replaces",
        )
    if not touched:
        return touched, warned("layout", "the PR adds or changes no bundle")
    return touched, passed("layout", f"only the files of its {len(touched)} bundle(s)")


def _conflict_check(
    details: DiscussionWithDetails,
    both: set[str],
    head_files: dict[str, RemoteFile],
    main_files: dict[str, RemoteFile],
) -> CheckResult:
    """Conflicts the Hub reports, and paths the target branch changed since the PR's base to
    something other than what the PR proposes."""
    ours = {path for path in both if not _same(head_files.get(path), main_files.get(path))}
    hub = details.conflicting_files
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


def _published_at_check(row: BundleRow, window: PublicationWindow) -> CheckResult:
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


def _coverage_check(claim: BundleClaim) -> CheckResult:
    coverage = claim.coverage
    of = f" of {coverage.expected_rows}" if coverage.expected_rows is not None else ""
    detail = f"{coverage.status}: {coverage.rows_present}{of} rows"
    if coverage.status == "complete":
        return passed("coverage", detail)
    return warned("coverage", detail, hint="not a result on the whole dataset split")


def _pin_check(claim: BundleClaim) -> CheckResult:
    statics = claim.statics
    if not statics.is_pinned:
        return warned(
            "pin",
            f"{statics.hf_repo_id} is unpinned: the rows it ran on cannot be pinned down",
            hint="run the harness with a pinned dataset revision",
        )
    return passed("pin", f"{statics.hf_repo_id}@{statics.resolved_revision}")


def _harness_check(claim: BundleClaim) -> CheckResult:
    provenance = Provenance.model_validate(claim.provenance)
    described = f"gptnt {provenance.gptnt_version} @ {provenance.git_sha}"
    if provenance.is_dirty:
        return warned(
            "harness",
            f"{described}: the harness tree had uncommitted changes",
            hint="the version alone does not say what ran",
        )
    return passed("harness", described)


def _exception_check(claim: BundleClaim, limit: float) -> CheckResult:
    counts = claim.predictions
    rate = counts.exceptions / counts.count if counts.count else 0.0
    detail = f"{counts.exceptions} of {counts.count} predictions raised ({rate:.1%})"
    if rate > limit:
        return failed("exceptions", f"{detail}, above {limit:.1%}")
    return passed("exceptions", detail)


def _submitter_check(claim: BundleClaim) -> CheckResult:
    name = (claim.submitter.name or "").strip()
    if not name:
        return warned("submitter", "no submitter name", hint="collect with --submitter-name")
    return passed("submitter", name)


# ---------------------------------------------------------------------------- Markdown


def render_markdown(report: ReviewReport, pr: PullRequestReview) -> str:
    """The PR's report; deterministic, so an unchanged PR gives the same bytes (and digest)."""
    text: str = markdown_template(REVIEW_TEMPLATE, trim_blocks=True).render(
        pr=pr,
        repo_id=report.repo_id,
        max_exception_rate=report.max_exception_rate,
        bundler_version=bundler_version(),
    )
    return text.strip() + "\n"
