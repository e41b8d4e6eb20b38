"""The Hub's limits on what a commit leaves in a repository, checked before the commit is sent.

Hub docs repositories-recommendations: "the maximum number of files per folder cannot exceed
10k files per folder", which the Hub enforces (a commit past it is refused with HTTP 400, "Your
push was rejected because it contains too many files per directory", huggingface/datasets#7956),
and "we recommend keeping the total number of files under 100k", a recommendation whose breach
the docs promise no refusal for, only a degraded experience. A commit past either is not sent:
`check_commit` raises HubLimitReached, naming the folder or the count, and the caller reports
the bundles the commit held as refused.

Generic over paths: a commit's added paths put a name in each folder above them (a file in
its folder, a new folder in its parent). Cost: no listing of the repository. One paths-info
request (per 500 paths) says which of those folders and files exist already; only the folders
that gain entries are listed, one request per 1,000 entries as the Hub pages them; neither
is asked of what the session's answers about that commit told already (bundler.hub.client.known:
an upload's read of its branch, and its own previous commit). The
repository's file count is not listed either: the caller passes what it knows (the leaderboard's
table lists every bundle), and the commit's new files are added to it.

Plain values and functions, with the reading passed in (`commit_replanned` passes its session's),
so that the options models can name the limits without loading the Hub client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from bundler.core.environment import MAX_REPO_FILES_ENV, max_repo_files
from bundler.core.errors import BundlerError

Limit = Literal["folder-entries", "repository-files"]


def max_files_from_env() -> int:
    """MAX_REPO_FILES_ENV's number, read when a command runs, else RECOMMENDED_FILES: two files a
    bundle reach the Hub's recommended 100,000 at about 50,000 bundles."""
    return max_repo_files() or RECOMMENDED_FILES


RECOMMENDED_FILES = 100_000


@dataclass(frozen=True)
class HubLimits:
    """What a repository may hold after a commit: the Hub's documented numbers, unless a
    caller knows its repository may hold more (MAX_REPO_FILES_ENV) or, in tests, less. Made when a
    command runs (HubSession.limits), never at import: MAX_REPO_FILES_ENV is read then."""

    folder_entries: int = 10_000
    """Entries (files and folders) a folder may hold: the Hub refuses a commit past it."""
    repository_files: int = field(default_factory=max_files_from_env)
    """Files a repository should hold: the Hub recommends staying under RECOMMENDED_FILES."""


class HubLimitReached(BundlerError):
    """A commit would leave more than the Hub allows (`limit` "folder-entries", in `folder`)
    or recommends (`limit` "repository-files"): `count` is what it would leave, `maximum` the
    limit. Nothing was sent; the person must choose where the bundles go (exit 1)."""

    kind: ClassVar[str] = "hub-limit-reached"

    def __init__(
        self, limit: Limit, *, count: int, maximum: int, folder: str | None = None
    ) -> None:
        if limit == "folder-entries":
            shown = f"{folder}/" if folder else "the repository's top folder"
            message = (
                f"{shown}: this commit would leave {count:,} entries in the folder, more than the "
                f"{maximum:,} the Hub allows a folder; it would refuse the commit"
            )
            hint = "make room in that folder, or publish these bundles to another repository"
        else:
            allowed = (
                "the Hub recommends a repository hold"
                if maximum == RECOMMENDED_FILES
                else f"allowed here ({MAX_REPO_FILES_ENV})"
            )
            message = (
                f"this commit would bring the repository to {count:,} files, more than the "
                f"{maximum:,} {allowed}"
            )
            hint = (
                "publish further bundles to another repository, or, where the Hub has agreed "
                f"more files with the repository's owners, set {MAX_REPO_FILES_ENV}"
            )
        super().__init__(message, hint=hint)
        self.limit, self.count, self.maximum, self.folder = limit, count, maximum, folder


def entries_added(paths: Iterable[str]) -> dict[str, set[str]]:
    """Each folder (`""` the top) that `paths` lie in, with the names they put in it: for
    `a/b/c`, `a` in the top folder, `b` in `a`, `c` in `a/b`."""
    entries: dict[str, set[str]] = {}
    for path in paths:
        parts = path.split("/")
        for depth in range(len(parts)):
            entries.setdefault("/".join(parts[:depth]), set()).add(parts[depth])
    return entries


def _inside(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def check_commit(
    added: list[str],
    *,
    existing: Callable[[list[str]], set[str]],
    entries_in: Callable[[str], int],
    files_before: int | None,
    limits: HubLimits | None = None,
) -> None:
    """Refuse (HubLimitReached) a commit adding the files `added` that would leave the
    repository with more files than `limits` allow, when `files_before` (the files it holds
    before the commit, as the caller knows them) is given, or a folder with more entries.
    `existing` says which of some paths, files or folders, the repository holds; `entries_in`
    counts a folder's entries (see the module docstring for what they cost)."""
    if not added:
        return
    limits = limits or HubLimits()
    entries = entries_added(added)
    named = sorted({_inside(folder, name) for folder, names in entries.items() for name in names})
    held = existing(named)
    if files_before is not None:
        after = files_before + sum(path not in held for path in set(added))
        if after > limits.repository_files and after > files_before:
            raise HubLimitReached("repository-files", count=after, maximum=limits.repository_files)
    for folder, names in sorted(entries.items()):
        new = sum(_inside(folder, name) not in held for name in names)
        if not new:
            continue
        count = (entries_in(folder) if not folder or folder in held else 0) + new
        if count > limits.folder_entries:
            raise HubLimitReached(
                "folder-entries", count=count, maximum=limits.folder_entries, folder=folder
            )
