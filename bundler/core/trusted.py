"""Trusted Publishers: a CI job with no stored token, whose OIDC id token huggingface_hub
exchanges for a short-lived token to one repository (hub-docs `trusted-publishers.md`).

huggingface_hub does the exchange itself, in its token resolution (`get_token`: with
`HF_OIDC_RESOURCE` set, the exchange comes before `HF_TOKEN` and the stored login), so every
request of a command that was given no token carries the exchanged one, as it would carry
`HF_TOKEN`. What the bundler adds is what a person reads when it fails: the errors here, which
say what to fix (the job's permission to mint an id token, the publisher registered on the Hub,
the repository the token was asked for), rather than "the Hub rejected the credentials".
"""

from __future__ import annotations

import os
from typing import ClassVar, Literal

from bundler.core.errors import HubAccessError

RESOURCE_VARIABLE = "HF_OIDC_RESOURCE"
"""huggingface_hub's switch: the repository (`datasets/OWNER/NAME`) to exchange the CI's id
token for a token to."""
DATASETS = "datasets/"
PUBLISHER_USER = "[OIDC]"
"""The synthetic user the Hub names for what an exchanged token does (hub-docs
trusted-publishers.md, "Security model"): no account, a member of nothing."""


def exchange_resource(explicit_token: bool) -> str | None:
    """The resource the client exchanges the CI's id token for, when it does: no token was
    given explicitly and HF_OIDC_RESOURCE is set (huggingface_hub's order)."""
    return None if explicit_token else os.environ.get(RESOURCE_VARIABLE) or None


def dataset_resource(repo_id: str) -> str:
    """The resource that names the dataset repository `repo_id`."""
    return f"{DATASETS}{repo_id}"


ExchangeCause = Literal["no-id-token", "refused"]
"""`no-id-token`: the job could not get an OIDC id token (no `id-token: write` permission, no
HF_OIDC_ID_TOKEN, or the CI's endpoint refused); `refused`: the Hub refused the exchange (no
publisher registered for this workflow on the repository, claims that do not match, a
repository that does not exist, an id token for another audience or expired)."""


class ExchangeFailed(HubAccessError):
    """The CI's OIDC id token could not be exchanged for a token: nothing was sent with any
    other token (huggingface_hub never falls back), and a retry fails the same way."""

    kind: ClassVar[str] = "token-exchange"

    def __init__(self, resource: str, *, cause: ExchangeCause, doing: str) -> None:
        if cause == "no-id-token":
            message = (
                f"{doing}: {RESOURCE_VARIABLE} asks for a token to {resource}, but this job "
                "has no OIDC id token to exchange for it"
            )
            hint = "let the job mint one (GitHub Actions: `permissions: id-token: write`)"
        else:
            message = (
                f"{doing}: the Hub refused to exchange this job's OIDC id token for a token "
                f"to {resource}"
            )
            hint = f"register this workflow as a Trusted Publisher of {resource} on the Hub"
        super().__init__(message, hint=hint)
        self.resource, self.cause, self.doing = resource, cause, doing


class PublisherElsewhere(HubAccessError):
    """The token exchanged for this job may write to one repository (`resource`), and the
    command writes to another (`repo`): refused before anything is sent, as the Hub would
    refuse it after."""

    kind: ClassVar[str] = "token-exchange-elsewhere"

    def __init__(self, repo: str, resource: str) -> None:
        super().__init__(
            f"{repo}: the token exchanged for this job may write to {resource} only "
            f"({RESOURCE_VARIABLE})",
            hint=f"set {RESOURCE_VARIABLE} to {dataset_resource(repo)}",
        )
        self.repo, self.resource = repo, resource
