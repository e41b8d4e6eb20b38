"""Stage 7: review the pull requests of a dataset repository, and merge the clean ones.

Each pull request goes through three steps: `bundler.hub.review.gather` reads what its review
needs from the Hub (what the PR changes, by its diff and its trees, the bundles it changes,
staged and verified; what it reads of the target branch serves the whole round),
`bundler.hub.review.judge` runs the checks on those values, and `bundler.hub.review.act` posts
the report and merges, when asked. A PR is clean when every check passed; only a clean PR is
merged, by a commit of exactly its reviewed files with the leaderboard's tables and card
(`act.merge`), and the round goes on against the branch that merge made. Whatever goes wrong
with one PR (a Hub failure, a refused comment, a file system's refusal, a bug) fails that PR's
review only: it is reported as not reviewed, with the reason, and the round goes on.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from pydantic import ConfigDict, Field, SecretStr

from bundler.core import exitcodes
from bundler.core.errors import BundlerError, RepositoryNotFound, TemporaryError
from bundler.core.limits import MAX_EXCEPTION_RATE
from bundler.core.model import Model
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import bundler_version
from bundler.hub.client.exists import dataset_exists
from bundler.hub.client.session import HubSession
from bundler.hub.repo.markdown import markdown_template
from bundler.hub.review.act import merge, post_report, writer
from bundler.hub.review.gather import PullRequestGatherer
from bundler.hub.review.judge import (
    MAX_BUNDLES,
    PullRequestFacts,
    PullRequestReview,
    judge_pull_request,
    unreviewed,
)
from bundler.hub.tasks.split_size import RowCountResolver
from bundler.local.layout import TEMP_PREFIX

REVIEW_TEMPLATE = "review.md.j2"


class ReviewOptions(Model):
    model_config = ConfigDict(frozen=True)

    repo_id: str
    pull_requests: list[int] = Field(default_factory=list)
    comment: bool = False
    merge: bool = False
    max_exception_rate: float = Field(default=MAX_EXCEPTION_RATE, ge=0, le=1)
    max_bundles: int = Field(default=MAX_BUNDLES, ge=1)
    token: SecretStr | None = None
    accept: list[str] = Field(default_factory=list, description="checks whose warnings merge")


class ReviewReport(Model):
    repo_id: str
    max_exception_rate: float
    pull_requests: list[PullRequestReview] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 all clean (and merged where asked), 75 when only temporary Hub failures stood in
        the way (a retry may get past them), else 1."""
        return exitcodes.combine(*(pr.exit_code for pr in self.pull_requests))


def review(options: ReviewOptions, progress: ProgressSink | None = None) -> ReviewReport:
    """Review (and with the options, comment on and merge) the repository's pull requests.
    Raises WriteTokenRequired before doing anything when a comment or a merge is asked for
    without a write token."""
    token = options.token.get_secret_value() if options.token else None
    session = HubSession(options.repo_id, token=token)
    gatherer = PullRequestGatherer(
        session, RowCountResolver(token), progress or NoProgress(), options.max_bundles
    )
    acting = options.comment or options.merge
    reviewer = (
        writer(session, token, comment=options.comment, merge=options.merge) if acting else None
    )
    if not dataset_exists(session):
        raise RepositoryNotFound(options.repo_id)
    report = ReviewReport(repo_id=options.repo_id, max_exception_rate=options.max_exception_rate)
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}review-") as work:
        for facts in gatherer.pull_requests(options.pull_requests):
            folder = Path(work) / f"pr-{facts.num}"
            try:
                pr = _review_one(gatherer, facts, folder, options, report, reviewer)
            except Exception as error:  # one PR's failure, whatever it is, is that PR's alone
                pr = unreviewed(facts, _reason(error), _exit_code(error))
                try:
                    pr.markdown = render_markdown(report, pr)
                except Exception:  # the JSON and the summary still say why
                    pr.markdown = ""
            finally:
                shutil.rmtree(folder, ignore_errors=True)  # one PR's bundles on disk at a time
            report.pull_requests.append(pr)
    return report


def _review_one(
    gatherer: PullRequestGatherer,
    facts: PullRequestFacts,
    work: Path,
    options: ReviewOptions,
    report: ReviewReport,
    reviewer: str | None,
) -> PullRequestReview:
    """One PR: gathered, judged, reported on and (when clean and asked) merged, while its
    verified copies are still in `work`."""
    session = gatherer.session
    gathered = gatherer.gather(facts, work)
    pr = judge_pull_request(gathered, options.max_exception_rate)
    # The digest is of the findings alone, before any warning is accepted for a merge: a
    # re-review that finds the same posts nothing again, whatever flags either run had.
    pr.digest = hashlib.sha256(render_markdown(report, pr).encode("utf-8")).hexdigest()
    if options.merge:
        pr.accept(options.accept, reviewer or "the maintainer")
    pr.markdown = render_markdown(report, pr)
    if reviewer is not None and options.comment:
        post_report(session, pr, reviewer)
    if options.merge:
        merge(session, pr, gathered)
        if pr.merge_commit is not None:  # the next PR is judged against the branch as it is
            gatherer.branch_moved(facts.base_branch, pr.merge_commit)
    return pr


def _reason(error: Exception) -> str:
    if isinstance(error, BundlerError):
        return error.message
    return f"{type(error).__name__}: {error}".strip()[:500]


def _exit_code(error: Exception) -> int:
    """75 for a temporary Hub failure (the same command may get past it), else 1."""
    return exitcodes.TEMPORARY if isinstance(error, TemporaryError) else exitcodes.LOOK


def render_markdown(report: ReviewReport, pr: PullRequestReview) -> str:
    """The PR's report; deterministic, so an unchanged PR gives the same bytes (and digest)."""
    text: str = markdown_template(REVIEW_TEMPLATE, trim_blocks=True).render(
        pr=pr,
        repo_id=report.repo_id,
        max_exception_rate=report.max_exception_rate,
        bundler_version=bundler_version(),
    )
    return text.strip() + "\n"
