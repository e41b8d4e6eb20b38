"""Stage 5, carried out: read what the plan needs from the Hub, then make its commits.

`bundler.hub.publish.plan` decides; this module does. It checks the token and the repository
(which must exist: only `bundler.hub.maintain.board_start` creates one), finds the submitter's
pull request (`Destination`), reads what it holds of the bundles being planned (`Holdings`)
and, beyond that, only what `plan.triage` asks for (`HubEvidence`), and commits the plan's
batches, each uploading with its own files the later batches' bundle files that fit in the
same requests (`bundler.hub.publish.ahead`). Each commit is
made against the head it was planned on (`parent_commit`), so a concurrent upload makes the Hub
answer 412 instead of being clobbered; the batch is then judged again on the new head
(`plan.replan`, through `commit.commit_replanned`). A batch whose commit is past the Hub's
limits is not sent (bundler.hub.client.limits), and a batch the Hub refuses for what it holds
(a 4xx) is reported refused with the Hub's reason: neither stops the batches after it. A commit
to a branch also carries the leaderboard's tables and the card as they will be with its bundles
(`bundler.hub.leaderboard.branch`), so the branch is always true. A pull request commit touches
only the paths its bundles own, never the tables, the card or any other shared file, so two open
pull requests and the branch never conflict on merge.

This module loads the Hub client; `bundler.hub.publish.upload` imports it only once the local
bundles are being verified, so that loading and verifying overlap.
"""

from __future__ import annotations

from functools import partial

from bundler.core.errors import BundlerError, HubAccessError, RefusedByHub, TemporaryError
from bundler.core.progress import NoProgress, ProgressSink
from bundler.core.version import bundler_version
from bundler.hub.client.commit import Operation, PlannedCommit, commit_replanned
from bundler.hub.client.limits import HubLimitReached
from bundler.hub.client.remote import RemoteFile
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.card import card_acceptable, card_refused
from bundler.hub.leaderboard.chart import not_drawn
from bundler.hub.leaderboard.rows import utc_timestamp
from bundler.hub.publish.ahead import CLIENT_FILES_PER_REQUEST, UploadAhead
from bundler.hub.publish.destination import Destination
from bundler.hub.publish.evidence import EvidenceReader
from bundler.hub.publish.holdings import Holdings
from bundler.hub.publish.plan import (
    BundlePlan,
    Decision,
    LocalBundle,
    RepositoryView,
    UploadOptions,
    UploadReport,
    batches,
    commit_message,
    decide,
    replan,
)
from bundler.hub.publish.pr_description import ProposedBundle, pr_title, render_pr_description
from bundler.hub.publish.prepare import prepare_repository
from bundler.hub.publish.signing_rule import apply_signing_rule
from bundler.hub.repo.paths import README

