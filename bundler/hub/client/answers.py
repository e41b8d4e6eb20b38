"""The Hub's JSON answers as the bundler relies on them, validated before use.

An answer is untrusted input: a proxy, a bug or an attacker in the middle can send anything
with a 200. huggingface_hub turns most answers into its own objects without checking a type
(`RepoFile(**item)`, `User(**answer)`): an answer of the wrong shape either fails inside the
client (a list where an object is due, null where a list is, not JSON at all, cut short) or
reaches us as objects whose fields hold anything (a size that is a string, an organization
whose name is a number). So every object the bundler reads of an answer is validated by one
of these models (from the client's objects, `from_attributes`) inside the request's retries
(`HubSession.call`): either failure is a `MalformedAnswer`, retried as a temporary fault and,
when it persists, the command's exit 75, whose words never quote what the Hub sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx2
import huggingface_hub
from huggingface_hub.community import Discussion, DiscussionWithDetails
from huggingface_hub.errors import HfHubHTTPError, HFValidationError
from huggingface_hub.hf_api import RepoFile, RepoFolder
from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from bundler.core.model import Model
from bundler.hub.client.remote import LastCommit, RemoteEntry, RemoteFile, RemoteFolder

SHA = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{40}$")]
"""A git commit id, as the Hub gives one."""


class HubAnswer(Model):
    """Read from the client's objects as from a mapping; fields the bundler does not use are
    not checked (the Hub adds some now and then)."""

    model_config = ConfigDict(
        defer_build=True, protected_namespaces=(), from_attributes=True, extra="ignore"
    )


class WhoAmIAnswer(HubAnswer):
    """`/api/whoami-v2`: an object (`AccessRights.of` reads its fields, each of which may be
    missing or of any type, as a hostile token page could make them)."""

    name: StrictStr | None = None


class RevisionAnswer(HubAnswer):
    """`/api/datasets/{id}/revision/{rev}?expand=sha`: the commit the revision points at."""

    sha: SHA | None = None


class BranchAnswer(RevisionAnswer):
    """`/api/datasets/{id}/revision/{rev}?expand=sha&expand=cardData`, read as JSON: the commit,
    and the card's metadata (`cardData`), which only says whether there is any: it is not
    read (the client's own card model raises on some a card may hold,
    bundler.hub.tasks.split_size)."""

    card_data: Any = Field(default=None, alias="cardData")


class OrganizationAnswer(HubAnswer):
    name: StrictStr


class ProfileAnswer(HubAnswer):
    """`/api/users/{name}/overview`: the organizations the public profile lists."""

    orgs: list[OrganizationAnswer]


class LastCommitAnswer(HubAnswer):
    oid: StrictStr
    date: datetime
    title: StrictStr = ""


class LfsAnswer(HubAnswer):
    sha256: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


class FileAnswer(HubAnswer):
    """A file of paths-info or of a tree listing."""

    path: StrictStr
    size: Annotated[StrictInt, Field(ge=0)]
    blob_id: StrictStr
    lfs: LfsAnswer | None = None
    last_commit: LastCommitAnswer | None = None


class FolderAnswer(HubAnswer):
    """A folder of paths-info or of a tree listing."""

    path: StrictStr
    tree_id: StrictStr
    last_commit: LastCommitAnswer | None = None


class CommitAnswer(HubAnswer):
    """A commit of `/api/datasets/{id}/commits/{rev}`: its id, its authors' Hub names and its
    title."""

    commit_id: StrictStr
    authors: list[StrictStr]
    title: StrictStr


class DiscussionAnswer(HubAnswer):
    """A discussion or pull request of `/api/datasets/{id}/discussions`."""

    num: StrictInt
    title: StrictStr
    status: StrictStr
    author: StrictStr
    is_pull_request: StrictBool


class EventAnswer(HubAnswer):
    """An event of a discussion's details: its id, kind and author."""

    id: StrictStr
    type: StrictStr
    author: StrictStr


class CommentAnswer(EventAnswer):
    content: StrictStr


class CommitEventAnswer(EventAnswer):
    oid: StrictStr


EVENT_ANSWERS: dict[str, type[EventAnswer]] = {
    "comment": CommentAnswer,
    "commit": CommitEventAnswer,
}
"""The events whose own fields the bundler reads (a comment's text, a commit's id)."""


