"""Stage 7, what a pull request changes: the Hub's own diff of it, checked against its trees.

A pull request is judged by what it changes since it branched from its target branch, and the
Hub says what that is: the details of a pull request carry its git diff (huggingface_hub docs,
guides/community: "For Pull Requests, you can retrieve the raw git diff with
`DiscussionWithDetails.diff`"), a `diff --git` section per file with the blob ids before and
after on its `index` line. So finding where a PR branched never walks a commit history, whose
length has nothing to do with the PR.

The diff is not taken on trust. `bundler.hub.review.gather` compares the trees of the PR's head
and of its target branch (listing only the folders whose git tree ids differ) and asks, of every
file either names, which commit last changed it at the head; the PR's own commits are the ones
its details list. Then:
- every file the diff names is at the head what the diff says it became, and (unless the diff
  removes it) was last changed there by a commit of the PR;
- every file the head holds otherwise than the target branch and the diff does not name was last
  changed by a commit that is not the PR's (the target branch moved on since).
A file in one account and not in the other is a disagreement: the `diff` check fails and names
it, and the PR is judged by everything either account says it changes, so a bundle the diff
leaves out is reviewed all the same, never taken for a PR that adds no bundle. A file the head
lacks and the target branch holds is taken as one the target branch added since: the head
cannot say who removed it. Nothing here reads the network.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from bundler.core.checks import CheckResult, failed, passed, warned
from bundler.hub.client.remote import RemoteFile

GIT_FILE_HEADER = "diff --git "
"""How git begins the section of each file in a diff (git's format, no words of ours)."""
_INDEX = re.compile(r"index ([0-9a-f]+)\.\.([0-9a-f]+)(?: [0-7]+)?")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
"""The C escapes git writes in a quoted path (`core.quotePath`), and the bytes they stand for."""
_HEADER_ENDS = ("@@", "Binary files ", "GIT binary patch")
"""Where a file's header ends and its content (of no use here) begins."""


@dataclass(frozen=True)
class DiffedFile:
    """One file the diff names, with its blob id where the PR branched (`before`) and at its
    head (`after`); None where there is no file. `ids` is False when the diff gave no ids (a
    change of mode alone)."""

    path: str
    before: str | None = None
    after: str | None = None
    ids: bool = True


@dataclass(frozen=True)
class HubDiff:
    """The Hub's diff of a pull request, read: the files it names, and the header of each
    section this review could not read."""

    files: dict[str, DiffedFile] = field(default_factory=dict)
    unreadable: tuple[str, ...] = ()


def parse_diff(text: str) -> HubDiff:
    """The files a git diff names, from the header of each of its sections."""
    files: dict[str, DiffedFile] = {}
    unreadable: list[str] = []
    header: list[str] | None = None
    for line in [*text.split("\n"), GIT_FILE_HEADER]:  # the sentinel closes the last section
        if line.startswith(GIT_FILE_HEADER):
            if header is not None:
                named = _section(header)
                if named:
                    files.update((diffed.path, diffed) for diffed in named)
                else:
                    unreadable.append(header[0][:200])
            header = [line]
        elif header is not None and not header[-1].startswith(_HEADER_ENDS):
            header.append(line)
    return HubDiff(files, tuple(unreadable))


def _section(header: list[str]) -> list[DiffedFile]:
    """The file(s) one section names (two for a rename or a copy); none when unreadable."""
    first = header[0].removeprefix(GIT_FILE_HEADER)
    old, new = _header_paths(first)
    ids, created, deleted, copied = None, False, False, False
    for line in header[1:]:
        if line.startswith(("rename from ", "copy from ")):
            old = _unquoted(line.split(" from ", 1)[1])
            copied = line.startswith("copy")
        elif line.startswith(("rename to ", "copy to ")):
            new = _unquoted(line.split(" to ", 1)[1])
        elif line.startswith("--- ") and line[4:].rstrip("\t") != "/dev/null":
            old = _prefixed(line[4:].rstrip("\t"), "a/")
        elif line.startswith("+++ ") and line[4:].rstrip("\t") != "/dev/null":
            new = _prefixed(line[4:].rstrip("\t"), "b/")
        elif line.startswith("new file mode"):
            created = True
        elif line.startswith("deleted file mode"):
            deleted = True
        elif found := _INDEX.fullmatch(line):
            ids = found.groups()
    old, new = (old or new), (new or old)
    if old is None or new is None:
        return []
    before, after = (_blob(ids[0]), _blob(ids[1])) if ids else (None, None)
    before, after = (None if created else before), (None if deleted else after)
    if old == new:
        return [DiffedFile(new, before, after, ids is not None)]
    moved = [DiffedFile(new, None, after, ids is not None)]
    return moved if copied else [DiffedFile(old, before, None, ids is not None), *moved]


def _header_paths(names: str) -> tuple[str | None, str | None]:
    """The two paths of a `diff --git a/X b/Y` line, when they can be told apart: quoted, or
    the same path twice (unquoted names may hold spaces, so only equal halves are certain)."""
    if names.startswith('"'):
        taken = _take_quoted(names)
        if taken is None:
            return None, None
        token, rest = taken
        return _prefixed(token, "a/"), _prefixed(rest.removeprefix(" "), "b/")
    if names.endswith('"') and ' "' in names:
        first, _, second = names.rpartition(' "')
        return _prefixed(first, "a/"), _prefixed('"' + second, "b/")
    half = (len(names) - 1) // 2
    first, second = names[:half], names[half + 1 :]
    if first[2:] == second[2:] and names[half] == " ":
        return _prefixed(first, "a/"), _prefixed(second, "b/")
    return None, None


def _prefixed(name: str, prefix: str) -> str | None:
    """A path as a diff writes it (`a/X`, `b/X`, or quoted), without its prefix."""
    path = _unquoted(name)
    return path[len(prefix) :] if path is not None and path.startswith(prefix) else None


def _take_quoted(text: str) -> tuple[str, str] | None:
    """The quoted name `text` starts with, and what follows it."""
    index = 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
        elif text[index] == '"':
            return text[: index + 1], text[index + 1 :]
        else:
            index += 1
    return None


def _unquoted(name: str) -> str | None:
    """A name as it is, or the path a quoted one stands for (None: not a quoted name git
    writes)."""
    if not name.startswith('"'):
        return name
    if len(name) < 2 or not name.endswith('"'):
        return None
    body, out, index = name[1:-1], bytearray(), 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out += char.encode("utf-8")
            index += 1
        elif body[index + 1 : index + 2] in _ESCAPES:
            out.append(_ESCAPES[body[index + 1]])
            index += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", body[index + 1 : index + 4]):
            out.append(int(body[index + 1 : index + 4], 8))
            index += 4
        else:
            return None
    return out.decode("utf-8", errors="replace")


def _blob(blob_id: str) -> str | None:
    """A blob id from an `index` line; None for git's all-zero id of no file."""
    return None if set(blob_id) == {"0"} else blob_id


def _holds(entry: RemoteFile | None, blob_id: str | None) -> bool:
    """Whether a listed file is the blob a diff names (None: no file). A diff may abbreviate
    blob ids; the Hub's are whole."""
    if entry is None or blob_id is None:
        return entry is None and blob_id is None
    return entry.blob_id.startswith(blob_id)


# ------------------------------------------------------------------ the two accounts


@dataclass(frozen=True)
class PullRequestChanges:
    """What a pull request changes, by the Hub's diff and by its trees, and where the two
    disagree."""

    changed: frozenset[str] = frozenset()
    """Every path either account says the PR changes: what it is judged by."""
    before: Mapping[str, str | None] = field(default_factory=dict)
    """The blob id each path the diff names had where the PR branched (None: no file)."""
    given: bool = True
    """Whether the Hub gave a diff at all."""
    named: int = 0
    """How many files the diff names."""
    attributed: bool = True
    """Whether the Hub listed commits of the PR to tell its changes from its target branch's."""
    misnamed: tuple[str, ...] = ()
    """Named by the diff, and held otherwise at the head."""
    untouched: tuple[str, ...] = ()
    """Named by the diff, and last changed at the head by no commit of the PR."""
    unnamed: tuple[str, ...] = ()
    """Last changed at the head by a commit of the PR, and not named by the diff."""
    unreadable: tuple[str, ...] = ()
    """Headers of the diff this review could not read."""
    stale: str | None = None
    """The PR's newest commit as the Hub's details list it, when it is not the head
    reviewed (the diff may be of another head)."""

    @property
    def agree(self) -> bool:
        return not (
            self.misnamed or self.untouched or self.unnamed or self.unreadable or self.stale
        )


def compare_changes(
    diff: HubDiff | None,
    head_files: Mapping[str, RemoteFile],
    walked: Collection[str],
    commits: list[str],
    head: str,
) -> PullRequestChanges:
    """Both accounts of a PR's changes. `head_files` holds, with the last commit that changed
    each, every file at the head that the diff names or that the walk found differing;
    `walked`: every path whose file differs between the head and the target branch;
    `commits`: the PR's own commits, oldest first, as its details list them."""
    files = diff.files if diff is not None else {}
    own = set(commits)

    def by_the_pr(path: str) -> bool:
        entry = head_files.get(path)
        return entry is not None and entry.last_commit is not None and entry.last_commit.oid in own

    untouched = [path for path in files if path in head_files and not by_the_pr(path)]
    unnamed = [path for path in walked if path not in files and by_the_pr(path)]
    return PullRequestChanges(
        changed=frozenset(files) | frozenset(unnamed),
        before={path: diffed.before for path, diffed in files.items() if diffed.ids},
        given=diff is not None,
        named=len(files),
        attributed=bool(own),
        misnamed=tuple(
            sorted(p for p, d in files.items() if d.ids and not _holds(head_files.get(p), d.after))
        ),
        untouched=tuple(sorted(untouched)) if own else (),
        unnamed=tuple(sorted(unnamed)),
        unreadable=diff.unreadable if diff is not None else (),
        stale=commits[-1] if commits and commits[-1] != head else None,
    )


def changed_on_target(
    changes: PullRequestChanges, main_files: Mapping[str, RemoteFile]
) -> set[str]:
    """The paths the PR changes that its target branch changed too since the PR branched
    (`main_files`: the target branch's files at those paths)."""
    return {path for path, blob in changes.before.items() if not _holds(main_files.get(path), blob)}


def diff_check(changes: PullRequestChanges) -> CheckResult:
    """Whether the Hub's diff and the PR's trees tell the same changes."""
    if not changes.given:
        return warned(
            "diff",
            "the Hub gave no diff of the PR: judged by what its commits changed alone",
            hint="compare with the PR's files on the Hub",
        )
    problems = []
    if changes.stale:
        problems.append(f"the Hub's details end at commit {changes.stale[:12]}, not the head")
    if changes.misnamed:
        problems.append(f"the diff names, as the head does not hold them: {few(changes.misnamed)}")
    if changes.untouched:
        problems.append(f"the diff names, as no commit of the PR changed: {few(changes.untouched)}")
    if changes.unnamed:
        problems.append(
            f"commits of the PR changed, the diff does not name: {few(changes.unnamed)}"
        )
    if changes.unreadable:
        problems.append(f"the diff has headers this review cannot read: {few(changes.unreadable)}")
    if problems:
        return failed(
            "diff",
            "the Hub's diff and the PR's trees disagree: " + "; ".join(problems),
            hint="what the Hub shows of the PR is not what its files are: look at them on the"
            " Hub; the PR is judged by both",
        )
    if not changes.attributed:
        return passed("diff", f"the head holds the {changes.named} file(s) the Hub's diff names")
    return passed(
        "diff", f"the Hub's diff names the {changes.named} file(s) the PR's commits changed"
    )


def few(items: Collection[str], shown: int = 10) -> str:
    """At most `shown` of `items`, and how many more (a hostile PR may list thousands)."""
    listed = list(items)
    more = [f"and {len(listed) - shown} more"] if len(listed) > shown else []
    return ", ".join([*listed[:shown], *more])
