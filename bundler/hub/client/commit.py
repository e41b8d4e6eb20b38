"""A commit to the Hub, made on the head it was planned on, and planned again when it fails.

The client does not retry a commit. `commit_replanned` makes it naming its parent, so a
concurrent commit makes the Hub answer 412 instead of being clobbered; after that, or a fault
whose outcome is unknown (a lost response), it plans the commit again on the current head
before trying again, so a commit that landed after all is found there instead of being made
twice. A dataset card the Hub refuses is left out, and the rest committed without it. A commit
may carry the files of commits planned after it (`PlannedCommit.ahead`): they are uploaded
with its own, in the same preupload and LFS batch requests, and committed by those commits.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from huggingface_hub import (
    CommitInfo,
    CommitOperationAdd,
    CommitOperationCopy,
    CommitOperationDelete,
)

from bundler.core.errors import (
    BundlerError,
    HubError,
    HubRateLimitError,
    HubUnavailableError,
    TemporaryError,
)
from bundler.core.waiting import RETRY_WAITS
from bundler.hub.client.limits import HubLimits, check_commit
from bundler.hub.client.retry import RETRY_MAX_SECONDS
from bundler.hub.client.session import (
    REPO_TYPE,
    HubSession,
    is_transient,
    retry_after_of,
    status_of,
)

CARD_REFUSED = re.compile(r"README\.md|metadata|yaml", re.IGNORECASE)
"""What a Hub refusal (400, 413) of a commit says when it is the dataset card it refuses."""


def is_card_refusal(error: BaseException) -> bool:
    """The Hub refused a commit's dataset card (its metadata), not the commit: validate-yaml's
    400 reaches us as the client's ValueError("Invalid metadata in README.md ...")."""
    if isinstance(error, ValueError) and "README.md" in str(error):
        return True
    return status_of(error) in (400, 413) and bool(CARD_REFUSED.search(str(error)))


Operation = CommitOperationAdd | CommitOperationCopy | CommitOperationDelete
"""What a commit does to one path: writes bytes, copies a file of the repository (an LFS
archive moved, with no upload), or deletes."""


@dataclass(frozen=True)
class PlannedCommit:
    """One commit, planned on `parent` (the head of `revision` when it was planned)."""

    revision: str
    parent: str
    operations: list[Operation]
    summary: str
    description: str
    doing: str
    create_pr: bool = False
    write_hint: str | None = None
    """What to do when the token may not write here (see HubSession.describe)."""
    card: str | None = None
    """The path of the dataset card among `operations`, when the commit carries one beside
    other files: the Hub refusing the card (400, 413) then does not refuse the rest."""
    on_card_refused: Callable[[HubError], None] | None = None
    """Told why, when the commit was made again without the card."""
    files_before: int | None = None
    """The files the repository holds at `parent`, when the caller knows them (a branch's
    leaderboard lists every bundle): the commit is checked against the Hub's files limit."""
    ahead: tuple[CommitOperationAdd, ...] = ()
    """Files of commits planned after this one, uploaded with this commit's own (one preupload
    and one LFS batch request for both, where they fit in one), not committed by it: the
    later commits pass these same operations, which the client then uploads no more
    (bundler.hub.publish.ahead)."""

    @property
    def added(self) -> list[str]:
        """The paths the commit writes."""
        return [
            op.path_in_repo
            for op in self.operations
            if isinstance(op, CommitOperationAdd | CommitOperationCopy)
        ]


