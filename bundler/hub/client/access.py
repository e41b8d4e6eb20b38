"""What a token may do on one repository, decided before anything is transferred.

The Hub grants write access by ownership, not by the token's role (hub-protocol.md
"Permissions"): a repository's namespace must be the token's user or one of its organizations.
The role then bounds what the token may do with the user's rights: a `read` token only reads
(no commit, no pull request, no comment); a `write` token does what its user may; a
`fineGrained` token only what its grants list, on the repositories or namespaces they name.
Anyone else with a write token may only open pull requests and comment.

So each command that writes asks `whoami` once (`AccessRights.of`), and one of the pure
`require_*` functions below raises a HubAccessError (exit 2) naming the cause (NoWriteAccess,
ReadOnlyToken, ...; bundler.core.errors), before any bundle is read from the Hub or sent to it.
The Hub stays the judge: its 403 answers are read into the same errors (HubSession.describe),
in case it knows better than whoami.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict

from bundler.core.errors import (
    MAINTAINER_TOKEN,
    SUBMITTER_TOKEN,
    HubAccessError,
    NoWriteAccess,
    ReadOnlyToken,
    ReviewNotAllowed,
)
from bundler.core.model import Model
from bundler.core.trusted import PUBLISHER_USER, PublisherElsewhere, dataset_resource

Role = Literal["read", "write", "fineGrained"]
REPO_WRITE = "repo.write"
"""The fine-grained permission to commit to a repository (and create one in a namespace)."""
DISCUSSION_WRITE = "discussion.write"
"""The fine-grained permission to open discussions and pull requests, and to comment."""
NON_WRITING_ORG_ROLES = frozenset({"read"})
"""Organization roles (`roleInOrg`) that give no write access to the organization's repos."""


def no_write_access(repo_id: str, user: str | None) -> NoWriteAccess:
    """The one error for a token that may not commit to `repo_id` directly, where a pull
    request would do."""
    return NoWriteAccess(repo_id, user=user, remedy="create-pr")


class AccessRights(Model):
    """A token's rights on one repository, as whoami-v2 describes the token."""

    model_config = ConfigDict(frozen=True)

    repo_id: str
    user: str
    role: Role | None
    """None: whoami named no role (an OAuth or older token); it is taken as a write token."""
    orgs: tuple[str, ...] = ()
    """The organizations whose repositories the user may write to."""
    granted: frozenset[str] = frozenset()
    """Fine-grained permissions that apply to this repository (global, or scoped to it or to
    its namespace)."""
    exchanged_for: str | None = None
    """The resource (`datasets/OWNER/NAME`) the client exchanged a CI job's id token for
    (bundler.core.trusted): the token writes there and nowhere else."""

    @classmethod
    def of(
        cls, whoami: Mapping[str, Any], repo_id: str, *, exchanged_for: str | None = None
    ) -> AccessRights:
        """Read whoami's answer (`name`, `orgs`, `auth.accessToken.role` and, for a
        fine-grained token, `auth.accessToken.fineGrained`) for `repo_id`."""
        auth = whoami.get("auth")
        token = auth.get("accessToken") if isinstance(auth, Mapping) else None
        token = token if isinstance(token, Mapping) else {}
        role = token.get("role")
        orgs = tuple(
            str(org["name"])
            for org in whoami.get("orgs") or []
            if isinstance(org, Mapping)
            and "name" in org
            and org.get("roleInOrg") not in NON_WRITING_ORG_ROLES
        )
        namespace = repo_id.split("/")[0]
        granted: set[str] = set()
        fine = token.get("fineGrained")
        if isinstance(fine, Mapping):
            granted.update(str(p) for p in fine.get("global") or [])
            for scope in fine.get("scoped") or []:
                if not isinstance(scope, Mapping):
                    continue
                entity = scope.get("entity")
                name = entity.get("name") if isinstance(entity, Mapping) else None
                names = {namespace, repo_id, f"datasets/{repo_id}"}
                if name in names:
                    granted.update(str(p) for p in scope.get("permissions") or [])
        return cls(
            repo_id=repo_id,
            user=str(whoami.get("name") or ""),
            role=role if role in ("read", "write", "fineGrained") else None,
            orgs=orgs,
            granted=frozenset(granted),
            exchanged_for=exchanged_for,
        )

    @property
    def namespace(self) -> str:
        return self.repo_id.split("/")[0]

    @property
    def owns_namespace(self) -> bool:
        """The repository's namespace is the user or one of its (writing) organizations. An
        exchanged token's user (PUBLISHER_USER) owns nothing: the token writes where its grant
        names, the repository it was exchanged for, given as HF_TOKEN as the Hub's docs do."""
        if self.exchanged_for is not None:
            return self.exchanged_for == dataset_resource(self.repo_id)
        if self.user == PUBLISHER_USER:
            return REPO_WRITE in self.granted
        return self.namespace == self.user or self.namespace in self.orgs

    def require_exchanged_here(self) -> None:
        """PublisherElsewhere when the token was exchanged for another repository."""
        if self.exchanged_for is not None and not self.owns_namespace:
            raise PublisherElsewhere(self.repo_id, self.exchanged_for)

    def _may(self, permission: str) -> bool:
        if self.role == "read":
            return False
        return self.role != "fineGrained" or permission in self.granted

    @property
    def can_write(self) -> bool:
        """Commit to the repository's branches, merge, create it: owners only."""
        return self.owns_namespace and self._may(REPO_WRITE)

    @property
    def can_contribute(self) -> bool:
        """Open a pull request, push to one's own, comment: any token but a read one (a
        fine-grained one needs discussion.write, or repo.write on a repository it owns)."""
        return self._may(DISCUSSION_WRITE) or self.can_write


def require_upload(rights: AccessRights, *, create_pr: bool) -> None:
    """Raise a HubAccessError (exit 2) when this upload cannot work with these rights."""
    repo = rights.repo_id
    rights.require_exchanged_here()
    if rights.role == "read":
        raise ReadOnlyToken(repo, user=rights.user, pull_request=create_pr)
    if create_pr:
        if not rights.can_contribute:
            raise HubAccessError(
                f"{repo}: this fine-grained token may not open pull requests there",
                hint=f"use {SUBMITTER_TOKEN}, or grant the token discussion.write",
            )
        return
    if not rights.can_write:
        raise no_write_access(repo, rights.user)


def require_review(rights: AccessRights, *, comment: bool, merge: bool) -> None:
    """Commenting (`--comment`) needs a token allowed to comment, merging (`--merge`) write
    access to the repository."""
    rights.require_exchanged_here()
    if comment and not rights.can_contribute:
        problem = (
            "this token is read-only"
            if rights.role == "read"
            else "this fine-grained token lacks discussion.write"
        )
        raise ReviewNotAllowed(rights.repo_id, action="comment", problem=problem)
    if merge and not rights.can_write:
        problem = "this token is read-only" if rights.role == "read" else "this token has none"
        raise ReviewNotAllowed(rights.repo_id, action="merge", problem=problem)


def require_card(rights: AccessRights) -> None:
    """Committing the dataset card needs write access to the repository."""
    rights.require_exchanged_here()
    if not rights.can_write:
        problem = "this token is read-only" if rights.role == "read" else "this token has none"
        raise HubAccessError(
            f"committing the dataset card needs write access to {rights.repo_id}: {problem}",
            hint=f"use {MAINTAINER_TOKEN}",
        )


def check_upload(rights: AccessRights | None, *, create_pr: bool) -> None:
    """require_upload, for a token that is known (see HubSession.upload_rights)."""
    if rights is not None:
        require_upload(rights, create_pr=create_pr)
