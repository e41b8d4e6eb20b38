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
import fnmatch
import hashlib
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

DEFAULT_LFS_PATTERNS = (
    "*.7z *.arrow *.bin *.bz2 *.ckpt *.ftz *.gz *.h5 *.joblib *.lfs.* *.lz4 *.mds *.mlmodel"
    " *.model *.msgpack *.npy *.npz *.onnx *.ot *.parquet *.pb *.pickle *.pkl *.pt *.pth *.rar"
    " *.safetensors saved_model/**/* *.tar.* *.tar *.tflite *.tgz *.wasm *.xz *.zip *.zst"
    " *tfevents*",
    "# Audio files - uncompressed",
    "*.pcm *.sam *.raw",
    "# Audio files - compressed",
    "*.aac *.flac *.mp3 *.ogg *.wav",
    "# Image files - uncompressed",
    "*.bmp *.gif *.png *.tiff",
    "# Image files - compressed",
    "*.jpg *.jpeg *.webp",
    "# Video files - compressed",
    "*.mp4 *.webm",
)
"""The `.gitattributes` the Hub writes in the "initial commit" of a new dataset repository: 59
lines, each pattern `filter=lfs diff=lfs merge=lfs -text`, in this order, with these comments
(as served for such commits, e.g. huggingface.co/datasets/Fundama/MachineLearningDataset/blob/
main/.gitattributes and the initial commit's diff at huggingface.co/datasets/OpenSQZ/
Classifiers-Data/commit/45ca583f.diff, "+59 -0"). What the bundler writes falls under it:
bundles (`*.tar.*`, `*.zst`), leaderboard tables (`*.parquet`), charts (`*.png`, "Image files -
uncompressed"), all in LFS; JSON, YAML and the card match nothing."""
LFS_PATTERNS = tuple(
    pattern for line in DEFAULT_LFS_PATTERNS if not line.startswith("#") for pattern in line.split()
)
LFS_MIN_SIZE = 10 * 1024 * 1024
GITATTRIBUTES = b"".join(
    (line + "\n").encode()
    if line.startswith("#")
    else b"".join(b"%s filter=lfs diff=lfs merge=lfs -text\n" % p.encode() for p in line.split())
    for line in DEFAULT_LFS_PATTERNS
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


def upload_mode(path: str, size: int, sample: bytes) -> Literal["lfs", "regular"]:
    """What the Hub's preupload answers for a file: "lfs" when a new repository's `.gitattributes`
    tracks its name (`LFS_PATTERNS`), when its content is binary, or when it is 10 MiB or more;
    else "regular" (base64 inside the commit).

    The content is judged from `sample`, the first 512 bytes huggingface_hub sends with each file
    in its preupload request (`UploadInfo.sample`, `_fetch_upload_modes`) so that the Hub can tell
    binary from text, as git does: a NUL byte makes it binary. The Hub refuses binary files
    outside LFS ("Your push was rejected because it contains binary files. Please use
    https://git-lfs.github.com/ to store binary files", huggingface/huggingface_hub#687,
    git-lfs/git-lfs#5834), so a binary file is never "regular" here, whatever its name.
    """
    name = path.rsplit("/", 1)[-1]
    tracked = any(
        fnmatch.fnmatchcase(path if "/" in pattern else name, pattern) for pattern in LFS_PATTERNS
    )
    binary = b"\0" in sample
    return "lfs" if tracked or binary or size >= LFS_MIN_SIZE else "regular"


def git_blob_oid(data: bytes) -> str:
    """The id git gives a blob, which is what the Hub reports as a regular file's `oid`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Folder:
    """One folder of a commit's tree, as git keeps a tree object: its files, its subfolders, and
    (once asked) its git tree id.

    Commits share the folders they leave alone: a commit copies only the folders on the way to
    the paths it changes (`TreeEdit`), so a folder never changes once its commit is recorded and
    its id, computed once, holds for every commit that shares it. A commit's server cost is then
    that of what it changes, as on the Hub, rather than of every file in the repository. Files
    and subfolders are kept apart, as the flat tree they index can name a file `a` and a folder
    `a/` at once.
    """

    __slots__ = ("_oid", "files", "folders")

    def __init__(
        self, files: dict[str, Blob] | None = None, folders: dict[str, Folder] | None = None
    ) -> None:
        self.files = files if files is not None else {}
        self.folders = folders if folders is not None else {}
        self._oid: str | None = None

    def copy(self) -> Folder:
        return Folder(dict(self.files), dict(self.folders))

    @property
    def entries(self) -> int:
        """Its git tree entries (files and subfolders), as the Hub's folder limit counts them."""
        return len(self.files.keys() | self.folders.keys())

    @property
    def oid(self) -> str:
        """The git tree object id, built from its children's modes, names and ids exactly as git
        builds tree objects: so a folder's id, like the Hub's, changes exactly when something
        below it changes, and an untouched folder keeps its id from commit to commit."""
        if self._oid is None:
            children = [(name, b"100644", blob.oid) for name, blob in self.files.items()]
            children += [(name + "/", b"40000", sub.oid) for name, sub in self.folders.items()]
            body = bytearray()
            # git sorts tree entries by name, a folder's name as if it ended with "/"
            for name, mode, oid in sorted(children):
                body += b"%s %s\0" % (mode, name.removesuffix("/").encode())
                body += bytes.fromhex(oid)
            self._oid = hashlib.sha1(b"tree %d\0" % len(body) + bytes(body)).hexdigest()
        return self._oid

    def file(self, path: str) -> Blob | None:
        """The file at `path` below this folder, None if there is none."""
        *parts, name = path.split("/")
        node: Folder | None = self
        for part in parts:
            node = node.folders.get(part) if node is not None else None
        return node.files.get(name) if node is not None else None

    def find(self, folder: str) -> Folder | None:
        """The folder at path `folder` below this one (`""`: this one), None if there is none."""
        node: Folder | None = self
        for name in folder.split("/") if folder else ():
            node = node.folders.get(name) if node is not None else None
        return node

    def file_paths(self, prefix: str) -> Iterator[str]:
        """The path of every file below, each starting with `prefix` (this folder's path + "/")."""
        yield from (prefix + name for name in self.files)
        for name, sub in self.folders.items():
            yield from sub.file_paths(f"{prefix}{name}/")

    def listing(self, prefix: str, recursive: bool) -> Iterator[str]:
        """The paths of its files and subfolders (and, `recursive`, of everything below)."""
        yield from (prefix + name for name in self.files.keys() | self.folders.keys())
        if recursive:
            for name, sub in self.folders.items():
                yield from sub.listing(f"{prefix}{name}/", True)

    def subfolders(self, path: str) -> Iterator[tuple[str, Folder]]:
        """(path, folder) of this folder, at `path`, and of every folder below it."""
        yield path, self
        for name, sub in self.folders.items():
            yield from sub.subfolders(f"{path}/{name}" if path else name)


class TreeEdit:
    """The folders of one new commit: a copy of the parent's root, whose folders are copied on
    the first change below them (copy on write), so the parent's, shared, never change; and
    the paths it changed, which alone can be the commit's added, modified or deleted files."""

    def __init__(self, parent: Folder) -> None:
        self.root = parent.copy()
        self.changed: set[str] = set()
        self._own = {id(self.root): self.root}
        """This commit's own folders, which may change in place, by identity (and held, so that
        no other folder takes the id of one that was dropped)."""

    def _chain(self, parts: list[str], create: bool) -> list[Folder] | None:
        """This commit's own copies of the folders from the root to `parts`, copied (or, with
        `create`, created) as needed; None when a folder on the way does not exist."""
        chain = [self.root]
        for name in parts:
            parent = chain[-1]
            child = parent.folders.get(name)
            if child is None or id(child) not in self._own:
                if child is None and not create:
                    return None
                child = parent.folders[name] = child.copy() if child is not None else Folder()
                self._own[id(child)] = child
            chain.append(child)
        return chain

    @staticmethod
    def _prune(chain: list[Folder], parts: list[str]) -> None:
        """Drop the folders left empty at the end of `chain`: git keeps no empty folder."""
        for depth in range(len(parts), 0, -1):
            if chain[depth].files or chain[depth].folders:
                return
            del chain[depth - 1].folders[parts[depth - 1]]

    def put(self, path: str, blob: Blob) -> None:
        *parts, name = path.split("/")
        chain = self._chain(parts, create=True)
        assert chain is not None
        chain[-1].files[name] = blob
        self.changed.add(path)

    def delete(self, path: str) -> bool:
        """Remove the file `path`; False when there is no such file."""
        *parts, name = path.split("/")
        chain = self._chain(parts, create=False)
        if chain is None or chain[-1].files.pop(name, None) is None:
            return False
        self._prune(chain, parts)
        self.changed.add(path)
        return True

    def delete_folder(self, path: str) -> list[str]:
        """Remove the folder `path` (a trailing "/" or not) and return the files it held; none
        when there is no such folder."""
        *parts, name = path.rstrip("/").split("/")
        chain = self._chain(parts, create=False)
        doomed = chain[-1].folders.pop(name, None) if chain is not None else None
        if chain is None or doomed is None:
            return []
        self._prune(chain, parts)
        paths = list(doomed.file_paths(path.rstrip("/") + "/"))
        self.changed.update(paths)
        return paths


def folder_tree_oids(files: Mapping[str, Blob]) -> dict[str, str]:
    """The git tree id of every folder of the tree `files` (`""` is the root), built from
    nothing: what the ids a commit derives from its parent's (`Commit.folder_oid`) must equal."""
    edit = TreeEdit(Folder())
    for path, blob in files.items():
        edit.put(path, blob)
    return {path: folder.oid for path, folder in edit.root.subfolders("")}


def ancestors(path: str) -> Iterator[str]:
    """The folders holding `path`, from its own up to the root (`""`)."""
    while path:
        path = path.rpartition("/")[0]
        yield path


@dataclass(frozen=True)
class RepoLimits:
    """What a repository may hold after a commit, the Hub's numbers by default; None: no limit.
    Every commit is checked (the commit endpoint's, a pull request's merge, seeded files, the
    initial commit), on the tree it would leave. A test makes them small for one repository
    (`HubServer.create_repo(limits=...)`, `HubServer.set_limits`), or lifts them."""

    folder_entries: int | None = MAX_FOLDER_ENTRIES
    files: int | None = MAX_REPO_FILES

    def check(self, root: Folder, changed: Iterable[str], files: int, ref: str) -> None:
        """A 400 HubError when the tree at `root`, holding `files` files and committed to `ref`,
        is past a limit. Only the folders holding a `changed` path are counted: the others are
        as they were in a tree that passed (seeded files and the initial commit included)."""
        overfull = overfull_folders(root, changed, self.folder_entries)
        if overfull:
            raise HubError(
                400,
                "Your push was rejected because it contains too many files per directory. Each"
                f" directory in your git repo can only contain up to {self.folder_entries} files."
                f" Offending reference: {ref} Offending directories: "
                + ", ".join(f"/{f}/" if f else "/" for f in overfull),
            )
        if self.files is not None and files > self.files:
            raise HubError(
                400,
                f"Your push was rejected because it contains too many files: {files},"
                f" more than the {self.files} a repository may hold (the Hub recommends fewer"
                f" than 100k files per repository). Offending reference: {ref}",
            )


def overfull_folders(root: Folder, changed: Iterable[str], limit: int | None) -> list[str]:
    """The folders holding a `changed` path with more than `limit` entries (files and
    subfolders); none without a limit."""
    if limit is None:
        return []
    folders = {folder for path in changed for folder in ancestors(path)}
    return sorted(
        folder
        for folder in folders
        if (node := root.find(folder)) is not None and node.entries > limit
    )


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


class Tree(Mapping[str, Blob]):
    """A commit's files by path, read from its folders: a read-only view, so that a commit
    costs no copy of the repository's list of files."""

    __slots__ = ("_files", "root")

    def __init__(self, root: Folder, files: int) -> None:
        self.root = root
        self._files = files

    def __getitem__(self, path: str) -> Blob:
        blob = self.root.file(path)
        if blob is None:
            raise KeyError(path)
        return blob

    def __iter__(self) -> Iterator[str]:
        return self.root.file_paths("")

    def __len__(self) -> int:
        return self._files


@dataclass(frozen=True)
class Commit:
    """A full snapshot (every file by path, and its folders as git trees) plus what changed
    relative to the first parent."""

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

    def folder_oid(self, folder: str) -> str | None:
        """The git tree id of `folder` (`""` = root), None if it holds nothing."""
        node = self.tree.root.find(folder)
        return node.oid if node is not None else None


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

    def history(self, oid: str) -> Iterator[Commit]:
        """First-parent history from `oid`, newest first, like `git log --first-parent`; walked
        only as far as the caller reads."""
        current: str | None = oid
        while current is not None:
            commit = self.commits[current]
            yield commit
            current = commit.parents[0] if commit.parents else None

    def last_commit_touching(self, head: str, path: str) -> Commit | None:
        """The newest commit of `head`'s first-parent history that changed the file `path` or,
        for a folder, anything below it (against its first parent)."""
        path = path.rstrip("/")
        empty = Tree(Folder(), 0)
        return next(
            (
                c
                for c in self.history(head)
                if differs(self.commits[c.parents[0]].tree if c.parents else empty, c.tree, path)
            ),
            None,
        )


class Store:
    """All repos, keyed by (repo_type, repo_id): a model and a dataset may share an id."""

    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        self._counter = itertools.count(1)

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
        before = repo.commits[parent].tree if parent else Tree(Folder(), 0)
        edit = TreeEdit(before.root)
        for op in operations:
            if isinstance(op, Put):
                edit.put(op.path, op.blob)
            elif op.folder:
                if not edit.delete_folder(op.path):
                    raise entry_not_found(op.path)
            elif not edit.delete(op.path):
                raise HubError(
                    404, f"A file with this name doesn't exist: {op.path}", "EntryNotFound"
                )
        parents = (parent,) if parent else ()
        return self._record(repo, parents, before, edit, summary, description, author, ref)

    def _record(
        self,
        repo: Repo,
        parents: tuple[str, ...],
        before: Tree,
        edit: TreeEdit,
        summary: str,
        description: str,
        author: str,
        ref: str,
    ) -> Commit:
        """Check and record the commit `edit` made on top of the tree `before`. Its id is a digest
        of a counter, its parents, summary and changes: unique, and costing what changed."""
        changes = {p: (before.root.file(p), edit.root.file(p)) for p in sorted(edit.changed)}
        added = tuple(p for p, (old, new) in changes.items() if old is None and new is not None)
        deleted = tuple(p for p, (old, new) in changes.items() if old is not None and new is None)
        modified = tuple(
            p
            for p, (old, new) in changes.items()
            if old is not None and new is not None and not same_file(old, new)
        )
        files = len(before) + len(added) - len(deleted)
        repo.limits.check(edit.root, added + modified + deleted, files, ref)
        digest = hashlib.sha1(f"{next(self._counter)}\0{parents}\0{summary}\0".encode())
        for path, (_, new) in changes.items():
            digest.update(f"{path}\0{new.oid if new else ''}\0".encode())
        commit = Commit(
            oid=digest.hexdigest(),
            parents=parents,
            summary=summary,
            description=description,
            author=author,
            created_at=hub_now(),
            tree=Tree(edit.root, files),
            added=added,
            modified=modified,
            deleted=deleted,
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
        before = repo.commits[base_head].tree
        edit = TreeEdit(before.root)
        for path in changed_paths(fork.root, tip.root):
            blob = tip.get(path)
            if blob is not None:
                edit.put(path, blob)
            else:
                edit.delete(path)  # which the base may have deleted too
        summary = f"{pr.title} (#{pr.num})"
        commit = self._record(
            repo,
            (base_head,),
            before,
            edit,
            summary,
            pr.description,
            author,
            f"refs/heads/{pr.base_branch}",
        )
        repo.branches[pr.base_branch] = commit.oid
        return commit


def differs(before: Tree, after: Tree, path: str) -> bool:
    """Whether the file `path`, or anything in the folder `path`, differs between two trees, as
    `git log -- path` asks it of each commit: by the file's id and a walk of only the folders
    the two trees do not share, which stops at the first difference."""
    old, new = before.root.find(path), after.root.find(path)
    return not same_file(before.get(path), after.get(path)) or any(
        changed_paths(old or Folder(), new or Folder())
    )


def changed_paths(before: Folder, after: Folder, prefix: str = "") -> Iterator[str]:
    """The files that differ between two trees (added, removed or with another content), as
    git diffs trees: a folder both share is skipped whole, so two commits of one history are
    compared in proportion to what changed between them."""
    if before is after:
        return
    for name in before.files.keys() | after.files.keys():
        if not same_file(before.files.get(name), after.files.get(name)):
            yield prefix + name
    for name in before.folders.keys() | after.folders.keys():
        old, new = before.folders.get(name), after.folders.get(name)
        path = f"{prefix}{name}/"
        if old is None or new is None:
            only = old if new is None else new
            assert only is not None  # a name either tree holds
            yield from only.file_paths(path)
        else:
            yield from changed_paths(old, new, path)


def conflicting_files(repo: Repo, pr: Discussion) -> list[str]:
    """Paths changed by the PR and, differently, on its base branch since the PR forked."""
    if pr.base_branch is None or pr.fork_oid is None or pr.head_oid is None:
        return []
    if pr.base_branch not in repo.branches:
        return []
    fork, tip = repo.commits[pr.fork_oid].tree, repo.commits[pr.head_oid].tree
    base = repo.commits[repo.branches[pr.base_branch]].tree
    return sorted(
        path
        for path in changed_paths(fork.root, tip.root)
        if not same_file(fork.get(path), base.get(path))
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
    return "".join(
        _file_diff(path, fork.get(path), head.get(path))
        for path in sorted(changed_paths(fork.root, head.root))
    )


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