def commit_replanned(
    session: HubSession,
    plan: Callable[[], PlannedCommit | None],
    *,
    attempts: int,
    retry_wait: float,
    on_transient: Callable[[], None] | None = None,
    limits: HubLimits | None = None,
) -> CommitInfo | None:
    """Plan a commit on the current head and make it, naming that head as its parent; a
    commit past the Hub's `limits` (None: the session's) is never sent (HubLimitReached, see
    bundler.hub.client.limits).

    When another commit got there first (409, 412), or the Hub failed or rate-limited the
    commit, or the connection dropped, or the Hub answered what is not the JSON it documents
    (`unparsed`: the commit may have landed), nothing is retried blindly: `plan` runs again
    on the new head, so what landed meanwhile (our own commit after a lost response too) is
    seen and not committed twice. `plan` returns None when there is nothing (left) to commit,
    and so does this function. `on_transient` runs after a transient failure, before
    re-planning. A Hub that cannot be read while re-planning costs an attempt, like a failed
    commit. When the attempts run out, HubUnavailableError (exit 75) names the last problem.
    """
    last_problem = "no attempt made"
    for attempt in range(attempts):
        backoff = min(retry_wait * 2**attempt, RETRY_MAX_SECONDS)
        try:
            planned = plan()
            if planned is not None:
                _check_limits(session, planned, limits or session.limits)
        except TemporaryError as error:
            if attempt == 0 or isinstance(error, HubRateLimitError):
                raise  # nothing was tried yet: the Hub's state is as it was read before
            # After a failed commit, whose outcome may be unknown (a lost response): the
            # Hub must be read again before anything is said about it, so wait and re-plan.
            last_problem = error.message
            RETRY_WAITS.sleep(backoff)
            continue
        if planned is None:
            return None
        try:
            return _commit_or_without_card(session, planned)
        except Exception as error:
            if isinstance(error, BundlerError):
                raise
            status = status_of(error)
            if status in (409, 412):  # someone else committed first: re-plan on their head
                last_problem = f"HTTP {status} (a concurrent commit)"
                RETRY_WAITS.sleep(random.uniform(0.05, 0.4))
                continue
            if not is_transient(error):
                raise session.describe(
                    error,
                    doing=planned.doing,
                    create_pr=planned.create_pr,
                    write_hint=planned.write_hint,
                ) from None
            last_problem = session.describe(error, doing=planned.doing).message
            if on_transient is not None:
                on_transient()
            RETRY_WAITS.sleep(retry_after_of(error) or backoff)
    raise HubUnavailableError(
        f"not committed after {attempts} attempts; last: {last_problem}",
        hint="run the same command again later; it resumes where it stopped",
    )


def _check_limits(session: HubSession, planned: PlannedCommit, limits: HubLimits) -> None:
    """The planned commit within the Hub's limits, read at its parent (HubLimitReached), as
    far as the session's answers have not told it already (`HubSession.known`)."""
    parent = planned.parent
    check_commit(
        planned.added,
        existing=lambda paths: session.existing(paths, parent),
        entries_in=lambda folder: session.entry_count(folder, parent),
        files_before=planned.files_before,
        limits=limits,
    )


def _commit(
    session: HubSession,
    planned: PlannedCommit,
    operations: list[Operation],
) -> CommitInfo:
    added = [op for op in operations if isinstance(op, CommitOperationAdd)]
    if planned.ahead:  # uploaded together; create_commit then uploads none of them again
        session.api.preupload_lfs_files(
            session.repo_id,
            [*added, *planned.ahead],
            repo_type=REPO_TYPE,
            revision=planned.revision,
            create_pr=planned.create_pr,
            free_memory=False,  # the later commits compare and send these very operations
        )
    info = session.api.create_commit(
        session.repo_id,
        operations,
        commit_message=planned.summary,
        commit_description=planned.description,
        repo_type=REPO_TYPE,
        revision=planned.revision,
        create_pr=planned.create_pr,
        parent_commit=planned.parent,
    )
    whole = len(added) == len(operations)  # a commit that deletes or copies is not followed
    paths = [op.path_in_repo for op in added]
    session.known.committed(planned.parent, info.oid, paths if whole else None)
    return info


def _commit_or_without_card(session: HubSession, planned: PlannedCommit) -> CommitInfo:
    """Make the planned commit; when the Hub refuses its dataset card (a 400 or 413 naming
    README.md or its metadata, on validate-yaml or on the commit), make it once more without
    the card, on the same parent, and tell `planned.on_card_refused` why: a card the Hub
    will not take never keeps the bundles from being published."""
    try:
        return _commit(session, planned, planned.operations)
    except Exception as error:
        rest = [op for op in planned.operations if op.path_in_repo != planned.card]
        if planned.card is None or not rest or not is_card_refusal(error):
            raise
        refusal = session.describe(error, doing=f"committing {planned.card}")
    info = _commit(session, planned, rest)
    if planned.on_card_refused is not None:
        planned.on_card_refused(refusal)
    return info
