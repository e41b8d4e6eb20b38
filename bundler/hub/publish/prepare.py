"""The repository an upload goes to: the token's rights checked against it, and the dataset
repository created when it is missing and the token may create it.

Nothing is transferred before this passes (bundler.hub.client.access says who may do what).
"""

from __future__ import annotations

from bundler.core.errors import WrongRepoType
from bundler.hub.client.access import check_upload
from bundler.hub.client.session import REPO_TYPE, HubSession
from bundler.hub.publish.plan import UploadOptions, UploadReport


def prepare_repository(
    session: HubSession, options: UploadOptions, report: UploadReport
) -> tuple[bool, str | None]:
    """Whether the dataset repository exists (created unless a dry run), and the token's
    user (None for an anonymous dry run). Raises HubAccessError for what the token may not do
    there, or a repository of another type under the id."""
    rights = session.upload_rights(dry_run=options.dry_run)  # client.access
    user = rights.user if rights is not None else None
    if session.dataset_exists():
        check_upload(rights, repo_exists=True, create_pr=options.create_pr)
        return True, user
    other = session.other_type_exists()
    if other is not None:
        raise WrongRepoType(options.repo_id, other)
    check_upload(rights, repo_exists=False, create_pr=options.create_pr)
    if options.dry_run:
        return False, user
    try:
        session.api.create_repo(
            options.repo_id, repo_type=REPO_TYPE, private=options.private, exist_ok=True
        )
    except Exception as error:
        raise session.describe(error, doing="creating the dataset repository") from None
    report.repo_created = True
    return True, user
