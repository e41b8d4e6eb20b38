"""Stage 7, gathered: what a review reads from the Hub about each pull request, as values.

Every pull request to review is looked up first, so a wrong number stops the command before it
changed anything; its details carry the Hub's diff of it and its commits. For each, the PR's
head and its target branch's tip are compared tree by tree (only folders whose git tree ids
differ are listed), and every file the diff names or the walk finds differing is asked at the
head, with the last commit that changed it: `bundler.hub.review.changes` tells from these what
the PR changes and where the diff and the trees disagree. No commit history is read, so what a
review costs does not grow with the history of the repository. The target branch is read once
a round and shared by its pull requests (its head, its listings, its task definitions), until
the round's own merge moves it. Details read before a push to the PR are read again.

A PR failing `layout` (or proposing more bundles than the cap) is judged on those listings
alone: nothing of it is downloaded. Otherwise only the bundles whose archive it changes are
fetched, each into a temporary staging folder with download's containment: the listed sizes are
checked against the format's limits first, then the small sidecar is read and the archive's
listed size compared with the size it claims, and only then is the archive downloaded and
verified. Past verification, the row count of the split its task's definition names is read
(with the maintainer's token only for a defined dataset), and for a replacement the target
branch's copy (compared with the PR's). The verified copies stay in the staging folder: a merge
commits exactly those bytes. What to read is asked of `bundler.hub.review.judge`, which judges
the result.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from huggingface_hub.community import DiscussionCommit, DiscussionWithDetails
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
from pydantic import ValidationError

from bundler.core.errors import BundlerError, UsageError
from bundler.core.limits import MAX_SIDECAR_BYTES
from bundler.core.progress import ProgressSink
from bundler.hub.client.answers import checked_details, checked_discussions
from bundler.hub.client.remote import RemoteEntry, RemoteFile, RemoteFolder
from bundler.hub.client.session import REPO_TYPE, HubSession, status_of
from bundler.hub.repo.download import FetchedBundle, fetch_verified
from bundler.hub.repo.paths import repo_archive, repo_sidecar
from bundler.hub.review.changes import compare_changes, parse_diff
from bundler.hub.review.judge import (
    MAX_BUNDLES,
    OPEN_STATES,
    GatheredBundle,
    GatheredPullRequest,
    PullRequestFacts,
    claimed_size_problem,
    classify,
    layout_check,
    listed_size_problem,
    proposed_bundles,
    verified_claim,
)
from bundler.hub.tasks.definitions import TaskDefinitions, read_definitions
from bundler.hub.tasks.signers import Memberships, read_signers
from bundler.hub.tasks.split_size import RowCountResolver
from bundler.local.allowed_signers import AllowedSigners
from bundler.local.diff import diff_verified
from bundler.local.layout import TEMP_PREFIX, BundleId
from bundler.local.manifest import Sidecar
from bundler.local.verify import BundleReading

Listing = Callable[[str, str], dict[str, RemoteEntry]]
"""A folder's own entries at a revision (`HubSession.list_folder`)."""


def differing_files(list_folder: Listing, revisions: list[str]) -> list[dict[str, RemoteFile]]:
    """Per revision, the files that are not the same in all of them, and nothing else: the
    folders whose git tree ids agree are never listed, nor a folder where a revision has none,
    so what a review reads depends on what the pull request touched (and what its target
    branch changed since), not on the size of the repository."""
    found: list[dict[str, RemoteFile]] = [{} for _ in revisions]
    pending = [("", [True] * len(revisions))]
    while pending:
        folder, present = pending.pop()
        listed = [
            list_folder(folder, revision) if here else {}
            for revision, here in zip(revisions, present, strict=True)
        ]
        for path in sorted(set().union(*listed)):
            entries = [listing.get(path) for listing in listed]
            trees = {
                entry.tree_id if isinstance(entry, RemoteFolder) else None for entry in entries
            }
            if len(trees) > 1:  # a folder somewhere, not the same everywhere
                pending.append((path, [isinstance(entry, RemoteFolder) for entry in entries]))
            files = [entry if isinstance(entry, RemoteFile) else None for entry in entries]
            if len({(f.identity, f.size) if f else None for f in files}) > 1:
                for listing, entry in zip(found, files, strict=True):
                    if entry is not None:
                        listing[path] = entry
    return found


def read_details(session: HubSession, num: int) -> DiscussionWithDetails:
    """The Hub's details of discussion `num` (with the diff, for a PR); UsageError when the
    repository has none."""

    def fetch() -> DiscussionWithDetails | None:
        try:
            return checked_details(
                session.api.get_discussion_details, session.repo_id, num, repo_type=REPO_TYPE
            )
        except HfHubHTTPError as error:
            if status_of(error) == 404 and not isinstance(error, RepositoryNotFoundError):
                return None
            raise

    details = session.call(f"reading PR #{num}", fetch)
    if details is None:
        raise UsageError(f"{session.repo_id} has no pull request #{num}")
    return details


