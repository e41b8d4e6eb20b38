"""Whether a repository exists under an id, and of which type: asked before anything is
planned or transferred, so that a typo in the id reads as one, never as a raw 404.

Each lookup asks for the sha alone (`expand`), as `HubSession.head` does: the Hub's whole
answer lists every file (`siblings`). An upload's lookup names its branch, so the same answer
gives the head its read of the branch starts from (`HubSession.heads`): one request fewer.
"""

from __future__ import annotations

from functools import partial

from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

from bundler.hub.client.answers import RevisionAnswer, validated
from bundler.hub.client.session import REPO_TYPE, HubSession


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
        else:
            info = api.dataset_info(repo_id, revision=revision, expand=["sha"])
            sha = validated(RevisionAnswer, info).sha
            if revision is not None and sha is not None:
                session.heads[revision] = sha
    except GatedRepoError:  # a RepositoryNotFoundError too, but it is there
        return True
    except RepositoryNotFoundError:
        return False
    return True
