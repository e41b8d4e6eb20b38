"""Where an upload's commits go: the target branch, or the submitter's pull request on it.

Each submitter (the token's user) has one open bundler pull request per repository, found by its
author and the `[bundler]` title marker, never by what it holds, so every upload finds it and
adds commits to it. After the commits, its title and description are rewritten to say what the
whole pull request adds, extends and replaces (`bundler.hub.publish.pr_description` renders them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from huggingface_hub.community import Discussion, DiscussionComment, DiscussionWithDetails

from bundler.core.errors import BundlerError
from bundler.hub.client.answers import checked_details, checked_discussions
from bundler.hub.client.session import REPO_TYPE, HubSession
from bundler.hub.publish.pr_description import (
    PR_MARKER,
    ProposedBundle,
    pr_title,
    read_pr_state,
    render_pr_description,
)


@dataclass
class Destination:
    """The target branch, or the submitter's pull request on it, and what that pull request
    says now (so that it is rewritten only when what it proposes changed)."""

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

    def opened(
        self, num: int, url: str | None, title: str, description: str, state: list[ProposedBundle]
    ) -> None:
        """The pull request just opened with the title and description of the commit that
        opened it: what the rest of the upload compares with before rewriting them."""
        self.pr_num, self.pr_url = num, url
        self.pr_title, self.pr_description, self.pr_state = title, description, state

    def find_open_pr(self, session: HubSession, user: str | None) -> None:
        """The submitter's open bundler pull request on the base branch, if there is one."""
        for discussion in bundler_pull_requests(session, user):
            details = self._details(session, discussion.num)
            if details.target_branch not in (self.base, f"refs/heads/{self.base}"):
                continue
            self.pr_num, self.pr_url = discussion.num, discussion.url
            self.pr_title = discussion.title
            self._read_description(details)
            return

    @staticmethod
    def _details(session: HubSession, num: int) -> DiscussionWithDetails:
        return session.call(
            f"reading pull request #{num}",
            partial(
                checked_details,
                session.api.get_discussion_details,
                session.repo_id,
                num,
                repo_type=REPO_TYPE,
            ),
        )

    def _read_description(self, details: DiscussionWithDetails) -> None:
        """The description (the pull request's first comment), its id and the state it holds."""
        first = next((event for event in details.events if event.type == "comment"), None)
        if first is not None:
            content = first.content if isinstance(first, DiscussionComment) else ""
            self.pr_description, self.pr_comment_id = content, first.id
            self.pr_state = read_pr_state(content)

    def proposals(self, now: dict[str, ProposedBundle]) -> list[ProposedBundle]:
        """What the whole pull request proposes: its earlier proposals, updated by `now`'s."""
        merged = {bundle.bundle_id: bundle for bundle in self.pr_state}
        merged.update(now)
        return list(merged.values())

    def describe(
        self,
        session: HubSession,
        user: str | None,
        proposed: list[ProposedBundle],
        *,
        message: str | None,
        version: str,
    ) -> list[str]:
        """Rewrite the pull request's title and description to say what it now proposes.
        Each change on its own: a failure leaves the bundles proposed, and is returned as a
        warning saying what is now out of date."""
        num = self.pr_num
        assert num is not None
        author = user or "unknown"
        title = pr_title(proposed, author, message)
        description = render_pr_description(session.repo_id, author, proposed, version, pr_num=num)
        warnings: list[str] = []

        stale = "it does not say all the pull request proposes"

        def update(what: str, change: Callable[[], object], outcome: str = stale) -> None:
            try:
                change()
            except BundlerError as error:
                warnings.append(
                    f"pull request #{num}: {what} could not be updated, so {outcome} "
                    f"({error.message})"
                )

        if title != self.pr_title:
            rename = partial(
                session.api.rename_discussion, session.repo_id, num, title, repo_type=REPO_TYPE
            )
            update("its title", partial(session.call, "renaming the pull request", rename))
        if description != self.pr_description:
            same = _by_id(proposed) == _by_id(self.pr_state)
            unnumbered = f"its review command says refs/pr/N for refs/pr/{num}"
            edit = partial(self._edit_description, session, num, description)
            update("its description", edit, unnumbered if same else stale)
        return warnings

    def _edit_description(self, session: HubSession, num: int, description: str) -> None:
        """The description is the pull request's first comment, whose id the commit that opened
        the pull request does not give: one request reads it (so the number in the description
        of a new pull request costs two requests, this and the edit)."""
        if self.pr_comment_id is None:
            self._read_description(self._details(session, num))
        comment_id = self.pr_comment_id
        if comment_id is not None:
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


def bundler_pull_requests(session: HubSession, user: str | None) -> list[Discussion]:
    """`user`'s open pull requests that the bundler opened (by the `[bundler]` title marker),
    oldest first."""
    discussions = session.call(
        "listing pull requests",
        lambda: checked_discussions(
            session.api.get_repo_discussions(
                session.repo_id,
                author=user,
                discussion_type="pull_request",
                discussion_status="open",
                repo_type=REPO_TYPE,
            )
        ),
    )
    return sorted(
        (
            discussion
            for discussion in discussions
            if discussion.author == user
            and discussion.status in ("open", "draft")
            and PR_MARKER in discussion.title
        ),
        key=lambda discussion: discussion.num,
    )


def _by_id(proposed: list[ProposedBundle]) -> dict[str, ProposedBundle]:
    return {bundle.bundle_id: bundle for bundle in proposed}
