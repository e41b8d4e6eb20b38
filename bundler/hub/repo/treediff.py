"""What changed below a folder of the repository between two commits, at the cost of what
changed: each folder's listing at both commits is compared, and a subfolder whose git tree id
is the same at both is skipped whole, so a walk costs two listings per changed folder on the
way down, whatever the repository holds and however deep its layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bundler.hub.client.remote import RemoteEntry, RemoteFile, RemoteFolder
from bundler.hub.client.session import HubSession


@dataclass(frozen=True)
class FolderChange:
    """A folder whose own files changed between the two commits, or that is gone."""

    folder: str
    now: dict[str, RemoteFile]
    """Its files at the later commit (none when it is gone)."""
    then: dict[str, RemoteFile]
    """Its files at the earlier commit; for a folder that is gone, every file below it."""
    gone: bool = False


def folder_changes(
    session: HubSession, root: str, head: str, since: str | None
) -> Iterator[FolderChange]:
    """The folders below `root` (itself included) whose files differ between `since` (nothing
    there when None) and `head`."""
    folders = [root]
    while folders:
        folder = folders.pop()
        now = session.list_folder(folder, head)
        then = session.list_folder(folder, since) if since is not None else {}
        for path in sorted(set(now) | set(then)):
            was, is_now = then.get(path), now.get(path)
            if isinstance(is_now, RemoteFolder):
                if not (isinstance(was, RemoteFolder) and was.tree_id == is_now.tree_id):
                    folders.append(path)
            elif isinstance(was, RemoteFolder) and since is not None:
                yield FolderChange(path, {}, session.list_files(path, since), gone=True)
        files_now, files_then = _files(now), _files(then)
        if files_now != files_then:
            yield FolderChange(folder, files_now, files_then)


def _files(listing: dict[str, RemoteEntry]) -> dict[str, RemoteFile]:
    return {path: entry for path, entry in listing.items() if isinstance(entry, RemoteFile)}
