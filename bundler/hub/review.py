"""Stage 7: review the pull requests of a dataset repository, and merge the clean ones.

Each pull request goes through three steps: `bundler.hub.review_gather` reads what its review
needs from the Hub (what the PR changes against its base, the bundles it changes, staged and
verified), `bundler.hub.review_judge` runs the checks on those values, and
`bundler.hub.review_act` posts the report and merges, when asked. A PR is clean when every
check passed; only a clean PR is merged, and the dataset card is regenerated on the target
branch afterwards. A Hub failure while reading one PR fails that PR's review only.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from pydantic import ConfigDict, Field, SecretStr

from bundler.core import exitcodes
from bundler.core.errors import HubAccessError, HubError
from bundler.core.model import Model
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import bundler_version
from bundler.hub.markdown import markdown_template
from bundler.hub.refresh import CardRefresh
from bundler.hub.review_act import merge, post_report, refresh_cards, writer
from bundler.hub.review_gather import PullRequestGatherer
from bundler.hub.review_judge import (
    PullRequestFacts,
    PullRequestReview,
    judge_pull_request,
    unreviewed,
)
from bundler.hub.rowcount import RowCountResolver
from bundler.hub.session import HubSession
from bundler.local.layout import TEMP_PREFIX

MAX_EXCEPTION_RATE = 0.05
"""Default share of predictions that may have raised an exception in the harness."""
REVIEW_TEMPLATE = "review.md.j2"


class ReviewOptions(Model):
    model_config = ConfigDict(frozen=True)

    repo_id: str
    pull_requests: list[int] = Field(default_factory=list)
    comment: bool = False
    merge: bool = False
    max_exception_rate: float = Field(default=MAX_EXCEPTION_RATE, ge=0, le=1)
    token: SecretStr | None = None
    accept: list[str] = Field(default_factory=list, description="checks whose warnings merge")


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
    token = options.token.get_secret_value() if options.token else None
    session = HubSession(options.repo_id, token=token)
    gatherer = PullRequestGatherer(session, RowCountResolver(token), progress or NoProgress())
    acting = options.comment or options.merge
    reviewer = (
        writer(session, token, comment=options.comment, merge=options.merge) if acting else None
    )
    if not session.dataset_exists():
        raise HubAccessError(
            f"dataset {options.repo_id} was not found or is not visible with this token",
            hint="check --repo, and that the token can see the repository",
        )
    report = ReviewReport(repo_id=options.repo_id, max_exception_rate=options.max_exception_rate)
    merged_into: set[str] = set()
    try:
        with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}review-") as work:
            for facts in gatherer.pull_requests(options.pull_requests):
                pr = _review_one(gatherer, facts, Path(work) / f"pr-{facts.num}", options)
                pr.markdown = render_markdown(report, pr)
                pr.digest = hashlib.sha256(pr.markdown.encode("utf-8")).hexdigest()
                report.pull_requests.append(pr)
                if not pr.reviewed:
                    continue  # nothing to say on the PR, and nothing to merge
                if reviewer is not None and options.comment:
                    post_report(session, pr, reviewer)
                if options.merge:
                    merge(session, pr)
                    if pr.merge == "merged":
                        merged_into.add(pr.base_branch)
    finally:  # merged PRs never leave a stale card behind, whatever happened after
        report.card, failure = refresh_cards(session, sorted(merged_into))
        if failure is not None:
            report.card_error, report.card_error_code = str(failure), failure.exit_code
    return report


def _review_one(
    gatherer: PullRequestGatherer, facts: PullRequestFacts, work: Path, options: ReviewOptions
) -> PullRequestReview:
    """One PR's review; a Hub failure on this PR is its failed `review` check, so the other
    PRs are still reviewed (access problems stop everything: they concern them all)."""
    try:
        return judge_pull_request(gatherer.gather(facts, work), options.max_exception_rate)
    except HubError as error:
        if isinstance(error, HubAccessError):
            raise
        return unreviewed(facts, str(error), error.exit_code)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # one PR's bundles on disk at a time


def render_markdown(report: ReviewReport, pr: PullRequestReview) -> str:
    """The PR's report; deterministic, so an unchanged PR gives the same bytes (and digest)."""
    text: str = markdown_template(REVIEW_TEMPLATE, trim_blocks=True).render(
        pr=pr,
        repo_id=report.repo_id,
        max_exception_rate=report.max_exception_rate,
        bundler_version=bundler_version(),
    )
    return text.strip() + "\n"
