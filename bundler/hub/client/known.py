"""What a session has learned of a commit's tree from the Hub's answers, so that the limits
check before a commit (bundler.hub.client.limits) asks only what no answer has told it yet.

A commit's tree never changes, so an answer about it stays true: a paths-info answer says which
of the paths asked exist, a folder's listing names every entry of the folder (and, listed
recursively, of every folder below it), and a folder that does not exist holds nothing. The
tree of our own commit is the tree of its parent with the paths it added (`after`): a folder
the parent did not have holds exactly what the commit put in it. So the check before an
upload's first commit into a new repository asks only for a listing of the top folder (reading
the branch asked already about every folder the commit adds to but that one, which every
repository has: no answer about a path says how many entries it holds), and the check before
its next commit asks nothing at all. A commit that deletes or copies is not followed: what is
known of its tree starts again from nothing.

Bounded: what is learned of one commit stops at MAX_LEARNED_ENTRIES paths (an audit that lists
every folder of a large board learns its first folders only; the check then asks), and a
session keeps what it knows of KEPT_COMMITS commits at most.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
"""A revision that names one commit, whose tree no later commit changes."""
KEPT_COMMITS = 4
"""Commits a session keeps what it learned of: the branch's head, the record's commit, ours."""
MAX_LEARNED_ENTRIES = 10_000
"""Paths learned of one commit at most (as many as a folder may hold): an answer that would
take it past this is not learned."""


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _name(path: str) -> str:
    return path.rpartition("/")[2]


def _ancestors(path: str) -> list[str]:
    """The folders `path` lies in, the top one (`""`) first."""
    parts = path.split("/")
    return ["/".join(parts[:depth]) for depth in range(len(parts))]


class KnownTree:
    """What is known of one commit's tree: paths known to exist or not, and folders whose
    every entry is known (by name)."""

    def __init__(self, commit: str) -> None:
        self.commit = commit
        self.present: set[str] = set()
        self.absent: set[str] = set()
        self.listed: dict[str, set[str]] = {}
        """Folders listed in full: each entry's name."""

    def learn_paths(self, asked: Iterable[str], found: Iterable[str]) -> None:
        """A paths-info answer: of the paths `asked`, those `found` exist, the others not."""
        there, asked = set(found), list(asked)
        if not self._room(len(asked)):
            return
        for path in asked:
            (self.present if path in there else self.absent).add(path)

    def learn_listing(self, folder: str, paths: Iterable[str]) -> None:
        """A listing of `folder` naming `paths`, its files and folders (listed recursively,
        those of every folder below it too: each is then known in full)."""
        paths = list(paths)
        if not self._room(len(paths)):
            return
        found: dict[str, set[str]] = {folder: set()}
        for path in paths:
            self.present.add(path)
            found.setdefault(_parent(path), set()).add(_name(path))
        self.listed.update(found)

    def _room(self, more: int) -> bool:
        """Whether `more` paths may still be learned (MAX_LEARNED_ENTRIES)."""
        return len(self.present) + len(self.absent) + more <= MAX_LEARNED_ENTRIES

    def exists(self, path: str) -> bool | None:
        """Whether the commit holds `path` (a file or a folder); None when nothing says."""
        if path in self.present:
            return True
        if path in self.absent:
            return False
        for folder in _ancestors(path):
            inner = path[len(folder) + 1 :] if folder else path
            child = inner.split("/")[0]
            if folder in self.absent:
                return False
            if folder in self.listed and child not in self.listed[folder]:
                return False
        return True if _parent(path) in self.listed else None

    def entries(self, folder: str) -> int | None:
        """How many entries `folder` holds; None when nothing says."""
        if folder in self.listed:
            return len(self.listed[folder])
        return 0 if folder and self.exists(folder) is False else None

    def after(self, commit: str, added: Iterable[str]) -> KnownTree:
        """What is known of `commit`, made on this one adding `added` and nothing else
        (nothing, past MAX_LEARNED_ENTRIES)."""
        known, added = KnownTree(commit), list(added)
        if not self._room(2 * len(added)):  # each path, and about as many new folders
            return known
        known.present, known.absent = set(self.present), set(self.absent)
        known.listed = {folder: set(names) for folder, names in self.listed.items()}
        for path in added:
            for folder, inner in zip(_ancestors(path), [*_ancestors(path)[1:], path], strict=True):
                if folder in known.listed:
                    known.listed[folder].add(_name(inner))
                elif folder and self.exists(folder) is False:
                    known.listed[folder] = {_name(inner)}  # new: it holds what the commit put
                known.present.add(inner)
                known.absent.discard(inner)
        return known


class KnownTrees:
    """What a session knows of the last KEPT_COMMITS commits it asked about."""

    def __init__(self) -> None:
        self._trees: dict[str, KnownTree] = {}

    def of(self, revision: str) -> KnownTree | None:
        """What is known of `revision`'s tree, where it names one commit (made, if new)."""
        if not COMMIT_SHA.fullmatch(revision):
            return None
        tree = self._trees.pop(revision, None) or KnownTree(revision)
        self._keep(tree)
        return tree

    def committed(self, parent: str, commit: str, added: list[str] | None) -> None:
        """Our `commit` landed on `parent`, adding `added` (None: it deleted or copied too)."""
        tree = self._trees.get(parent)
        if tree is not None and added is not None:
            self._keep(tree.after(commit, added))

    def _keep(self, tree: KnownTree) -> None:
        self._trees[tree.commit] = tree
        while len(self._trees) > KEPT_COMMITS:
            del self._trees[next(iter(self._trees))]