def pull_request_facts(details: DiscussionWithDetails) -> PullRequestFacts:
    named = ("num", "title", "author", "status", "url", "conflicting_files")
    base_branch = (details.target_branch or "main").removeprefix("refs/heads/")
    return PullRequestFacts(base_branch=base_branch, **{n: getattr(details, n) for n in named})


def pull_request_commits(details: DiscussionWithDetails) -> list[str]:
    """The PR's own commits, oldest first: its details list every one (huggingface_hub docs,
    guides/community: "All the commits of the Pull Request are listed in
    DiscussionWithDetails.events")."""
    return [event.oid for event in details.events if isinstance(event, DiscussionCommit)]


class PullRequestGatherer:
    """Reads the pull requests of one repository, and what their review needs about each."""

    def __init__(
        self,
        session: HubSession,
        row_counts: RowCountResolver,
        progress: ProgressSink,
        max_bundles: int = MAX_BUNDLES,
    ) -> None:
        self.session = session
        self.row_counts = row_counts
        self.progress = progress
        self.max_bundles = max_bundles
        self._details: dict[int, DiscussionWithDetails] = {}
        self._tips: dict[str, str] = {}
        """The head of each target branch, read once a round (`branch_moved` updates it)."""
        self._listings: dict[tuple[str, str], dict[str, RemoteEntry]] = {}
        """Folder listings at a tip, by (commit, folder): every PR of the round walks them."""
        self._definitions: dict[str, TaskDefinitions] = {}
        self._signers: dict[str, AllowedSigners | None] = {}
        self.memberships = Memberships(session)
        """Authors' organizations, asked once per author a round."""

    def pull_requests(self, nums: list[int]) -> list[PullRequestFacts]:
        """Every PR to review (`nums`, or every open one), all looked up before any is
        reviewed, so a wrong number stops the command before it changed anything."""
        session = self.session
        if not nums:
            listing = session.call(
                "listing pull requests",
                lambda: checked_discussions(
                    session.api.get_repo_discussions(
                        session.repo_id,
                        discussion_type="pull_request",
                        discussion_status="open",
                        repo_type=REPO_TYPE,
                    )
                ),
            )
            nums = sorted(d.num for d in listing if d.status in OPEN_STATES)
        found = [read_details(session, num) for num in dict.fromkeys(nums)]
        for details in found:
            if not details.is_pull_request:
                raise UsageError(f"#{details.num} in {session.repo_id} is a discussion, not a PR")
        self._details = {details.num: details for details in found}
        return [pull_request_facts(details) for details in found]

    def gather(self, facts: PullRequestFacts, work: Path) -> GatheredPullRequest:
        """What the checks of PR `facts` look at; the bundles it changes are fetched into
        `work`."""
        session = self.session
        head = session.head(f"refs/pr/{facts.num}")
        details = self._details_at(facts.num, head)
        facts = pull_request_facts(details)
        tip = self.tip(facts.base_branch)
        head_walk, tip_walk = differing_files(self._listing, [head, tip])
        walked = head_walk.keys() | tip_walk.keys()
        diff = parse_diff(details.diff) if details.diff is not None else None
        named = diff.files.keys() if diff is not None else set()
        asked = session.entries(sorted(named | head_walk.keys()), head)
        at_head = {path: e for path, e in asked.items() if isinstance(e, RemoteFile)}
        head_files = head_walk | at_head
        same = {path: at_head[path] for path in named - walked if path in at_head}
        main_files = tip_walk | same  # where the head and the tip agree, the tip holds the same
        changes = compare_changes(diff, head_files, walked, pull_request_commits(details), head)
        definitions = self.definitions(facts.base_branch, tip)
        gathered = GatheredPullRequest(
            facts,
            head,
            head_files,
            main_files,
            changes,
            definitions=definitions,
            signers=self.signers(facts.base_branch, tip),
            max_bundles=self.max_bundles,
        )
        if layout_check(changes.changed, head_files, self.max_bundles).status == "failed":
            return gathered  # judged on its listings: nothing of it is downloaded
        touched = proposed_bundles(changes.changed, head_files)
        self.progress.begin(f"reviewing PR #{facts.num}", len(touched))
        bundles = []
        for bundle in touched:
            bundles.append(
                self._bundle(bundle, head, head_files, tip, main_files, work, definitions)
            )
            self.progress.advance()
        orgs = self._author_orgs(facts.author, gathered.signers, bundles, gathered.at)
        return replace(gathered, bundles=tuple(bundles), author_orgs=orgs)

    def _author_orgs(
        self,
        author: str,
        signers: AllowedSigners | None,
        bundles: list[GatheredBundle],
        at: int,
    ) -> frozenset[str]:
        """The author's organizations, asked only when a bundle's key is allowed for
        principals other than the author (none asked for the author's own keys)."""
        if signers is None:
            return frozenset()
        for bundle in bundles:
            signer = bundle.reading.verification().signer
            principals = signers.principals_of(signer, at) if signer else set()
            if principals and author not in principals:
                return self.memberships.orgs(author)
        return frozenset()

    def tip(self, branch: str) -> str:
        """The head of `branch`, read once a round."""
        if branch not in self._tips:
            self._tips[branch] = self.session.head(branch)
        return self._tips[branch]

    def branch_moved(self, branch: str, commit: str) -> None:
        """The round's own merge moved `branch` to `commit`: what was read of it is stale."""
        old = self._tips.get(branch)
        self._tips[branch] = commit
        self._listings = {key: found for key, found in self._listings.items() if key[0] != old}

    def definitions(self, branch: str, tip: str) -> TaskDefinitions:
        """The task definitions at the tip of `branch`, read once per branch (a merge changes
        no definition)."""
        if branch not in self._definitions:
            self._definitions[branch] = read_definitions(self.session, tip)
        return self._definitions[branch]

    def signers(self, branch: str, tip: str) -> AllowedSigners | None:
        """The allowed signers at the tip of `branch`, read once per branch."""
        if branch not in self._signers:
            self._signers[branch] = read_signers(self.session, tip)
        return self._signers[branch]

    def _details_at(self, num: int, head: str) -> DiscussionWithDetails:
        """PR `num`'s details, read again when the head is newer than the commits they list
        (a push since they were read): the diff must be of the head reviewed."""
        details = self._details.get(num) or read_details(self.session, num)
        commits = pull_request_commits(details)
        if commits and commits[-1] != head:
            details = read_details(self.session, num)
        self._details[num] = details
        return details

    def _listing(self, folder: str, revision: str) -> dict[str, RemoteEntry]:
        """A folder's entries; a tip's are kept for the round's other pull requests."""
        if revision not in self._tips.values():
            return self.session.list_folder(folder, revision)
        key = (revision, folder)
        if key not in self._listings:
            self._listings[key] = self.session.list_folder(folder, revision)
        return self._listings[key]

    def _bundle(
        self,
        bundle: BundleId,
        head: str,
        head_files: dict[str, RemoteFile],
        tip: str,
        main_files: dict[str, RemoteFile],
        work: Path,
        definitions: TaskDefinitions,
    ) -> GatheredBundle:
        """The PR's copy of `bundle`: its listed sizes, then its sidecar's claimed size, then
        the archive, verified; when it verifies, its defined split's row count and, for a
        replacement, the target branch's copy compared with it."""
        empty = BundleReading(path=work / "pr" / repo_archive(bundle))
        refused = listed_size_problem(bundle, head_files)
        if refused is None and repo_sidecar(bundle) in head_files:
            data = self.session.read_file(repo_sidecar(bundle), head, MAX_SIDECAR_BYTES)
            refused = claimed_size_problem(head_files[repo_archive(bundle)], _claimed_size(data))
        if refused is not None:
            return GatheredBundle(bundle, empty, refused=refused)
        fetched, reading = self._fetch(bundle, head, head_files, work / "pr")
        claim = verified_claim(reading)
        if claim is None:
            return GatheredBundle(bundle, reading)
        definition = definitions.get(bundle.task)
        if definition is None:  # the bundle's own dataset, asked without the maintainer's token
            row_count = self.row_counts.rows(claim.statics, authenticated=False)
        elif definition.mismatch(claim.statics) is None:
            defined = claim.statics.model_copy(
                update={"hf_repo_id": definition.hf_repo_id, "dataset_split": definition.split}
            )
            row_count = self.row_counts.rows(defined, authenticated=True)
        else:
            row_count = (None, "not looked up: the bundle is not of its task's definition")
        archive = fetched.archive
        staged = Path(archive) if archive is not None and fetched.outcome == "downloaded" else None
        replaced = classify(head_files[repo_archive(bundle)], main_files.get(repo_archive(bundle)))
        if replaced != "replacement" or archive is None:
            return GatheredBundle(bundle, reading, row_count, staged=staged)
        main, main_reading = self._fetch(bundle, tip, main_files, work / "main")
        diff = failure = None
        if main.outcome == "downloaded" and main.archive is not None:
            try:
                diff = diff_verified(Path(main.archive), main_reading, Path(archive), reading)
            except BundlerError as error:
                failure = error.message
        return GatheredBundle(
            bundle, reading, row_count, main_reading, diff, failure, staged=staged
        )

    def _fetch(
        self, bundle: BundleId, commit: str, listed: dict[str, RemoteFile], into: Path
    ) -> tuple[FetchedBundle, BundleReading]:
        """download's fetch: staged, verified, then placed (or kept apart in .rejected/)."""
        into.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=into, prefix=f"{TEMP_PREFIX}staging-"))
        return fetch_verified(
            self.session, bundle, commit, set(listed), staging, into, self.progress
        )


def _claimed_size(sidecar: bytes) -> int | None:
    """The archive size a sidecar claims; None when it cannot be read (verification says)."""
    try:
        return Sidecar.model_validate_json(sidecar).archive.size
    except (ValidationError, ValueError):
        return None
