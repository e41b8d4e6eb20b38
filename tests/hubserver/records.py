"""Plain, immutable views of the fake Hub's state, handed to tests for their assertions.

Tests get copies rather than the live store objects so an assertion can never change the server's
state, and a record keeps meaning what it meant when it was taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TokenInfo:
    """Who a bearer token belongs to and what it may do (the Hub's token roles).

    `read`: see the repos, open discussions and pull requests (as their author), commit to its
    own pull requests' `refs/pr/N`, comment. `write`: also commit to branches and to anyone's
    pull request, close, reopen and merge.
    """

    name: str
    role: Literal["read", "write"] = "write"
    orgs: tuple[str, ...] = ()

    def owns(self, namespace: str) -> bool:
        """The namespace is the user's own or one of its organizations'."""
        return namespace == self.name or namespace in self.orgs


@dataclass(frozen=True)
class CommitRecord:
    """One commit as a test sees it; `added`/`modified`/`deleted` are relative to parents[0]."""

    oid: str
    parents: tuple[str, ...]
    summary: str
    description: str
    author: str
    created_at: str
    added: tuple[str, ...]
    modified: tuple[str, ...]
    deleted: tuple[str, ...]

    @property
    def files_changed(self) -> tuple[str, ...]:
        return tuple(sorted(self.added + self.modified + self.deleted))


@dataclass(frozen=True)
class PullRequestRecord:
    """A pull request: its discussion fields plus where `refs/pr/{num}` points."""

    num: int
    title: str
    description: str
    status: str
    author: str
    ref: str
    base_branch: str
    head_oid: str
    merge_commit_oid: str | None


@dataclass(frozen=True)
class RequestRecord:
    """One request the server received, without any header (so never a token).

    `path` is the raw, percent-encoded path without the query string; `query` the raw query
    string; `status` the status the server answered, or would have answered when `fault` is
    `"lost_response"`; `fault` names the injected fault that fired, if any.
    """

    method: str
    path: str
    query: str
    status: int
    fault: str | None = None
