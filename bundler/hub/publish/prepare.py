"""The repository an upload goes to: it must exist, and the token's rights are checked against
it, before anything is transferred (bundler.hub.client.access says who may do what).

Only `start_leaderboard` (bundler.hub.maintain.board_start) creates a repository: an upload into
one that does not exist, a typo in the id most likely, is refused, never published into a new
repository nobody will read.
"""

from __future__ import annotations

from bundler.core.errors import RepositoryNotFound, WrongRepoType
from bundler.hub.client.access import check_upload
from bundler.hub.client.exists import dataset_exists, other_type_exists
from bundler.hub.client.session import HubSession
from bundler.hub.publish.plan import UploadOptions


def prepare_repository(session: HubSession, options: UploadOptions) -> str | None:
    """The token's user (None for an anonymous dry run), once the dataset repository is known
    to exist and to take this upload. Raises RepositoryNotFound for a repository that does
    not exist (or this token cannot see), WrongRepoType for one of another type under the id,
    and HubAccessError for what the token may not do there."""
    rights = session.upload_rights(dry_run=options.dry_run)  # client.access
    if not dataset_exists(session, options.revision):  # and the branch's head, for its read
        other = other_type_exists(session)
        if other is not None:
            raise WrongRepoType(options.repo_id, other)
        raise RepositoryNotFound(options.repo_id)
    check_upload(rights, create_pr=options.create_pr)
    return rights.user if rights is not None else None
