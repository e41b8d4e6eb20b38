"""Plain, immutable views of the fake Hub's state, handed to tests for their assertions.

Tests get copies rather than the live store objects so an assertion can never change the server's
state, and a record keeps meaning what it meant when it was taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TokenRole = Literal["read", "write", "fineGrained"]


@dataclass(frozen=True)
class Scope:
    """One fine-grained grant: `permissions` on `entity`, a repo id (`ns/name`) or a namespace.

    The permissions this server knows (a small subset of the Hub's, security-tokens docs):
    `repo.write` (commit, branches, merge, as an owner would) and `discussion.write` (open
    discussions and pull requests, comment, push to one's own pull requests).
    """

    entity: str
    permissions: tuple[str, ...]


@dataclass(frozen=True)
class TokenInfo:
    """Who a bearer token belongs to: the user, the organizations they belong to, the role.

    As on the Hub (hub-protocol.md "Permissions", Hub docs security-tokens), what a token may do
    comes from two things. Its role: a `read` token "can only be used to provide read access"
    (no commit, no pull request, no comment); a `write` token acts with all of its user's
    rights; a `fineGrained` token only with the `scopes` it lists. And ownership: write access
    to a repository (commit to a branch, merge, create branches, moderate discussions) belongs
    to its namespace's user or to members of its organization; anyone else may only open pull
    requests and discussions, push to their own pull requests and comment.
    """

    name: str
    role: TokenRole = "write"
    orgs: tuple[str, ...] = ()
    scopes: tuple[Scope, ...] = ()
    unlisted_orgs: tuple[str, ...] = ()
    """Organizations the user belongs to that their public profile (`/api/users/{name}/
    overview`) does not list. The Hub's docs name no way to hide a membership, nor promise that
    the overview lists every one; a test holds such a membership to prove that only a listed
    one counts for the bundler. It gives the same rights as any other."""
    repository: str | None = None
    """A Trusted Publisher's token (hubserver.oidc): the one repository it may write to (or
    read, when private), whatever namespace holds it; it owns no namespace."""

    @property
    def memberships(self) -> tuple[str, ...]:
        return self.orgs + self.unlisted_orgs

    def owns(self, namespace: str) -> bool:
        """The namespace is the user's own or one of its organizations'."""
        return namespace == self.name or namespace in self.memberships

    def grants(self, permission: str, repo_id: str) -> bool:
        """A fine-grained scope gives `permission` on this repo or on its namespace."""
        namespace = repo_id.split("/")[0]
        return any(
            permission in scope.permissions and scope.entity in (repo_id, namespace)
            for scope in self.scopes
        )


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


RequestKind = Literal["api", "file", "storage"]
"""`api`: the Hub's API (`/api/...`, the git-LFS batch endpoint), counted against the "api"
quota; `file`: resolver requests (`HEAD`/`GET .../resolve/...`), counted against the
"resolvers" quota (Hub docs rate-limits); `storage`: the LFS object PUT and verify, which on the
Hub go to signed storage URLs, not to the Hub, and count against neither quota."""


@dataclass(frozen=True)
class RequestRecord:
    """One request the server received, without any header but the User-Agent (so never a
    token).

    `path` is the raw, percent-encoded path without the query string; `query` the raw query
    string; `status` the status the server answered, or would have answered when `fault` is
    `"lost_response"`; `fault` names the injected fault that fired, if any. `kind` says which
    rate-limit bucket the request belongs to; `repo_type`/`repo_id` name the repository the
    request concerns (None for account-level requests such as whoami). `size` is the bytes of
    the response body: what grows with a repository shows there even when the count does not.
    `user_agent` is what the client said it is (huggingface_hub's `library/version; hf_hub/...`
    line), so a test can check which library a request came from. `request_size` is the bytes
    of the request body (after any chunked transfer coding): what the client sent, which grows
    with a repository when a commit rewrites a file that does. `seconds` is the time the server
    took to answer it (the client's wait, less the network).
    """

    method: str
    path: str
    query: str
    status: int
    fault: str | None = None
    kind: RequestKind = "api"
    repo_type: str | None = None
    repo_id: str | None = None
    size: int = 0
    user_agent: str | None = None
    request_size: int = 0
    seconds: float = 0.0