class DetailsAnswer(DiscussionAnswer):
    """`/api/datasets/{id}/discussions/{num}`: a discussion with its events and, for a pull
    request, its target branch, diff and conflicts."""

    target_branch: StrictStr | None = None
    conflicting_files: list[StrictStr] | StrictBool | None = None
    merge_commit_oid: StrictStr | None = None
    diff: StrictStr | None = None
    events: list[EventAnswer]


A = TypeVar("A", bound=HubAnswer)


def validated(model: type[A], answer: Any, *, parsed: bool = False) -> A:
    """`answer` as `model`: the client's object, read by its attributes, or, when `parsed`,
    the JSON the client handed on as it came (where any object of attributes, a list or a
    string among them, would pass a model whose every field has a default). pydantic's
    ValidationError when it is not one, which `HubSession.call` takes for a malformed
    answer."""
    return model.model_validate(answer, from_attributes=not parsed)


def account(answer: Any) -> dict[str, object]:
    """whoami's answer, an object (`WhoAmIAnswer`), as the mapping `AccessRights.of` reads."""
    validated(WhoAmIAnswer, answer, parsed=True)
    return dict(answer)


def checked_discussions(listing: Iterable[Discussion]) -> list[Discussion]:
    """The client's discussions of a listing, each validated (`DiscussionAnswer`)."""
    found = list(listing)
    for item in found:
        validated(DiscussionAnswer, item)
    return found


def checked_details(
    ask: Callable[..., DiscussionWithDetails], *args: Any, **kwargs: Any
) -> DiscussionWithDetails:
    """The client's details of a discussion (`ask(*args, **kwargs)`), once validated
    (`DetailsAnswer`, and each event by its kind's model)."""
    details = ask(*args, **kwargs)
    answer = validated(DetailsAnswer, details)
    for event, found in zip(answer.events, details.events, strict=True):
        validated(EVENT_ANSWERS.get(event.type, EventAnswer), found)
    return details


def remote_entries(
    listing: Callable[[], Iterable[RepoFile | RepoFolder]],
) -> dict[str, RemoteEntry]:
    """The client's files and folders of a paths-info or tree answer as values, each
    validated (`FileAnswer`, `FolderAnswer`)."""
    found: dict[str, RemoteEntry] = {}
    for entry in listing():
        if isinstance(entry, RepoFile):
            file = validated(FileAnswer, entry)
            found[file.path] = RemoteFile(
                path=file.path,
                size=file.size,
                blob_id=file.blob_id,
                lfs_sha256=file.lfs.sha256 if file.lfs else None,
                last_commit=_last(file.last_commit),
            )
        else:
            folder = validated(FolderAnswer, entry)
            last = _last(folder.last_commit)
            found[folder.path] = RemoteFolder(folder.path, folder.tree_id, last)
    return found


def _last(last: LastCommitAnswer | None) -> LastCommit | None:
    return None if last is None else LastCommit(oid=last.oid, date=last.date, title=last.title)


CLIENT_PARSE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError)
"""What the client raises on an answer it cannot read: `response.json()` on text that is not
JSON (a ValueError), `User(**answer)` on a list (TypeError), `item["type"]` on a missing key,
`None.get` (AttributeError)."""
CLIENT_OWN_ERRORS = (HfHubHTTPError, httpx2.HTTPError, HFValidationError)
"""What the client raises for another reason, some of them ValueErrors too: an HTTP error
(a 400 is a `BadRequestError(HfHubHTTPError, ValueError)`), a connection fault, an argument
it refuses."""
_CLIENT_PACKAGE = str(Path(huggingface_hub.__file__).parent)


def unparsed(error: BaseException) -> bool:
    """Whether `error` says the Hub's answer was not what it documents: one of these models
    refused it (pydantic's ValidationError, `validated`), or the client failed to read it,
    which is a CLIENT_PARSE_ERRORS raised from within the client's own code (its traceback
    passes through huggingface_hub) and none of CLIENT_OWN_ERRORS."""
    if isinstance(error, ValidationError):
        return True
    if not isinstance(error, CLIENT_PARSE_ERRORS) or isinstance(error, CLIENT_OWN_ERRORS):
        return False
    frame = error.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_filename.startswith(_CLIENT_PACKAGE):
            return True
        frame = frame.tb_next
    return False
