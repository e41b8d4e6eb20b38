"""In-memory, git-like state of the fake Hub: repos, commits, refs, LFS objects and discussions.

The state is kept close to what the real Hub exposes, because the bundler's logic depends on it:
every commit is a full snapshot with parents (so `parentCommit` checks, history walks and
"did my lost commit land?" questions have real answers), files carry the same ids the Hub
reports (git blob sha1 for regular files, sha256 + pointer for LFS files), and pull requests
live on `refs/pr/N` refs forked from a base branch. Nothing here is thread-safe by itself: the
server serialises every access behind one lock.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Literal

LFS_SUFFIXES = (".tar.zst", ".png")
"""Kept in LFS, as the `.gitattributes` of a new dataset repository on the Hub has `*.png` (under
"Image files - uncompressed") among its patterns."""
LFS_MIN_SIZE = 10 * 1024 * 1024
GITATTRIBUTES = b"".join(
    b"*%s filter=lfs diff=lfs merge=lfs -text\n" % s.encode() for s in LFS_SUFFIXES
)
MAX_FOLDER_ENTRIES = 10_000
"""Hub docs repositories-recommendations: "under 10k entries per folder", and "the maximum
number of files per folder cannot exceed 10k files per folder". The Hub refuses a commit past it
with HTTP 400, its reason (after the client's own "Bad request for commit endpoint:") being "Your
push was rejected because it contains too many files per directory. Each directory in your git
repo can only contain up to 10000 files. Offending reference: refs/heads/main Offending
directories: /data/expression.lance/_transactions/" (huggingface/datasets#7956). Entries are
counted as git counts tree entries: files and subfolders alike."""
MAX_REPO_FILES = 100_000
"""Hub docs repositories-recommendations: "Files per repo <100k", "we recommend keeping the total
number of files under 100k". The Hub documents this as a recommendation, not as a refusal, and
documents no error for it (its maintainers chose to "advertise recommendations instead" of hard
limits, huggingface/huggingface_hub#1565). This server refuses a commit that would leave more
than this many files in the repository, with a 400 worded as the folder limit's: never kinder
than the Hub, so a client that crosses the guidance is caught here first."""
_LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"

RepoType = Literal["model", "dataset", "space"]
REPO_TYPES: tuple[RepoType, ...] = ("model", "dataset", "space")


class HubError(Exception):
    """A request the Hub refuses: becomes an HTTP error with the Hub's error headers."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def repo_not_found(repo_type: str, repo_id: str) -> HubError:
    return HubError(404, f"Repository {repo_type} {repo_id} not found", "RepoNotFound")


def revision_not_found(revision: str) -> HubError:
    return HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")


def gated_repo(repo_type: str, repo_id: str, signed_in: bool) -> HubError:
    """What the Hub answers a download from a gated repository the caller may not read yet."""
    return HubError(
        403 if signed_in else 401,
        f"Access to {repo_type} {repo_id} is restricted. You must have access to it and be "
        "authenticated to access it.",
        "GatedRepo",
    )


def entry_not_found(path: str) -> HubError:
    return HubError(404, f"Entry not found: {path}", "EntryNotFound")


def upload_mode(path: str, size: int) -> Literal["lfs", "regular"]:
    """The Hub decides LFS vs regular from `.gitattributes` and size; this is a fixed stand-in.

    Bundles (`*.tar.zst`) and charts (`*.png`) always go through LFS so the tests exercise the
    LFS batch/PUT/verify path; anything else is regular (base64 inside the commit) unless it is
    10 MiB or more.
    """
    return "lfs" if path.endswith(LFS_SUFFIXES) or size >= LFS_MIN_SIZE else "regular"


def git_blob_oid(data: bytes) -> str:
    """The id git gives a blob, which is what the Hub reports as a regular file's `oid`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def folder_tree_oids(files: Mapping[str, Blob]) -> dict[str, str]:
    """The git tree object id of every folder (`""` is the root), built bottom-up from its
    children's modes, names and ids exactly as git builds tree objects.

    So a folder's oid, like the Hub's, changes exactly when something below it changes, and an
    untouched folder keeps its oid from commit to commit.
    """
    children: dict[str, dict[str, tuple[bool, str]]] = {"": {}}
    for path in files:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            children.setdefault(folder, {})
            parent = "/".join(parts[: depth - 1])
            children[parent].setdefault(parts[depth - 1], (True, ""))
        children["/".join(parts[:-1])][parts[-1]] = (False, files[path].oid)
    oids: dict[str, str] = {}
    for folder in sorted(children, key=lambda f: -f.count("/") - (1 if f else 0)):
        body = bytearray()
        # git sorts tree entries by name, a folder's name as if it ended with "/"
        for name, (is_dir, _) in sorted(
            children[folder].items(), key=lambda item: item[0] + ("/" if item[1][0] else "")
        ):
            oid = (
                oids[f"{folder}/{name}" if folder else name]
                if is_dir
                else children[folder][name][1]
            )
            body += b"%s %s\0" % (b"40000" if is_dir else b"100644", name.encode())
            body += bytes.fromhex(oid)
        oids[folder] = hashlib.sha1(b"tree %d\0" % len(body) + bytes(body)).hexdigest()
    return oids


@dataclass(frozen=True)
class RepoLimits:
    """What a repository may hold after a commit, the Hub's numbers by default; None: no limit.
    Every commit is checked (the commit endpoint's, a pull request's merge, seeded files, the
    initial commit), on the tree it would leave. A test makes them small for one repository
    (`HubServer.create_repo(limits=...)`, `HubServer.set_limits`), or lifts them."""

    folder_entries: int | None = MAX_FOLDER_ENTRIES
    files: int | None = MAX_REPO_FILES

    def check(self, files: Mapping[str, Blob], ref: str) -> None:
        """A 400 HubError when the tree `files`, committed to `ref`, is past a limit."""
        overfull = overfull_folders(files, self.folder_entries)
        if overfull:
            raise HubError(
                400,
                "Your push was rejected because it contains too many files per directory. Each"
                f" directory in your git repo can only contain up to {self.folder_entries} files."
                f" Offending reference: {ref} Offending directories: "
                + ", ".join(f"/{f}/" if f else "/" for f in overfull),
            )
        if self.files is not None and len(files) > self.files:
            raise HubError(
                400,
                f"Your push was rejected because it contains too many files: {len(files)},"
                f" more than the {self.files} a repository may hold (the Hub recommends fewer"
                f" than 100k files per repository). Offending reference: {ref}",
            )


def overfull_folders(files: Mapping[str, Blob], limit: int | None) -> list[str]:
    """Folders holding more than `limit` entries (files and subfolders); none without one."""
    if limit is None:
        return []
    entries: dict[str, set[str]] = {}
    for path in files:
        parts = path.split("/")
        for depth in range(len(parts)):
            entries.setdefault("/".join(parts[:depth]), set()).add(parts[depth])
    return sorted(folder for folder, names in entries.items() if len(names) > limit)


def hub_now() -> str:
    """The Hub's timestamp format, the only one `huggingface_hub.utils.parse_datetime` reads."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Blob:
    """A file's content and how it is stored (LFS or in git)."""

    data: bytes
    lfs: bool
    sha256: str
    oid: str  # git blob id: of the content, or of the LFS pointer for LFS files
    pointer_size: int

    @classmethod
    def make(cls, data: bytes, lfs: bool) -> Blob:
        sha256 = hashlib.sha256(data).hexdigest()
        if not lfs:
            return cls(data, False, sha256, git_blob_oid(data), 0)
        pointer = _LFS_POINTER.format(sha256=sha256, size=len(data)).encode()
        return cls(data, True, sha256, git_blob_oid(pointer), len(pointer))

    @property
    def preupload_oid(self) -> str:
        """What the client compares with its local file to skip unchanged files."""
        return self.sha256 if self.lfs else self.oid

    def entry(self, path: str) -> dict[str, object]:
        """A `tree` / `paths-info` entry."""
        entry: dict[str, object] = {"type": "file", "oid": self.oid, "size": len(self.data)}
        entry["path"] = path
        if self.lfs:
            lfs = {"oid": self.sha256, "size": len(self.data), "pointerSize": self.pointer_size}
            entry["lfs"] = lfs
        return entry

    def sibling(self, path: str, blobs: bool) -> dict[str, object]:
        """A `siblings` item of repo_info (sizes and ids only with `?blobs=true`)."""
        sibling: dict[str, object] = {"rfilename": path}
        if blobs:
            sibling.update(size=len(self.data), blobId=self.oid)
            if self.lfs:
                lfs = {
                    "sha256": self.sha256,
                    "size": len(self.data),
                    "pointerSize": self.pointer_size,
                }
                sibling["lfs"] = lfs
        return sibling


def same_file(a: Blob | None, b: Blob | None) -> bool:
    return (a.oid if a else None) == (b.oid if b else None)


Tree = MappingProxyType[str, Blob]


@dataclass(frozen=True)
class Commit:
    """A full snapshot plus what changed relative to the first parent."""

    oid: str
    parents: tuple[str, ...]
    summary: str
    description: str
    author: str
    created_at: str
    tree: Tree
    added: tuple[str, ...]
    modified: tuple[str, ...]
    deleted: tuple[str, ...]

    def touches(self, path: str) -> bool:
        """Whether this commit changed `path` or, for a folder, anything below it."""
        prefix = path.rstrip("/") + "/"
        return any(
            p == path or p.startswith(prefix) for p in self.added + self.modified + self.deleted
        )


@dataclass(frozen=True)
class Put:
    path: str
    blob: Blob


@dataclass(frozen=True)
class Delete:
    path: str
    folder: bool


Operation = Put | Delete


@dataclass
class Discussion:
    """A discussion or, with `is_pull_request`, a PR whose branch is `refs/pr/{num}`."""

    num: int
    title: str
    author: str
    created_at: str
    is_pull_request: bool
    status: Literal["open", "closed", "merged", "draft"]
    events: list[dict[str, object]] = field(default_factory=list)
    base_branch: str | None = None  # the branch a PR targets
    fork_oid: str | None = None  # the base commit the PR branched from
    head_oid: str | None = None  # the tip of refs/pr/{num}
    merge_commit_oid: str | None = None

    @property
    def description(self) -> str:
        """The Hub shows a discussion's first comment as its description."""
        for event in self.events:
            if event["type"] == "comment":
                data = event["data"]
                assert isinstance(data, dict)
                return str(data["latest"]["raw"])
        return ""


@dataclass(frozen=True)
class BranchRef:
    name: str


@dataclass(frozen=True)
class PullRequestRef:
    num: int


WritableRef = BranchRef | PullRequestRef


@dataclass
class Repo:
    repo_type: RepoType
    repo_id: str
    private: bool
    created_at: str
    gated: bool = False
    """Files are served only to its owners (the Hub's gated repos, before access is granted):
    anyone else may see the repository and list its files, and gets a GatedRepo error on
    every download (401 signed out, 403 signed in)."""
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    discussions: dict[int, Discussion] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)
    limits: RepoLimits = field(default_factory=RepoLimits)

    def resolve(self, revision: str) -> Commit:
        """A branch, `refs/heads/X`, a tag, `refs/pr/N` or a full commit id, as the Hub accepts."""
        name = revision.removeprefix("refs/heads/")
        if name in self.branches:
            return self.commits[self.branches[name]]
        tag = revision.removeprefix("refs/tags/")
        if tag in self.tags:
            return self.commits[self.tags[tag]]
        pr = self.pull_request_of(revision)
        if pr is not None and pr.head_oid is not None:
            return self.commits[pr.head_oid]
        if revision in self.commits:
            return self.commits[revision]
        raise revision_not_found(revision)

    def pull_request_of(self, revision: str) -> Discussion | None:
        prefix = "refs/pr/"
        if not revision.startswith(prefix) or not revision[len(prefix) :].isdigit():
            return None
        found = self.discussions.get(int(revision[len(prefix) :]))
        return found if found is not None and found.is_pull_request else None

    def writable_ref(self, revision: str) -> WritableRef:
        """Where a commit to `revision` goes: commits only land on branches and PR refs."""
        name = revision.removeprefix("refs/heads/")
        if name in self.branches:
            return BranchRef(name)
        pr = self.pull_request_of(revision)
        if pr is not None:
            return PullRequestRef(pr.num)
        if revision in self.commits or revision.removeprefix("refs/tags/") in self.tags:
            raise HubError(400, f"Cannot commit to {revision}: not a branch or a pull request ref")
        raise revision_not_found(revision)

    def head(self, ref: WritableRef) -> str:
        if isinstance(ref, BranchRef):
            return self.branches[ref.name]
        head = self.discussions[ref.num].head_oid
        assert head is not None
        return head

    def move(self, ref: WritableRef, oid: str) -> None:
        if isinstance(ref, BranchRef):
            self.branches[ref.name] = oid
        else:
            self.discussions[ref.num].head_oid = oid

    def find_commit(self, oid_or_prefix: str) -> Commit:
        """A commit by full id or by the short prefix (>= 5 hex) the client also allows."""
        matches = [c for oid, c in self.commits.items() if oid.startswith(oid_or_prefix.lower())]
        if len(matches) != 1:
            raise HubError(400, f"Invalid parentCommit: {oid_or_prefix}")
        return matches[0]

    def history(self, oid: str) -> list[Commit]:
        """First-parent history from `oid`, newest first, like `git log --first-parent`."""
        out = []
        current: str | None = oid
        while current is not None:
            commit = self.commits[current]
            out.append(commit)
            current = commit.parents[0] if commit.parents else None
        return out

    def last_commit_touching(self, head: str, path: str) -> Commit | None:
        return next((c for c in self.history(head) if c.touches(path)), None)


class Store:
    """All repos, keyed by (repo_type, repo_id): a model and a dataset may share an id."""

    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        self._counter = itertools.count(1)
        self._tree_oids: dict[str, dict[str, str]] = {}
        """Folder oids per commit id; a commit's tree never changes, so they never go stale."""

    def folder_oid(self, commit: Commit, folder: str) -> str | None:
        """The git tree id of `folder` (`""` = root) at `commit`, None if it holds nothing."""
        oids = self._tree_oids.get(commit.oid)
        if oids is None:
            oids = self._tree_oids[commit.oid] = folder_tree_oids(commit.tree)
        return oids.get(folder)

    def get(self, repo_type: str, repo_id: str) -> Repo:
        repo = self.repos.get((repo_type, repo_id))
        if repo is None:
            raise repo_not_found(repo_type, repo_id)
        return repo

    def create_repo(self, repo_type: RepoType, repo_id: str, private: bool, author: str) -> Repo:
        """A new repo with the Hub's "initial commit" holding `.gitattributes` on `main`."""
        if (repo_type, repo_id) in self.repos:
            raise HubError(409, f"You already created this {repo_type} repo")
        repo = Repo(repo_type, repo_id, private, hub_now())
        initial = self.make_commit(
            repo,
            None,
            [Put(".gitattributes", Blob.make(GITATTRIBUTES, False))],
            "initial commit",
            "",
            author,
        )
        repo.branches["main"] = initial.oid
        self.repos[(repo_type, repo_id)] = repo
        return repo

    def make_commit(
        self,
        repo: Repo,
        parent: str | None,
        operations: list[Operation],
        summary: str,
        description: str,
        author: str,
        ref: str = "refs/heads/main",
    ) -> Commit:
        """Apply `operations` on top of `parent` and record the commit (no ref is moved); `ref`
        is where it is going, which a refusal names as the Hub's does."""
        before: Tree = repo.commits[parent].tree if parent else MappingProxyType({})
        files = dict(before)
        for op in operations:
            if isinstance(op, Put):
                files[op.path] = op.blob
            elif op.folder:
                prefix = op.path.rstrip("/") + "/"
                doomed = [p for p in files if p.startswith(prefix)]
                if not doomed:
                    raise entry_not_found(op.path)
                for p in doomed:
                    del files[p]
            elif files.pop(op.path, None) is None:
                raise HubError(
                    404, f"A file with this name doesn't exist: {op.path}", "EntryNotFound"
                )
        return self._record(
            repo, (parent,) if parent else (), files, before, summary, description, author, ref
        )

    def _record(
        self,
        repo: Repo,
        parents: tuple[str, ...],
        files: dict[str, Blob],
        before: Tree,
        summary: str,
        description: str,
        author: str,
        ref: str,
    ) -> Commit:
        repo.limits.check(files, ref)
        digest = hashlib.sha1(f"{next(self._counter)}\0{parents}\0{summary}\0".encode())
        for path in sorted(files):
            digest.update(f"{path}\0{files[path].oid}\0".encode())
        commit = Commit(
            oid=digest.hexdigest(),
            parents=parents,
            summary=summary,
            description=description,
            author=author,
            created_at=hub_now(),
            tree=MappingProxyType(files),
            added=tuple(sorted(p for p in files if p not in before)),
            modified=tuple(
                sorted(p for p in files if p in before and not same_file(before[p], files[p]))
            ),
            deleted=tuple(sorted(p for p in before if p not in files)),
        )
        repo.commits[commit.oid] = commit
        return commit

    def merge(self, repo: Repo, pr: Discussion, author: str) -> Commit:
        """Squash-merge a PR: replay only the PR's own changes onto the current base head.

        The PR's changes are the difference between its fork point and its tip; a path changed
        both by the PR and (differently) on the base since the fork is a conflict (409).
        """
        assert pr.base_branch is not None and pr.fork_oid is not None and pr.head_oid is not None
        conflicts = conflicting_files(repo, pr)
        if conflicts:
            raise HubError(409, f"Merge conflict on: {', '.join(conflicts)}")
        fork = repo.commits[pr.fork_oid].tree
        tip = repo.commits[pr.head_oid].tree
        base_head = repo.branches[pr.base_branch]
        files = dict(repo.commits[base_head].tree)
        for path in set(fork) | set(tip):
            if not same_file(fork.get(path), tip.get(path)):
                if path in tip:
                    files[path] = tip[path]
                else:
                    files.pop(path, None)
        before = repo.commits[base_head].tree
        summary = f"{pr.title} (#{pr.num})"
        commit = self._record(
            repo,
            (base_head,),
            files,
            before,
            summary,
            pr.description,
            author,
            f"refs/heads/{pr.base_branch}",
        )
        repo.branches[pr.base_branch] = commit.oid
        return commit


def conflicting_files(repo: Repo, pr: Discussion) -> list[str]:
    """Paths changed by the PR and, differently, on its base branch since the PR forked."""
    if pr.base_branch is None or pr.fork_oid is None or pr.head_oid is None:
        return []
    if pr.base_branch not in repo.branches:
        return []
    fork = repo.commits[pr.fork_oid].tree
    tip = repo.commits[pr.head_oid].tree
    base = repo.commits[repo.branches[pr.base_branch]].tree
    return sorted(
        path
        for path in set(fork) | set(tip)
        if not same_file(fork.get(path), tip.get(path))
        and not same_file(fork.get(path), base.get(path))
        and not same_file(tip.get(path), base.get(path))
    )


_NO_BLOB = "0" * 40


def pull_request_diff(repo: Repo, pr: Discussion) -> str:
    """The PR's git diff, as the Hub's details carry it with `?diff=1`: from the commit the PR
    branched from to its head, one `diff --git` section per changed file, with full blob ids on
    the `index` line (huggingface_hub docs, guides/community: `get_discussion_details(...)`
    shows `diff='diff --git a/README.md b/README.md\\nindex a6ae3b92...7e..3a1814f2...e3
    100644\\n--- a/README.md\\n+++ b/README.md\\n@@ -132,7 +132,7 [...]'`, and "For Pull
    Requests, you can retrieve the raw git diff with DiscussionWithDetails.diff"). An LFS file
    shows its pointer, as git sees it; a file that is not text, `Binary files ... differ`."""
    if pr.fork_oid is None or pr.head_oid is None:
        return ""
    fork, head = repo.commits[pr.fork_oid].tree, repo.commits[pr.head_oid].tree
    sections = []
    for path in sorted(set(fork) | set(head)):
        before, after = fork.get(path), head.get(path)
        if not same_file(before, after):
            sections.append(_file_diff(path, before, after))
    return "".join(sections)


def _file_diff(path: str, before: Blob | None, after: Blob | None) -> str:
    old, new = _git_quoted("a/", path), _git_quoted("b/", path)
    lines = [f"diff --git {old} {new}"]
    if before is None:
        lines.append("new file mode 100644")
    elif after is None:
        lines.append("deleted file mode 100644")
    mode = " 100644" if before is not None and after is not None else ""
    lines.append(
        f"index {before.oid if before else _NO_BLOB}..{after.oid if after else _NO_BLOB}{mode}"
    )
    old_text, new_text = _diff_text(before), _diff_text(after)
    old_name = old if before is not None else "/dev/null"
    new_name = new if after is not None else "/dev/null"
    if old_text is None or new_text is None:
        lines.append(f"Binary files {old_name} and {new_name} differ")
    else:
        lines += [f"--- {old_name}", f"+++ {new_name}"]
        hunks = difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), lineterm="")
        lines += list(hunks)[2:]  # difflib's own file header lines, which git's replace
    return "\n".join(lines) + "\n"


def _diff_text(blob: Blob | None) -> str | None:
    """What git diffs of a file: its text (an LFS pointer for an LFS file), "" for no file,
    None for content that is not text."""
    if blob is None:
        return ""
    data = (
        _LFS_POINTER.format(sha256=blob.sha256, size=len(blob.data)).encode()
        if blob.lfs
        else blob.data
    )
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _git_quoted(prefix: str, path: str) -> str:
    """`prefix + path` as git writes a path in a diff header: as it is, or between double quotes
    with C escapes when it holds a quote, a backslash, a control character or a byte past ASCII
    (git's `core.quotePath`, on by default)."""
    raw = (prefix + path).encode("utf-8")
    if not any(byte < 0x20 or byte >= 0x7F or byte in b'"\\' for byte in raw):
        return prefix + path
    named = {ord("\t"): "\\t", ord("\n"): "\\n", ord('"'): '\\"', ord("\\"): "\\\\"}
    return (
        '"'
        + "".join(
            named.get(byte) or (chr(byte) if 0x20 <= byte < 0x7F else f"\\{byte:03o}")
            for byte in raw
        )
        + '"'
    )
