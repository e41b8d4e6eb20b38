"""Who put each signed bundle on the branch: for a bundle on the branch itself, the key's
principal must be the user who committed it, or an organization the Hub lists them in.

The Hub says who made a commit (its commit listing's `authors`, Hub user names), and which
commit last changed a file (paths-info expanded: `lastCommit`, with no author). So a sidecar's
committer is the author of the commit that last changed it, looked up in the branch's commit
listing. A commit review made to merge a pull request (titled `Merge PR #N: ...`, made by the
maintainer's account) counts for PR #N's author too, once the PR's head is seen to hold that
very sidecar (same git blob id): the bundle was proposed by them and merged as reviewed.

The same listing says when each sidecar landed: the date of the commit that last changed it,
as the Hub records it. A key's `valid-after`/`valid-before` are judged at that time, as git
judges a signed commit at its own: a bundle that landed while its key was valid stays valid
after the key retires, and one that landed after is not. This costs no request more than the
committers do.

Asked only for bundles whose signature verified with a key the allowed signers list (at any
time): nothing for a leaderboard with no signed bundle. Cost, in API requests: one per 500 such
sidecars (the expanded paths-info), the branch's commit listing once (a page per 50 commits on
the test server; the client reads every page), two per pull request merged by review (its
details and its head's listing of those sidecars), and one per committer the key's principals
do not name (their profile's organizations), each asked once an audit.
"""

from __future__ import annotations

import re

from bundler.core.errors import UsageError
from bundler.hub.audit.findings import AuditedBundle
from bundler.hub.client.remote import CommitAuthors, RemoteFile
from bundler.hub.client.session import HubSession, commit_authors
from bundler.hub.review.gather import read_details
from bundler.hub.tasks.signers import Memberships
from bundler.local.allowed_signers import AllowedSigners
from bundler.local.sshtime import openssh_time

MERGE_TITLE = re.compile(r"Merge PR #(\d+): ")
"""The title of review's merge commit (bundler.hub.review.act)."""


def judge_committers(
    session: HubSession,
    head: str,
    audited: dict[str, AuditedBundle],
    sidecars: dict[str, RemoteFile],
    signers: AllowedSigners | None,
) -> None:
    """Fill `landed_at` and `principals` (judged then), `committer` and `committer_problem`
    (when those principals are neither the committer's nor an organization of theirs) of every
    audited bundle signed by a key the allowed signers list."""
    if signers is None:
        return
    signed = {
        bundle_id: sidecars[bundle_id]
        for bundle_id, bundle in audited.items()
        if bundle.verdict == "verified" and bundle.signer and signers.lists(bundle.signer)
    }
    if not signed:
        return
    last = session.entries(sorted(sidecar.path for sidecar in signed.values()), head)
    history = commit_authors(session, head)
    memberships = Memberships(session)
    proposers: dict[int, tuple[str, dict[str, RemoteFile]] | None] = {}
    for bundle_id, sidecar in sorted(signed.items()):
        bundle = audited[bundle_id]
        entry = last.get(sidecar.path)
        landed = entry.last_commit if entry else None
        at = int(landed.date.timestamp()) if landed else None
        bundle.landed_at = openssh_time(at) if at is not None else None
        bundle.principals = sorted(signers.principals_of(bundle.signer or "", at))
        if not bundle.principals:
            continue  # a finding of its own: no line lists the key at that time
        commit = history.get(landed.oid) if landed else None
        if commit is None:
            bundle.committer_problem = "who committed its sidecar is not in the branch's history"
            continue
        users = list(commit.authors)
        proposer = _proposer(session, commit, sidecar, signed, proposers)
        if proposer is not None:
            users.append(proposer)
        bundle.committer = ", ".join(users)
        principals = set(bundle.principals)
        if not any(memberships.vouching(user, principals) for user in users):
            bundle.committer_problem = (
                f"signed by {', '.join(sorted(principals))} (key {bundle.signer}), not by its "
                f"committer {bundle.committer} nor an organization the Hub lists them in"
            )


def _proposer(
    session: HubSession,
    commit: CommitAuthors,
    sidecar: RemoteFile,
    signed: dict[str, RemoteFile],
    proposers: dict[int, tuple[str, dict[str, RemoteFile]] | None],
) -> str | None:
    """For review's merge of PR #N, the PR's author when its head holds this very sidecar."""
    merged = MERGE_TITLE.match(commit.title)
    if merged is None:
        return None
    num = int(merged.group(1))
    if num not in proposers:
        try:
            details = read_details(session, num)
        except UsageError:  # no such PR
            details = None
        if details is None or not details.is_pull_request:
            proposers[num] = None
        else:
            paths = sorted(file.path for file in signed.values())
            proposers[num] = (details.author, session.paths_info(paths, f"refs/pr/{num}"))
    found = proposers[num]
    if found is None:
        return None
    author, at_head = found
    held = at_head.get(sidecar.path)
    return author if held is not None and held.blob_id == sidecar.blob_id else None