COMMITTING, OPENING_PR = "committing", "opening the pull request"
"""What a batch's commit is doing, as its errors say: a refusal of the commit itself (not of
a read before it) refuses that batch alone (`refuses_batch`)."""


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
        self.session.on_wait(self.report.warnings.append)  # rate-limit waits (client.ratelimit)
        self.destination = Destination(base=options.revision, create_pr=options.create_pr)
        self.user: str | None = None
        self.holdings = Holdings(self.session, self.destination, self.progress)
        self.evidence = EvidenceReader(self.session, self.progress, create_pr=options.create_pr)
        self.published_at = utc_timestamp()
        self._decisions: dict[str, Decision] = {}
        self.ahead = UploadAhead()

    def run(self, local: list[LocalBundle], set_aside: list[BundlePlan]) -> UploadReport:
        """Publish the verified `local` bundles; `set_aside` are those verification refused or
        held back (upload.gather_local), reported as they are."""
        self.report.bundles.extend(set_aside)
        if not local:
            return self.report
        try:
            self.user = prepare_repository(self.session, self.options)
            if self.options.create_pr and self.user is not None:
                self.destination.find_open_pr(self.session, self.user)
            view = self.holdings.view(local, self.report.left_off_board)
            plans = self._plan(local, view)
            self.report.opens_pull_request = self.destination.opens_pr and any(
                plan.to_publish for plan in plans.values()
            )
        except BundlerError as error:
            self._stopped_by(error)  # the bundles refused or held back above stay reported
            return self.report
        if not self.options.dry_run:
            self._publish([bundle for bundle in local if plans[bundle.bundle_id].to_publish], plans)
            if self.destination.pr_num is not None:
                self._describe_pr(plans)
        self.report.pull_request_num = self.destination.pr_num
        self.report.pull_request_url = self.destination.pr_url
        return self.report

    # --------------------------------------------------------------------- planning

    def _plan(self, local: list[LocalBundle], view: RepositoryView) -> dict[str, BundlePlan]:
        plans: dict[str, BundlePlan] = {}
        for bundle in local:
            decision = decide(
                bundle, view, self.evidence.about(bundle, view), self.options, self.published_at
            )
            decision, warning = apply_signing_rule(
                decision, bundle, view, create_pr=self.options.create_pr
            )
            if warning is not None:
                self.report.warnings.append(warning)
            bundle.row = decision.row
            self._decisions[bundle.bundle_id] = decision
            plans[bundle.bundle_id] = decision.plan
            self.report.bundles.append(decision.plan)
        return plans

    # ------------------------------------------------------------------- publishing

    def _publish(self, pending: list[LocalBundle], plans: dict[str, BundlePlan]) -> None:
        self.progress.begin(
            f"uploading to {self.options.repo_id}",
            sum(bundle.size for bundle in pending),
            unit="bytes",
        )
        cut = batches(pending, to_branch=not self.options.create_pr)
        for number, batch in enumerate(cut):
            try:
                self._publish_batch(batch, plans, later=cut[number + 1 :])
            except BundlerError as error:
                if refuses_batch(error):
                    self._refused(batch, plans, error)
                    continue
                temporary = self._stopped_by(error)
                for bundle in pending:
                    plan = plans[bundle.bundle_id]
                    if plan.outcome == "planned":
                        plan.outcome, plan.detail, plan.temporary = "failed", str(error), temporary
                return

    def _refused(
        self, batch: list[LocalBundle], plans: dict[str, BundlePlan], error: BundlerError
    ) -> None:
        """A batch refused for what it holds: its bundles still to publish are refused, with
        why, and the first such refusal is the report's error (exit 1); the upload goes on."""
        for bundle in batch:
            plan = plans[bundle.bundle_id]
            if plan.outcome == "planned":
                plan.outcome, plan.detail = "refused", str(error)
        if self.report.error is None:
            self._stopped_by(error)
        self.holdings.refused()

    def _stopped_by(self, error: BundlerError) -> bool:
        """Record in the report the Hub error that ended the upload, so what was refused or
        published before it is still reported, and whether it was temporary. An error the
        user must fix first (token, access, repository, revision) is raised instead."""
        if isinstance(error, HubAccessError):
            raise error
        temporary = isinstance(error, TemporaryError)
        self.report.say(error)
        self.report.error_temporary = temporary
        return temporary

    def _publish_batch(
        self,
        batch: list[LocalBundle],
        plans: dict[str, BundlePlan],
        *,
        later: list[list[LocalBundle]],
    ) -> None:
        """Commit `batch`, uploading with it what of the `later` batches' files fits in the
        same requests (bundler.hub.publish.ahead)."""
        committing: list[LocalBundle] = []
        planned: list[PlannedCommit] = []

        def plan() -> PlannedCommit | None:
            head, remote = self.holdings.at_head(batch)
            expected = {b.bundle_id: self._decisions[b.bundle_id].expected for b in batch}
            judged = replan(batch, remote, plans, expected, replace=self.options.replace)
            for bundle in judged.found:
                self._landed(bundle, plans[bundle.bundle_id])
                plans[bundle.bundle_id].detail = (
                    f"found on the Hub at {head[:12]} when the commit was planned again "
                    "(a commit whose answer was lost, or an identical upload)"
                )
            committing[:] = judged.todo
            if not judged.todo:
                return None
            planned[:] = [self._commit(judged.todo, head, remote, plans, later)]
            return planned[0]

        info = commit_replanned(
            self.session,
            plan,
            attempts=self.options.commit_attempts,
            retry_wait=self.options.retry_wait_seconds,
            on_transient=self._refind_pr if self.destination.opens_pr else None,
            limits=self.options.limits,
        )
        if info is None:
            return
        self.ahead.landed(planned[0].parent, info.oid)
        self.report.commits.append(info.oid)
        self.holdings.committed(info.oid, card_refused=self.report.card_refused is not None)
        if self.holdings.tables is not None:  # what the board leaves off now, after this commit
            self.report.left_off_board = self.holdings.tables.problems
            self.report.charts_not_drawn = not_drawn(self.holdings.tables.undrawn)
        if info.pr_num is not None and self.destination.pr_num is None:
            self.destination.opened(
                info.pr_num,
                info.pr_url,
                planned[0].summary,
                planned[0].description,
                [self._proposal(b.bundle_id) for b in committing],
            )
        for bundle in committing:
            self._landed(bundle, plans[bundle.bundle_id])

    def _commit(
        self,
        todo: list[LocalBundle],
        head: str,
        remote: dict[str, RemoteFile],
        plans: dict[str, BundlePlan],
        later: list[list[LocalBundle]],
    ) -> PlannedCommit:
        """The commit of `todo` on `head`: their files (uploaded ahead, where they were), the
        card on a branch, and the `later` batches' files to upload with them."""
        operations: list[Operation] = [
            operation
            for bundle in todo
            for operation in self.ahead.operations(bundle.repo_files(), head)
        ]
        # A card the Hub would refuse (checked locally) is left out, so that it never blocks
        # the bundles, and the report says why (exit 1).
        report = self.report
        operations += self.holdings.table_operations(
            todo,
            keep_card=lambda card: report.card_refused is None and card_acceptable(card, report),
        )
        opens_pr = self.destination.opens_pr
        if opens_pr:
            proposed = self.destination.proposals(
                {b.bundle_id: self._proposal(b.bundle_id) for b in todo}
            )
            user = self.user or "unknown"
            summary = pr_title(proposed, user, self.options.message)
            description = render_pr_description(
                self.options.repo_id, user, proposed, bundler_version(), pr_num=None
            )
        else:
            summary, description = commit_message(todo, plans, self.options.message)
        carries_card = any(op.path_in_repo == README for op in operations)
        ahead = self.ahead.window(later, room=CLIENT_FILES_PER_REQUEST - len(operations))
        return PlannedCommit(
            revision=self.destination.ref,
            parent=head,
            operations=operations,
            summary=summary,
            description=description,
            doing=OPENING_PR if opens_pr else COMMITTING,
            create_pr=opens_pr,
            card=README if carries_card else None,
            on_card_refused=partial(card_refused, self.report),
            files_before=self.holdings.file_count(),
            ahead=tuple(ahead),
        )

    def _proposal(self, bundle_id: str) -> ProposedBundle:
        proposal = self._decisions[bundle_id].proposal
        assert proposal is not None, "every bundle to publish has its proposal"
        return proposal

    def _refind_pr(self) -> None:
        """After a lost answer to the commit that opens the pull request: did it open?"""
        self.destination.find_open_pr(self.session, self.user)

    def _landed(self, bundle: LocalBundle, plan: BundlePlan) -> None:
        plan.outcome = "proposed" if self.options.create_pr else "published"
        if self.options.create_pr and self.destination.pr_num is not None:
            plan.detail = f"proposed in pull request #{self.destination.pr_num}"
        self.progress.advance(bundle.size)

    def _describe_pr(self, plans: dict[str, BundlePlan]) -> None:
        """Rewrite the pull request's title and description to say what it now proposes; a
        failure leaves the bundles proposed and is reported as a warning."""
        proposed_now = {
            bundle_id: decision.proposal
            for bundle_id, decision in self._decisions.items()
            if plans[bundle_id].outcome == "proposed" and decision.proposal is not None
        }
        if not proposed_now:
            return
        self.report.warnings += self.destination.describe(
            self.session,
            self.user,
            self.destination.proposals(proposed_now),
            message=self.options.message,
            version=bundler_version(),
        )


def refuses_batch(error: BundlerError) -> bool:
    """Whether `error` refuses one batch for what it holds, rather than the whole upload: the
    Hub's limits, or the Hub refusing the commit itself for its content (a 4xx that is no
    question of access, conflict or rate: those have errors of their own)."""
    if isinstance(error, HubLimitReached):
        return True
    return (
        isinstance(error, RefusedByHub)
        and error.doing in (COMMITTING, OPENING_PR)
        and error.status is not None
        and error.status < 500
    )
