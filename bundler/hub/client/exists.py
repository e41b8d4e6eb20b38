"""Whether a repository exists under an id, and of which type: asked before anything is
planned or transferred, so that a typo in the id reads as one, never as a raw 404.

Each lookup asks for the sha alone (`expand`), as `HubSession.head` does: the Hub's whole
answer lists every file (`siblings`). An upload's lookup names its branch, so the same answer
gives the head its read of the branch starts from (`HubSession.heads`): one request fewer. It
asks for the card's metadata too (`cardData`), to learn whether the branch has a card: without
one, the upload's commit adds README.md to the top folder, so its read of the branch lists that
folder first (bundler.hub.leaderboard.firstlisting). The Hub answers only the properties named
in `expand` (`HfApi.dataset_info`: "When used, only the properties in the list will be
returned"), and `cardData` is the card's YAML header as a mapping, absent where there is no
README.md: a few hundred bytes for the board's own card (and one entry a task), the same at
any number of bundles. The answer is read as JSON, not by the client, whose card model raises
on metadata a card may hold (bundler.hub.tasks.split_size).
"""

from __future__ import annotations

from functools import partial
from urllib.parse import quote

from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

from bundler.hub.client.answers import BranchAnswer
from bundler.hub.client.session import MAX_SMALL_FILE_BYTES, REPO_TYPE, HubSession, fetch_once


def dataset_exists(session: HubSession, revision: str | None = None) -> bool:
    """Whether the session's dataset repository exists. With `revision`, the commit it points
    at is kept for the next `head(revision)` (RevisionNotFound when there is none)."""
    return session.call("looking up the repository", partial(_exists, session, REPO_TYPE, revision))


def model_exists(session: HubSession) -> bool:
    """Whether the Hub has a model repository of the session's id (one to propose scores to)."""
    return session.call("looking up the model repository", partial(_exists, session, "model", None))


def other_type_exists(session: HubSession) -> str | None:
    """The repository type that does exist under the session's id, if it is not a dataset."""
    for repo_type in ("model", "space"):
        if session.call("looking up the repository", partial(_exists, session, repo_type, None)):
            return repo_type
    return None


def _exists(session: HubSession, repo_type: str, revision: str | None) -> bool:
    """`HfApi.repo_exists`, asking for the sha alone: a gated repository exists, one the Hub
    does not find (or hides) does not."""
    api, repo_id = session.api, session.repo_id
    try:
        if repo_type == "model":
            api.model_info(repo_id, expand=["sha"])
        elif repo_type == "space":
            api.space_info(repo_id, expand=["sha"])
        elif revision is None:
            api.dataset_info(repo_id, expand=["sha"])
        else:
            branch = _branch(session, revision)
            if branch.sha is not None:
                session.heads[revision] = branch.sha
                if branch.card_data is None:
                    session.no_card.add(branch.sha)
    except GatedRepoError:  # a RepositoryNotFoundError too, but it is there
        return True
    except RepositoryNotFoundError:
        return False
    return True


def _branch(session: HubSession, revision: str) -> BranchAnswer:
    """The commit `revision` points at, and whether its card has metadata, in one GET (not
    retried here: `_exists` runs in `HubSession.call`); an answer past MAX_SMALL_FILE_BYTES,
    far more than any card's metadata the Hub takes, is refused."""
    at = quote(revision, safe="")
    url = f"{session.api.endpoint}/api/{REPO_TYPE}s/{session.repo_id}/revision/{at}"
    chunks: list[bytes] = []
    asked = f"{url}?expand=sha&expand=cardData"
    fetch_once(session, asked, "the branch's information", MAX_SMALL_FILE_BYTES, chunks.append)
    return BranchAnswer.model_validate_json(b"".join(chunks))  # ValidationError: malformed
