"""The fake Hub (`tests/hubserver`) against the real `huggingface_hub` client over real HTTP.

These tests are what entitles the bundler's tests to trust the fake Hub: every behaviour the
bundler relies on is exercised here through the unmodified client. The client may already have
been imported by another test module with another endpoint, so in-process calls pass
`endpoint=hub.url` explicitly and switch Xet and telemetry off on `huggingface_hub.constants`
for each test (both are read at call time); the subprocess test checks the `client_env` route,
where the environment is in place before the client is imported.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hubserver import Fault, HubServer, RateLimits, RepoLimits, Scope, TokenInfo, client_env
from hubserver.limits import Clock, RateLimitedError, RateLimiter
from hubserver.store import (
    Blob,
    Commit,
    Delete,
    Discussion,
    HubError,
    Put,
    Store,
    folder_tree_oids,
    hub_now,
)
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationCopy,
    CommitOperationDelete,
    HfApi,
    HfFileSystem,
    constants,
    hf_hub_download,
    snapshot_download,
)
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import parse_ratelimit_headers

WRITE_TOKEN = "hf_test_write_0123456789"
READ_TOKEN = "hf_test_read_0123456789"
OTHER_READ_TOKEN = "hf_test_read_other_0123456789"
SUBMITTER_TOKEN = "hf_test_write_bob_0123456789"
OTHER_SUBMITTER_TOKEN = "hf_test_write_carol_0123456789"
ORG_TOKEN = "hf_test_write_dave_0123456789"
SCOPED_TOKEN = "hf_test_fine_erin_0123456789"
BUNDLE = os.urandom(2 * 1024 * 1024)  # a ~2 MiB "bundle": takes the LFS path by its suffix
README = "---\nlicense: mit\npretty_name: Test bundles\n---\n# Bundles\n"


@pytest.fixture(scope="module")
def hub() -> Iterator[HubServer]:
    server = HubServer(
        {
            WRITE_TOKEN: TokenInfo("alice", "write"),
            READ_TOKEN: TokenInfo("bob", "read"),
            OTHER_READ_TOKEN: TokenInfo("carol", "read"),
            # bob and carol own no repo of these tests: they contribute by pull request
            SUBMITTER_TOKEN: TokenInfo("bob", "write"),
            OTHER_SUBMITTER_TOKEN: TokenInfo("carol", "write"),
            ORG_TOKEN: TokenInfo("dave", "write", orgs=("alice-org",)),
            SCOPED_TOKEN: TokenInfo(
                "erin",
                "fineGrained",
                orgs=("alice-org",),
                scopes=(
                    Scope("alice-org/scoped", ("repo.write",)),
                    Scope("alice", ("discussion.write",)),
                ),
            ),
        }
    ).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _plain_client(plain_client: None) -> None:
    """These tests judge the server by what the client itself makes of its answers."""


@pytest.fixture(autouse=True)
def _no_xet_no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)


@pytest.fixture
def api(hub: HubServer) -> HfApi:
    return HfApi(endpoint=hub.url, token=WRITE_TOKEN)


@pytest.fixture
def repo(hub: HubServer, api: HfApi, request: pytest.FixtureRequest) -> str:
    """A fresh, empty dataset repo named after the test."""
    repo_id = f"alice/{request.node.name.replace('_', '-')[:80]}"
    api.create_repo(repo_id, repo_type="dataset")
    return repo_id


def bundle_folder(root: Path, *, extra: str = "1") -> Path:
    (root / "bundles").mkdir(parents=True, exist_ok=True)
    (root / "bundles" / "run-1.tar.zst").write_bytes(BUNDLE)
    (root / "bundles" / "run-1.json").write_text(json.dumps({"run": 1, "extra": extra}))
    (root / "index.json").write_text(json.dumps({"runs": ["run-1"]}))
    (root / "README.md").write_text(README)
    return root


def posts_to(hub: HubServer, fragment: str, method: str = "POST") -> int:
    return sum(1 for r in hub.request_log if r.method == method and fragment in r.path)


def add(path: str, data: bytes) -> CommitOperationAdd:
    return CommitOperationAdd(path_in_repo=path, path_or_fileobj=data)


# --------------------------------------------------------------------------- repos, auth


def test_create_repo_twice_whoami_and_exists(hub: HubServer, api: HfApi) -> None:
    url = api.create_repo("alice/twice", repo_type="dataset")
    assert url == f"{hub.url}/datasets/alice/twice"
    with pytest.raises(HfHubHTTPError) as err:
        api.create_repo("alice/twice", repo_type="dataset")
    assert err.value.response.status_code == 409
    assert api.create_repo("alice/twice", repo_type="dataset", exist_ok=True) == url
    assert api.repo_exists("alice/twice", repo_type="dataset")
    assert not api.repo_exists("alice/missing", repo_type="dataset")
    me = api.whoami()
    assert me["name"] == "alice"
    assert me["auth"]["accessToken"]["role"] == "write"
    assert hub.list_files("alice/twice") == [".gitattributes"]
    assert [c.summary for c in hub.commits("alice/twice")] == ["initial commit"]
    api.delete_repo("alice/twice", repo_type="dataset")
    assert not api.repo_exists("alice/twice", repo_type="dataset")


def test_dataset_and_model_with_same_id_are_different_repos(hub: HubServer, api: HfApi) -> None:
    api.create_repo("alice/same-id", repo_type="model")
    assert api.model_info("alice/same-id").id == "alice/same-id"
    with pytest.raises(RepositoryNotFoundError):
        api.dataset_info("alice/same-id")
    assert not api.repo_exists("alice/same-id", repo_type="dataset")
    api.create_repo("alice/same-id", repo_type="dataset")
    api.upload_file(
        path_or_fileobj=b"{}", path_in_repo="d.json", repo_id="alice/same-id", repo_type="dataset"
    )
    assert "d.json" in hub.list_files("alice/same-id")
    assert "d.json" not in hub.list_files("alice/same-id", repo_type="model")


def test_bad_token_read_token_and_anonymous(hub: HubServer) -> None:
    hub.create_repo("alice/guarded", files={"a.json": b"{}"})
    hub.create_repo("alice/secret", private=True)
    bad = HfApi(endpoint=hub.url, token="hf_not_a_real_token")
    with pytest.raises(HfHubHTTPError) as err:
        bad.whoami()
    assert err.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as err:
        bad.dataset_info("alice/guarded")
    assert err.value.response.status_code == 401
    assert "Invalid credentials in Authorization header" in str(err.value)

    reader = HfApi(endpoint=hub.url, token=READ_TOKEN)
    assert reader.whoami()["auth"]["accessToken"]["role"] == "read"
    assert reader.list_repo_files("alice/guarded", repo_type="dataset") == [
        ".gitattributes",
        "a.json",
    ]
    for write in (
        lambda: reader.create_repo("bob/new", repo_type="dataset"),
        lambda: reader.upload_file(
            path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="alice/guarded", repo_type="dataset"
        ),
    ):
        with pytest.raises(HfHubHTTPError) as err:
            write()
        assert err.value.response.status_code == 403
        assert "read token" in str(err.value)

    anonymous = HfApi(endpoint=hub.url, token=False)
    assert anonymous.dataset_info("alice/guarded").id == "alice/guarded"
    with pytest.raises(RepositoryNotFoundError):
        anonymous.dataset_info("alice/secret")
    with pytest.raises(HfHubHTTPError) as err:
        anonymous.upload_file(
            path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="alice/guarded", repo_type="dataset"
        )
    assert err.value.response.status_code == 401
    assert [c.summary for c in hub.commits("alice/guarded")] == ["Seed files", "initial commit"]
    logged = json.dumps([vars(r) for r in hub.request_log])
    assert WRITE_TOKEN not in logged
    assert READ_TOKEN not in logged


def test_a_gated_repo_serves_its_files_to_its_owners_only(hub: HubServer, tmp_path: Path) -> None:
    """As on the Hub before access is granted: the repository and its file list are visible,
    a download is refused with the GatedRepo code (401 signed out, 403 signed in)."""
    hub.create_repo("alice/gated", files={"a.json": b"{}"}, gated=True)
    download = partial(
        hf_hub_download, "alice/gated", "a.json", repo_type="dataset", cache_dir=tmp_path
    )
    for token, status in ((READ_TOKEN, 403), (False, 401)):
        api = HfApi(endpoint=hub.url, token=token)
        assert api.dataset_info("alice/gated").gated == "auto"
        assert "a.json" in api.list_repo_files("alice/gated", repo_type="dataset")
        with pytest.raises(GatedRepoError) as err:
            download(endpoint=hub.url, token=token)
        assert err.value.response.status_code == status
    owned = download(endpoint=hub.url, token=WRITE_TOKEN)
    assert Path(owned).read_bytes() == b"{}"


# ------------------------------------------------------------------- upload and download


def test_upload_folder_lists_and_downloads_byte_identical(
    hub: HubServer, api: HfApi, repo: str, tmp_path: Path
) -> None:
    folder = bundle_folder(tmp_path / "src")
    info = api.upload_folder(folder_path=folder, repo_id=repo, repo_type="dataset")

    head = hub.commits(repo)[0]
    assert info.oid == head.oid
    assert set(head.added) == {
        "README.md",
        "index.json",
        "bundles/run-1.json",
        "bundles/run-1.tar.zst",
    }
    assert hub.file_bytes(repo, "bundles/run-1.tar.zst") == BUNDLE
    assert posts_to(hub, "/__lfs/upload/", "PUT") >= 1  # the bundle went through LFS basic

    assert sorted(api.list_repo_files(repo, repo_type="dataset")) == [
        ".gitattributes",
        "README.md",
        "bundles/run-1.json",
        "bundles/run-1.tar.zst",
        "index.json",
    ]
    top = {e.path for e in api.list_repo_tree(repo, repo_type="dataset")}
    assert top == {".gitattributes", "README.md", "bundles", "index.json"}
    under = {e.path for e in api.list_repo_tree(repo, "bundles", repo_type="dataset")}
    assert under == {"bundles/run-1.json", "bundles/run-1.tar.zst"}

    bundle_info, index_info = api.get_paths_info(
        repo, ["bundles/run-1.tar.zst", "index.json", "not-there.json"], repo_type="dataset"
    )
    assert bundle_info.lfs is not None
    assert bundle_info.lfs.sha256 == hashlib.sha256(BUNDLE).hexdigest()
    assert bundle_info.size == len(BUNDLE)
    assert index_info.lfs is None

    dataset = api.dataset_info(repo, files_metadata=True)
    assert dataset.sha == head.oid
    assert dataset.card_data is not None and dataset.card_data["pretty_name"] == "Test bundles"
    siblings = {s.rfilename: s for s in dataset.siblings or []}
    bundle_lfs = siblings["bundles/run-1.tar.zst"].lfs
    assert bundle_lfs is not None and bundle_lfs.sha256 == hashlib.sha256(BUNDLE).hexdigest()

    downloaded = hf_hub_download(
        repo,
        "bundles/run-1.tar.zst",
        repo_type="dataset",
        endpoint=hub.url,
        token=WRITE_TOKEN,
        cache_dir=tmp_path / "cache",
    )
    assert Path(downloaded).read_bytes() == BUNDLE
    snapshot = Path(
        snapshot_download(
            repo,
            repo_type="dataset",
            endpoint=hub.url,
            token=WRITE_TOKEN,
            cache_dir=tmp_path / "cache2",
        )
    )
    for path in folder.rglob("*"):
        if path.is_file():
            assert (snapshot / path.relative_to(folder)).read_bytes() == path.read_bytes()


def test_ranged_reads_through_hf_file_system(hub: HubServer, repo: str, api: HfApi) -> None:
    api.upload_file(
        path_or_fileobj=BUNDLE, path_in_repo="b.tar.zst", repo_id=repo, repo_type="dataset"
    )
    fs = HfFileSystem(endpoint=hub.url, token=WRITE_TOKEN, skip_instance_cache=True)
    assert fs.ls(f"datasets/{repo}", detail=False) == [
        f"datasets/{repo}/.gitattributes",
        f"datasets/{repo}/b.tar.zst",
    ]
    with fs.open(f"datasets/{repo}/b.tar.zst", "rb", block_size=1024) as handle:
        handle.seek(1000)
        assert handle.read(100) == BUNDLE[1000:1100]
    assert any(r.status == 206 for r in hub.request_log if "/resolve/" in r.path)


def test_unchanged_files_produce_no_commit(
    hub: HubServer, api: HfApi, repo: str, tmp_path: Path
) -> None:
    folder = bundle_folder(tmp_path)
    first = api.upload_folder(folder_path=folder, repo_id=repo, repo_type="dataset")
    hub.request_log.clear()
    again = api.upload_folder(folder_path=folder, repo_id=repo, repo_type="dataset")
    # Every file is dropped as unchanged: no commit POST, no LFS PUT; the client returns the
    # current head (found with a repo_info call) as if it had committed.
    assert again.oid == first.oid
    assert posts_to(hub, "/commit/") == 0
    assert posts_to(hub, "/__lfs/upload/", "PUT") == 0
    assert len(hub.commits(repo)) == 2
    # Same with create_pr: nothing changed, so no PR is opened and pr_url stays None.
    as_pr = api.upload_folder(folder_path=folder, repo_id=repo, repo_type="dataset", create_pr=True)
    assert as_pr.oid == first.oid and as_pr.pr_url is None
    assert hub.pull_requests(repo) == []

    (folder / "bundles" / "run-1.json").write_text(json.dumps({"run": 1, "extra": "2"}))
    changed = api.upload_folder(folder_path=folder, repo_id=repo, repo_type="dataset")
    head = hub.commits(repo)[0]
    assert changed.oid == head.oid and head.parents == (first.oid,)
    assert head.files_changed == ("bundles/run-1.json",)


def test_deletes_and_tree_pagination(hub: HubServer, tmp_path: Path) -> None:
    paged = HubServer(tree_page_size=2).start()
    try:
        api = HfApi(endpoint=paged.url, token="anything-goes-without-a-token-table")
        paged.create_repo(
            "local-user/paged", files={f"f/{i}.json": b"{}" for i in range(5)} | {"g/x": b"x"}
        )
        assert len(list(api.list_repo_tree("local-user/paged", "f", repo_type="dataset"))) == 5
        assert any("cursor=" in r.query for r in paged.request_log)
        api.create_commit(
            "local-user/paged",
            [CommitOperationDelete("f/0.json"), CommitOperationDelete("g/")],
            commit_message="Prune",
            repo_type="dataset",
        )
        assert paged.list_files("local-user/paged") == [
            ".gitattributes",
            *(f"f/{i}.json" for i in range(1, 5)),
        ]
        with pytest.raises(RemoteEntryNotFoundError):
            api.delete_file("f/0.json", "local-user/paged", repo_type="dataset")
    finally:
        paged.stop()


def test_lfs_file_must_reference_an_uploaded_object(hub: HubServer, repo: str) -> None:
    for size in ({"size": 3}, {}):  # as an upload names it, and as a copy does (no size)
        lines = [
            {"key": "header", "value": {"summary": "Sneaky", "description": ""}},
            {
                "key": "lfsFile",
                "value": {"path": "x.tar.zst", "algo": "sha256", "oid": "0" * 64, **size},
            },
        ]
        request = urllib.request.Request(
            f"{hub.url}/api/datasets/{repo}/commit/main",
            data=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
            headers={
                "Authorization": f"Bearer {WRITE_TOKEN}",
                "Content-Type": "application/x-ndjson",
            },
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request)
        assert err.value.code == 400
    assert len(hub.commits(repo)) == 1


def test_a_copy_on_the_hub_uploads_nothing_and_moves_byte_for_byte(
    hub: HubServer, api: HfApi, repo: str
) -> None:
    api.create_commit(
        repo,
        [add("old/a.tar.zst", BUNDLE), add("old/a.json", b'{"a": 1}')],
        commit_message="Add a",
        repo_type="dataset",
    )
    log = len(hub.request_log)
    api.create_commit(
        repo,
        [
            CommitOperationCopy("old/a.tar.zst", "new/a.tar.zst"),
            CommitOperationCopy("old/a.json", "new/a.json"),
            CommitOperationDelete("old/", is_folder=True),
        ],
        commit_message="Move a",
        repo_type="dataset",
    )
    sent = hub.request_log[log:]
    assert not [r for r in sent if r.method == "PUT" or "/info/lfs/" in r.path]
    assert not [r for r in sent if "/preupload/" in r.path]
    assert hub.list_files(repo) == [".gitattributes", "new/a.json", "new/a.tar.zst"]
    assert hub.file_bytes(repo, "new/a.tar.zst") == BUNDLE
    assert hub.file_bytes(repo, "new/a.json") == b'{"a": 1}'
    (info,) = api.get_paths_info(repo, ["new/a.tar.zst"], repo_type="dataset")
    assert info.lfs is not None and info.lfs.sha256 == hashlib.sha256(BUNDLE).hexdigest()


# ------------------------------------------------------------------ revisions, conflicts


def test_missing_revision_and_entry(hub: HubServer, api: HfApi, repo: str, tmp_path: Path) -> None:
    with pytest.raises(RevisionNotFoundError):
        api.dataset_info(repo, revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        api.list_repo_files(repo, repo_type="dataset", revision="refs/pr/99")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(
            repo,
            ".gitattributes",
            repo_type="dataset",
            revision="no-such-branch",
            endpoint=hub.url,
            cache_dir=tmp_path,
        )
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(
            repo, "absent.json", repo_type="dataset", endpoint=hub.url, cache_dir=tmp_path
        )
    with pytest.raises(RevisionNotFoundError):
        api.upload_file(
            path_or_fileobj=b"{}",
            path_in_repo="a.json",
            repo_id=repo,
            repo_type="dataset",
            revision="no-such-branch",
        )


def test_parent_commit_mismatch_is_412(hub: HubServer, api: HfApi, repo: str) -> None:
    old_head = hub.commits(repo)[0].oid
    api.create_commit(
        repo,
        [add("a.json", b"1")],
        commit_message="One",
        repo_type="dataset",
        parent_commit=old_head,
    )
    with pytest.raises(HfHubHTTPError) as err:
        api.create_commit(
            repo,
            [add("b.json", b"2")],
            commit_message="Two",
            repo_type="dataset",
            parent_commit=old_head,
        )
    assert err.value.response.status_code == 412
    assert "A commit has happened since" in str(err.value)
    assert hub.file_bytes(repo, "b.json") is None


def test_pull_request_lifecycle(hub: HubServer, api: HfApi, repo: str) -> None:
    base = hub.commits(repo)[0].oid
    pr_commit = api.create_commit(
        repo,
        [add("bundles/a.tar.zst", BUNDLE), add("a.json", b'{"a": 1}')],
        commit_message="Add run a",
        commit_description="Bundles for run a",
        repo_type="dataset",
        create_pr=True,
    )
    assert pr_commit.pr_num == 1
    assert pr_commit.pr_revision == "refs/pr/1"
    assert hub.file_bytes(repo, "a.json") is None  # main is untouched
    assert hub.file_bytes(repo, "a.json", revision="refs/pr/1") == b'{"a": 1}'
    (pr,) = hub.pull_requests(repo)
    assert (pr.title, pr.description, pr.status, pr.ref) == (
        "Add run a",
        "Bundles for run a",
        "open",
        "refs/pr/1",
    )

    listed = list(api.get_repo_discussions(repo, repo_type="dataset"))
    assert [(d.num, d.is_pull_request, d.status) for d in listed] == [(1, True, "open")]
    refs = api.list_repo_refs(repo, repo_type="dataset", include_pull_requests=True)
    assert [r.ref for r in refs.pull_requests or []] == ["refs/pr/1"]

    # A further commit on the PR ref updates the PR, not main, and not a new PR.
    api.create_commit(
        repo,
        [add("b.json", b'{"b": 2}')],
        commit_message="Add run b",
        repo_type="dataset",
        revision="refs/pr/1",
    )
    assert hub.file_bytes(repo, "b.json", revision="refs/pr/1") == b'{"b": 2}'
    assert len(hub.pull_requests(repo)) == 1
    details = api.get_discussion_details(repo, 1, repo_type="dataset")
    assert [e.summary for e in details.events if e.type == "commit"] == ["Add run a", "Add run b"]
    assert details.target_branch == "refs/heads/main"
    # create_pr targets a branch; asking for a PR "on" a PR ref is RevisionNotFound.
    with pytest.raises(RevisionNotFoundError):
        api.create_commit(
            repo,
            [add("c.json", b"3")],
            commit_message="PR on PR",
            repo_type="dataset",
            revision="refs/pr/1",
            create_pr=True,
        )

    # main moves on meanwhile; merging applies only the PR's own changes on top of it.
    api.upload_file(
        path_or_fileobj=b"main", path_in_repo="main-only.txt", repo_id=repo, repo_type="dataset"
    )
    api.comment_discussion(repo, 1, "Looks good", repo_type="dataset")
    api.merge_pull_request(repo, 1, repo_type="dataset")
    assert hub.file_bytes(repo, "main-only.txt") == b"main"
    assert hub.file_bytes(repo, "bundles/a.tar.zst") == BUNDLE
    assert hub.file_bytes(repo, "b.json") == b'{"b": 2}'
    merged = hub.pull_requests(repo)[0]
    assert merged.status == "merged"
    assert merged.merge_commit_oid == hub.commits(repo)[0].oid
    merge_commit, main_only, *_ = hub.commits(repo)
    assert merge_commit.parents == (main_only.oid,)
    assert merge_commit.summary == "Add run a (#1)"
    assert base in [c.oid for c in hub.commits(repo)]
    assert api.get_discussion_details(repo, 1, repo_type="dataset").merge_commit_oid == (
        merged.merge_commit_oid
    )


def test_draft_pull_request_discussion_and_status(hub: HubServer, api: HfApi, repo: str) -> None:
    pr = api.create_pull_request(repo, title="Manual PR", repo_type="dataset")
    assert pr.status == "draft" and pr.git_reference == "refs/pr/1"
    api.upload_file(
        path_or_fileobj=b"x",
        path_in_repo="x.json",
        repo_id=repo,
        repo_type="dataset",
        revision=pr.git_reference,
    )
    assert api.get_discussion_details(repo, pr.num, repo_type="dataset").status == "open"
    talk = api.create_discussion(repo, title="A question", repo_type="dataset")
    api.comment_discussion(repo, talk.num, "Answer", repo_type="dataset")
    api.change_discussion_status(repo, pr.num, "closed", repo_type="dataset")
    prs = list(api.get_repo_discussions(repo, repo_type="dataset", discussion_type="pull_request"))
    assert [(d.num, d.status) for d in prs] == [(1, "closed")]
    details = api.get_discussion_details(repo, talk.num, repo_type="dataset")
    assert [e.content for e in details.events if e.type == "comment"][-1] == "Answer"


def status_of(call: Callable[[], object]) -> int:
    """The HTTP status a refused client call surfaced."""
    with pytest.raises(HfHubHTTPError) as err:
        call()
    return err.value.response.status_code


def test_non_owner_write_token_opens_and_updates_its_own_pull_request_only(
    hub: HubServer, api: HfApi, repo: str
) -> None:
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    carol = HfApi(endpoint=hub.url, token=OTHER_SUBMITTER_TOKEN)
    opened = bob.create_commit(
        repo,
        [add("bundles/b.tar.zst", BUNDLE), add("b.json", b"1")],
        commit_message="Bob's run",
        repo_type="dataset",
        create_pr=True,
    )
    assert opened.pr_num == 1
    assert hub.file_bytes(repo, "bundles/b.tar.zst", revision="refs/pr/1") == BUNDLE
    (pr,) = hub.pull_requests(repo)
    assert pr.author == "bob"
    assert api.get_discussion_details(repo, 1, repo_type="dataset").author == "bob"

    # Bob adds to his own PR; Carol (another non-owner) may not, the owner may.
    bob.upload_file(
        path_or_fileobj=b"2",
        path_in_repo="b.json",
        repo_id=repo,
        repo_type="dataset",
        revision="refs/pr/1",
    )
    upload_to_pr = lambda who: who.upload_file(  # noqa: E731
        path_or_fileobj=b"3",
        path_in_repo="c.json",
        repo_id=repo,
        repo_type="dataset",
        revision="refs/pr/1",
    )
    assert status_of(lambda: upload_to_pr(carol)) == 403
    upload_to_pr(api)
    assert hub.file_bytes(repo, "b.json", revision="refs/pr/1") == b"2"
    assert hub.file_bytes(repo, "c.json", revision="refs/pr/1") == b"3"
    assert [
        e.author
        for e in api.get_discussion_details(repo, 1, repo_type="dataset").events
        if e.type == "commit"
    ] == ["bob", "bob", "alice"]

    # Without write access: never main, never a merge, never closing someone else's PR.
    main_before = hub.commits(repo)[0].oid
    assert (
        status_of(
            lambda: bob.upload_file(
                path_or_fileobj=b"x", path_in_repo="x.json", repo_id=repo, repo_type="dataset"
            )
        )
        == 403
    )
    assert status_of(lambda: bob.merge_pull_request(repo, 1, repo_type="dataset")) == 403
    close = partial(carol.change_discussion_status, repo, 1, "closed", repo_type="dataset")
    assert status_of(close) == 403
    assert hub.commits(repo)[0].oid == main_before
    assert hub.pull_requests(repo)[0].status == "open"
    # ... but it may open a discussion or an empty PR and comment; anonymous may not.
    talk = carol.create_discussion(repo, title="A question from Carol", repo_type="dataset")
    assert talk.author == "carol"
    carol.comment_discussion(repo, 1, "Nice run", repo_type="dataset")
    anonymous = HfApi(endpoint=hub.url, token=False)
    assert (
        status_of(lambda: anonymous.create_pull_request(repo, title="Anon PR", repo_type="dataset"))
        == 401
    )
    assert (
        status_of(lambda: anonymous.comment_discussion(repo, 1, "hi", repo_type="dataset")) == 401
    )

    api.merge_pull_request(repo, 1, repo_type="dataset")
    assert hub.file_bytes(repo, "c.json") == b"3"


def test_a_comment_is_edited_by_its_author_or_a_writer_only(
    hub: HubServer, api: HfApi, repo: str
) -> None:
    """`HfApi.edit_discussion_comment` (how the bundler puts a pull request's own number in
    its description, the PR's first comment): its author may, and the repository's owner (the
    Hub lets those with write access edit a discussion's title; its docs say nothing more of
    comments); another submitter, a read token and anonymous may not. The content must be a
    non-blank string; the client sends whatever it is given."""
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    opened = bob.create_commit(
        repo,
        [add("b.json", b"1")],
        commit_message="Bob's run",
        commit_description="refs/pr/N",
        repo_type="dataset",
        create_pr=True,
    )
    num = opened.pr_num
    assert num is not None
    first = api.get_discussion_details(repo, num, repo_type="dataset").events[0]
    edit = partial(edit_comment, repo, num, first.id)
    edited = edit(bob, f"refs/pr/{num}")
    assert edited.content == f"refs/pr/{num}" and edited.edited and edited.author == "bob"
    assert hub.pull_requests(repo)[0].description == f"refs/pr/{num}"
    carol = HfApi(endpoint=hub.url, token=OTHER_SUBMITTER_TOKEN)
    assert status_of(lambda: edit(carol, "Carol's words")) == 403
    reader = HfApi(endpoint=hub.url, token=READ_TOKEN)
    assert status_of(lambda: edit(reader, "a reader's words")) == 403
    assert status_of(lambda: edit(HfApi(endpoint=hub.url, token=False), "anyone's")) == 401
    assert edit(api, "the owner's words").content == "the owner's words"
    for content in (None, 7, ["x"], {"raw": "x"}, "", "  \n "):
        assert status_of(partial(edit, bob, content)) == 400, content
    assert status_of(lambda: api.edit_discussion_comment(
        repo, num, "f" * 24, "x", repo_type="dataset"
    )) == 404  # fmt: skip
    assert hub.pull_requests(repo)[0].description == "the owner's words"


def edit_comment(repo: str, num: int, comment_id: str, who: HfApi, content: object) -> Any:
    return who.edit_discussion_comment(
        repo, num, comment_id, content,  # type: ignore[arg-type]
        repo_type="dataset",
    )  # fmt: skip


def test_discussions_listed_by_author(hub: HubServer, api: HfApi, repo: str) -> None:
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    carol = HfApi(endpoint=hub.url, token=OTHER_SUBMITTER_TOKEN)
    bob.create_commit(
        repo, [add("b.json", b"b")], commit_message="Bob", repo_type="dataset", create_pr=True
    )
    carol.create_commit(
        repo, [add("c.json", b"c")], commit_message="Carol", repo_type="dataset", create_pr=True
    )
    bob.create_discussion(repo, title="Bob asks", repo_type="dataset")

    def listed(**filters: object) -> list[tuple[int, str]]:
        found = api.get_repo_discussions(repo, repo_type="dataset", **filters)  # type: ignore[arg-type]
        return [(d.num, d.author) for d in found]

    assert listed(author="bob") == [(3, "bob"), (1, "bob")]
    assert listed(author="bob", discussion_type="pull_request") == [(1, "bob")]
    assert listed(author="carol", discussion_status="open") == [(2, "carol")]
    assert listed(author="nobody") == []


def test_comments_and_status_changes_are_events(hub: HubServer, api: HfApi, repo: str) -> None:
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    bob.create_commit(
        repo,
        [add("b.json", b"b")],
        commit_message="Bob's PR",
        commit_description="Please merge",
        repo_type="dataset",
        create_pr=True,
    )
    posted = api.comment_discussion(repo, 1, "Review: **all good**", repo_type="dataset")
    assert (posted.author, posted.content) == ("alice", "Review: **all good**")
    bob.comment_discussion(repo, 1, "Thanks", repo_type="dataset")
    closed = api.change_discussion_status(repo, 1, "closed", comment="Later", repo_type="dataset")
    assert closed.new_status == "closed"
    assert [
        (d.num, d.status)
        for d in api.get_repo_discussions(repo, repo_type="dataset", discussion_status="closed")
    ] == [(1, "closed")]
    assert list(api.get_repo_discussions(repo, repo_type="dataset", discussion_status="open")) == []
    api.change_discussion_status(repo, 1, "open", repo_type="dataset")

    details = api.get_discussion_details(repo, 1, repo_type="dataset")
    assert details.status == "open"
    assert [
        (
            e.type,
            e.author,
            getattr(e, "content", None)
            or getattr(e, "new_status", None)
            or getattr(e, "summary", None),
        )
        for e in details.events
    ] == [
        ("comment", "bob", "Please merge"),
        ("commit", "bob", "Bob's PR"),
        ("comment", "alice", "Review: **all good**"),
        ("comment", "bob", "Thanks"),
        ("status-change", "alice", "closed"),
        ("comment", "alice", "Later"),
        ("status-change", "alice", "open"),
    ]
    api.merge_pull_request(repo, 1, repo_type="dataset")
    assert (
        status_of(lambda: api.change_discussion_status(repo, 1, "open", repo_type="dataset")) == 400
    )
    assert (
        api.get_discussion_details(repo, 1, repo_type="dataset").events[-1].new_status == "merged"
    )  # type: ignore[attr-defined]


def test_merge_applies_only_the_pull_requests_own_changes(
    hub: HubServer, api: HfApi, repo: str
) -> None:
    api.create_commit(
        repo,
        [add("shared.json", b"v1"), add("old.json", b"old"), add("keep.json", b"keep")],
        commit_message="Base",
        repo_type="dataset",
    )
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    bob.create_commit(
        repo,
        [add("bob.json", b"bob"), CommitOperationDelete("old.json")],
        commit_message="Bob's PR",
        repo_type="dataset",
        create_pr=True,
    )
    # main moves on after the fork: the PR's stale copy of shared.json must not win.
    api.upload_file(
        path_or_fileobj=b"v2", path_in_repo="shared.json", repo_id=repo, repo_type="dataset"
    )
    details = api.get_discussion_details(repo, 1, repo_type="dataset")
    assert details.conflicting_files == []
    api.merge_pull_request(repo, 1, repo_type="dataset")
    assert hub.list_files(repo) == [".gitattributes", "bob.json", "keep.json", "shared.json"]
    assert hub.file_bytes(repo, "shared.json") == b"v2"
    assert hub.commits(repo)[0].files_changed == ("bob.json", "old.json")


def test_merge_refused_when_a_path_changed_on_both_sides(
    hub: HubServer, api: HfApi, repo: str
) -> None:
    api.create_commit(
        repo,
        [add("README.md", README.encode()), add("same.json", b"0")],
        commit_message="Card",
        repo_type="dataset",
    )
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    carol = HfApi(endpoint=hub.url, token=OTHER_SUBMITTER_TOKEN)
    for who, name in ((bob, "bob"), (carol, "carol")):
        who.create_commit(
            repo,
            [
                add("README.md", (README + f"{name} was here\n").encode()),
                add("same.json", b"1"),  # the same change on both sides is no conflict
                add(f"bundles/{name}.json", name.encode()),
            ],
            commit_message=f"{name}'s bundles",
            repo_type="dataset",
            create_pr=True,
        )
    first = api.get_discussion_details(repo, 1, repo_type="dataset")
    assert first.conflicting_files == []
    api.merge_pull_request(repo, 1, repo_type="dataset")
    main_after_first = hub.commits(repo)[0].oid

    second = api.get_discussion_details(repo, 2, repo_type="dataset")
    assert second.conflicting_files == ["README.md"]
    with pytest.raises(HfHubHTTPError) as err:
        api.merge_pull_request(repo, 2, repo_type="dataset")
    assert err.value.response.status_code == 409
    assert "README.md" in str(err.value)
    assert hub.commits(repo)[0].oid == main_after_first
    assert hub.file_bytes(repo, "bundles/carol.json") is None
    assert hub.pull_requests(repo)[1].status == "open"
    # The submitter resolves it on their PR (takes main's card): the PR merges.
    carol.upload_file(
        path_or_fileobj=hub.file_bytes(repo, "README.md") or b"",
        path_in_repo="README.md",
        repo_id=repo,
        repo_type="dataset",
        revision="refs/pr/2",
    )
    assert api.get_discussion_details(repo, 2, repo_type="dataset").conflicting_files == []
    api.merge_pull_request(repo, 2, repo_type="dataset")
    assert hub.file_bytes(repo, "bundles/carol.json") == b"carol"
    assert hub.file_bytes(repo, "README.md") == (README + "bob was here\n").encode()
    # Merged and closed PRs report no conflicts.
    assert api.get_discussion_details(repo, 2, repo_type="dataset").conflicting_files == []


# ------------------------------------------------------------------------------ faults


def test_injected_status_on_commit_surfaces_at_once(hub: HubServer, api: HfApi, repo: str) -> None:
    hub.inject("POST", r"/commit/main$", Fault.status(503))
    with pytest.raises(HfHubHTTPError) as err:
        api.upload_file(
            path_or_fileobj=b"1", path_in_repo="a.json", repo_id=repo, repo_type="dataset"
        )
    assert err.value.response.status_code == 503
    assert len(hub.commits(repo)) == 1

    hub.inject("POST", r"/commit/", Fault.status(429, retry_after=7))
    with pytest.raises(HfHubHTTPError) as err:
        api.upload_file(
            path_or_fileobj=b"1", path_in_repo="a.json", repo_id=repo, repo_type="dataset"
        )
    assert err.value.response.status_code == 429
    assert err.value.response.headers["Retry-After"] == "7"
    assert len(hub.commits(repo)) == 1

    # The faults were used up: the same call now succeeds.
    api.upload_file(path_or_fileobj=b"1", path_in_repo="a.json", repo_id=repo, repo_type="dataset")
    assert hub.file_bytes(repo, "a.json") == b"1"


def test_retried_endpoints_recover_from_transient_faults(
    hub: HubServer, api: HfApi, repo: str
) -> None:
    hub.inject("POST", r"/preupload/", Fault.status(429, retry_after=0))
    hub.inject("PUT", r"^/__lfs/upload/", Fault.status(503))
    api.upload_file(
        path_or_fileobj=BUNDLE, path_in_repo="b.tar.zst", repo_id=repo, repo_type="dataset"
    )
    assert hub.file_bytes(repo, "b.tar.zst") == BUNDLE
    faults = [(r.method, r.fault) for r in hub.request_log if r.fault]
    assert ("POST", "status 429") in faults and ("PUT", "status 503") in faults


def test_fault_after_lets_the_first_matching_requests_through(
    hub: HubServer, api: HfApi, repo: str
) -> None:
    hub.inject("GET", rf"/api/datasets/{repo}$", Fault.status(503), after=2)
    for _ in range(2):
        api.dataset_info(repo)
    with pytest.raises(HfHubHTTPError) as err:
        api.dataset_info(repo)
    assert err.value.response.status_code == 503
    api.dataset_info(repo)  # used up
    assert [r.fault for r in hub.request_log if r.path == f"/api/datasets/{repo}"][-4:] == [
        None,
        None,
        "status 503",
        None,
    ]


def test_lost_response_commit_still_lands(hub: HubServer, api: HfApi, repo: str) -> None:
    hub.inject("POST", r"/commit/", Fault.LOST_RESPONSE)
    with pytest.raises(httpx2.TransportError):
        api.create_commit(
            repo, [add("a.json", b"lost")], commit_message="Lost answer", repo_type="dataset"
        )
    head = hub.commits(repo)[0]
    assert head.summary == "Lost answer" and hub.file_bytes(repo, "a.json") == b"lost"
    assert api.list_repo_commits(repo, repo_type="dataset")[0].commit_id == head.oid
    # The connection pool recovers: the next call works.
    assert api.dataset_info(repo).sha == head.oid


def test_race_makes_parent_commit_fail(hub: HubServer, api: HfApi, repo: str) -> None:
    old_head = hub.commits(repo)[0].oid
    hub.inject("POST", r"/commit/main$", Fault.RACE)
    with pytest.raises(HfHubHTTPError) as err:
        api.create_commit(
            repo,
            [add("a.json", b"mine")],
            commit_message="Mine",
            repo_type="dataset",
            parent_commit=old_head,
        )
    assert err.value.response.status_code == 412
    (race,) = [c for c in hub.commits(repo) if c.author == "someone-else"]
    assert race.files_changed == (".race/1",) and race.parents == (old_head,)

    hub.inject("POST", r"/commit/main$", Fault.RACE)
    api.create_commit(repo, [add("a.json", b"mine")], commit_message="Mine", repo_type="dataset")
    mine, other, *_ = hub.commits(repo)
    assert (mine.summary, other.author, mine.parents) == ("Mine", "someone-else", (other.oid,))


# -------------------------------------------------------------------------- subprocess


def test_subprocess_client_uses_client_env(hub: HubServer, tmp_path: Path) -> None:
    hub.create_repo("alice/from-subprocess")
    (tmp_path / "b.tar.zst").write_bytes(BUNDLE)
    script = textwrap.dedent(
        """
        import sys
        from huggingface_hub import HfApi, constants
        assert constants.HF_HUB_DISABLE_XET
        api = HfApi()
        print(api.whoami()["name"])
        info = api.upload_file(
            path_or_fileobj=sys.argv[1], path_in_repo="b.tar.zst",
            repo_id="alice/from-subprocess", repo_type="dataset",
        )
        print(info.oid)
        """
    )
    env = {
        **os.environ,
        **client_env(hub, WRITE_TOKEN, hf_home=str(tmp_path / "hf")),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "b.tar.zst")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    user, oid = done.stdout.split()
    assert user == "alice"
    assert oid == hub.commits("alice/from-subprocess")[0].oid
    assert hub.file_bytes("alice/from-subprocess", "b.tar.zst") == BUNDLE


# ------------------------------------------------------------ stricter Hub rules (ownership)


def test_write_access_comes_from_ownership_not_the_token_role(hub: HubServer) -> None:
    """hub-protocol.md "Permissions": namespace = user or one of its orgs, and not read."""
    dave = HfApi(endpoint=hub.url, token=ORG_TOKEN)
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    reader = HfApi(endpoint=hub.url, token=READ_TOKEN)
    assert [o["name"] for o in dave.whoami()["orgs"]] == ["alice-org"]
    assert dave.whoami()["auth"]["accessToken"]["role"] == "write"
    dave.create_repo("alice-org/owned", repo_type="dataset")
    dave.upload_file(
        path_or_fileobj=b"1", path_in_repo="a.json", repo_id="alice-org/owned", repo_type="dataset"
    )
    with pytest.raises(HfHubHTTPError) as err:
        bob.create_repo("alice-org/not-bobs", repo_type="dataset")
    assert err.value.response.status_code == 403 and "namespace" in str(err.value)
    with pytest.raises(HfHubHTTPError) as err:
        bob.upload_file(
            path_or_fileobj=b"2",
            path_in_repo="a.json",
            repo_id="alice-org/owned",
            repo_type="dataset",
        )
    assert err.value.response.status_code == 403
    assert err.value.response.headers["X-Error-Message"] == (
        "Forbidden: pass `create_pr=1` as a query parameter to create a Pull Request"
    )
    opened = bob.upload_file(
        path_or_fileobj=b"2",
        path_in_repo="a.json",
        repo_id="alice-org/owned",
        repo_type="dataset",
        create_pr=True,
    )
    assert opened.pr_num == 1
    # the PR's author may rename and close it; a read token does nothing at all
    bob.rename_discussion("alice-org/owned", 1, "Bob's better title", repo_type="dataset")
    for write in (
        lambda: reader.upload_file(
            path_or_fileobj=b"x",
            path_in_repo="x",
            repo_id="alice-org/owned",
            repo_type="dataset",
            create_pr=True,
        ),
        lambda: reader.upload_file(
            path_or_fileobj=b"x",
            path_in_repo="x",
            repo_id="alice-org/owned",
            repo_type="dataset",
            revision="refs/pr/1",
        ),
        lambda: reader.create_discussion(
            "alice-org/owned", title="A question", repo_type="dataset"
        ),
        lambda: reader.comment_discussion("alice-org/owned", 1, "hi", repo_type="dataset"),
        lambda: reader.create_repo("bob/mine", repo_type="dataset"),
    ):
        assert status_of(write) == 403
    assert (
        status_of(lambda: bob.create_branch("alice-org/owned", branch="dev", repo_type="dataset"))
        == 403
    )
    bob.change_discussion_status("alice-org/owned", 1, "closed", repo_type="dataset")
    assert hub.pull_requests("alice-org/owned")[0].status == "closed"
    assert hub.pull_requests("alice-org/owned")[0].title == "Bob's better title"
    assert hub.file_bytes("alice-org/owned", "a.json") == b"1"


def test_fine_grained_token_writes_only_where_scoped(hub: HubServer) -> None:
    erin = HfApi(endpoint=hub.url, token=SCOPED_TOKEN)
    access = erin.whoami()["auth"]["accessToken"]
    assert access["role"] == "fineGrained"
    assert access["fineGrained"]["scoped"][0]["permissions"] == ["repo.write"]
    erin.create_repo("alice-org/scoped", repo_type="dataset")
    erin.upload_file(
        path_or_fileobj=b"1", path_in_repo="a", repo_id="alice-org/scoped", repo_type="dataset"
    )
    assert status_of(lambda: erin.create_repo("alice-org/other", repo_type="dataset")) == 403
    hub.create_repo("alice/erins-pr")
    assert (
        erin.upload_file(
            path_or_fileobj=b"1",
            path_in_repo="a",
            repo_id="alice/erins-pr",
            repo_type="dataset",
            create_pr=True,
        ).pr_num
        == 1
    )


def test_tree_and_commits_paging_as_the_hub_pages(hub: HubServer, api: HfApi) -> None:
    """1,000 tree entries a page, 50 with expand; commits 50 a page; Link rel="next"."""
    hub.create_repo("alice/paging", files={f"d/{i:04}.json": b"{}" for i in range(1001)})
    hub.reset_requests()
    listed = list(api.list_repo_tree("alice/paging", "d", repo_type="dataset"))
    assert len(listed) == 1001
    tree_requests = [r for r in hub.requests("alice/paging") if "/tree/" in r.path]
    assert len(tree_requests) == 2 and "cursor=1000" in tree_requests[1].query
    assert (
        len(list(api.list_repo_tree("alice/paging", recursive=True, repo_type="dataset"))) == 1003
    )
    hub.reset_requests()
    expanded = list(api.list_repo_tree("alice/paging", "d", expand=True, repo_type="dataset"))
    assert len(expanded) == 1001 and len(hub.requests("alice/paging")) == 21
    for i in range(60):
        api.upload_file(
            path_or_fileobj=str(i).encode(),
            path_in_repo="n",
            repo_id="alice/paging",
            repo_type="dataset",
        )
    hub.reset_requests()
    commits = api.list_repo_commits("alice/paging", repo_type="dataset")
    assert len(commits) == 62 and commits[-1].title == "initial commit"
    assert [r.query for r in hub.requests("alice/paging")] == ["", "p=1"]


def test_folder_oids_are_git_tree_ids_that_change_only_below(hub: HubServer, api: HfApi) -> None:
    hub.create_repo("alice/oids", files={"a/x": b"1", "a/b/y": b"2", "c/z": b"3"})

    def oids() -> dict[str, str]:
        tree = api.list_repo_tree("alice/oids", recursive=True, repo_type="dataset")
        return {e.path: e.tree_id for e in tree if e.__class__.__name__ == "RepoFolder"}

    before = oids()
    api.upload_file(
        path_or_fileobj=b"22", path_in_repo="a/b/y", repo_id="alice/oids", repo_type="dataset"
    )
    after = oids()
    assert after["c"] == before["c"]
    assert after["a"] != before["a"] and after["a/b"] != before["a/b"]
    (info,) = api.get_paths_info("alice/oids", ["c"], repo_type="dataset")
    assert info.tree_id == before["c"]
    # the git tree id of a folder holding one file "z" with content "3"
    blob = hashlib.sha1(b"blob 1\0" + b"3").digest()
    body = b"100644 z\0" + blob
    assert before["c"] == hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()


def test_folder_oids_derived_commit_by_commit_equal_those_built_from_nothing() -> None:
    """A commit copies only the folders it changes and derives its ids from its parent's: after
    puts, deletes (one emptying its folder), folder deletes and a merge, every commit's ids, and
    its parents' after it, are what its whole tree gives when built from nothing."""
    store = Store()
    repo = store.create_repo("dataset", "alice/derived", False, "alice")
    seeded = [
        Put(f"bundles/{shard}/{player}/{name}", Blob.make(f"{player}{name}".encode(), False))
        for shard in ("0a", "1b", "2c")
        for player in ("p1", "p2")
        for name in ("a.json", "a.tar.zst")
    ]
    commits = [store.make_commit(repo, repo.branches["main"], seeded, "Seed", "", "alice")]

    def commit(*operations: Put | Delete) -> Commit:
        commits.append(
            store.make_commit(repo, commits[-1].oid, list(operations), "Change", "", "alice")
        )
        return commits[-1]

    def check(commit: Commit, folders: set[str]) -> None:
        built = folder_tree_oids(commit.tree)
        assert {f: commit.folder_oid(f) for f in folders | built.keys()} == {
            f: built.get(f) for f in folders | built.keys()
        }

    check(commits[0], set())  # its ids are kept in the folders the next commits share
    fork = commit(Put("bundles/0a/p1/a.json", Blob.make(b"changed", False)))
    commit(Put("bundles/3d/p9/a.json", Blob.make(b"new", False)), Put("R", Blob.make(b"r", False)))
    check(commits[-1], set())
    commit(Delete("bundles/1b/p2/a.json", False), Delete("bundles/1b/p2/a.tar.zst", False))
    commit(Delete("bundles/2c/", True), Put("bundles/2c/p3/b.json", Blob.make(b"b", False)))
    tip = commit(Delete("bundles/0a", True), Put("x/y/z", Blob.make(b"z", False)))
    pr = Discussion(1, "Add c", "bob", hub_now(), True, "open", base_branch="main")
    changes = [
        Put("bundles/1b/p1/c", Blob.make(b"c", False)),
        Delete("bundles/1b/p1/a.json", False),
    ]
    head = store.make_commit(repo, fork.oid, changes, "Add c", "", "bob", "refs/pr/1")
    pr.fork_oid, pr.head_oid = fork.oid, head.oid
    repo.branches["main"] = tip.oid
    merged = store.merge(repo, pr, "alice")
    commits += [head, merged]
    assert (merged.added, merged.modified, merged.deleted) == (
        ("bundles/1b/p1/c",),
        (),
        ("bundles/1b/p1/a.json",),
    )
    every_folder = {f for made in commits for f in folder_tree_oids(made.tree)}
    assert {"bundles/0a", "bundles/1b/p2", "bundles/2c/p1", "x/y"} <= every_folder
    for made in commits:
        check(made, every_folder)


def test_a_paths_last_commit_is_the_newest_that_changed_it_or_anything_below() -> None:
    """What an expanded listing's `lastCommit` names, asked of each commit against its first
    parent as `git log -- path` does: a file rewritten as it was is no change."""
    store = Store()
    repo = store.create_repo("dataset", "alice/last", False, "alice")
    initial = repo.commits[repo.branches["main"]]

    def commit(parent: Commit, *operations: Put | Delete) -> Commit:
        return store.make_commit(repo, parent.oid, list(operations), "Change", "", "alice")

    files = {"a/x": b"x", "a/b/y": b"y", "c/z": b"z"}
    seed = commit(initial, *(Put(p, Blob.make(data, False)) for p, data in files.items()))
    rewritten = commit(seed, Put("a/b/y", Blob.make(b"y2", False)))
    same = commit(rewritten, Put("c/z", Blob.make(b"z", False)), Put("d/w", Blob.make(b"w", False)))
    gone = commit(same, Delete("a/b/", True))
    assert (same.added, same.modified) == (("d/w",), ())
    expected = {
        "a/b/": gone,  # deleted
        "a": gone,
        "a/x": seed,
        "c/z": seed,  # rewritten as it was
        "c": seed,
        "d": same,
        ".gitattributes": initial,
        "e": None,
    }
    found = {path: repo.last_commit_touching(gone.oid, path) for path in expected}
    assert {p: c and c.oid for p, c in found.items()} == {
        p: c and c.oid for p, c in expected.items()
    }
    assert repo.last_commit_touching(rewritten.oid, "a/b/y") is rewritten


def test_request_counts_split_api_and_file(hub: HubServer, api: HfApi, tmp_path: Path) -> None:
    hub.create_repo("alice/counted", files={"a.json": b"{}"})
    hub.reset_requests()
    api.dataset_info("alice/counted")
    hf_hub_download(
        "alice/counted",
        "a.json",
        repo_type="dataset",
        endpoint=hub.url,
        token=WRITE_TOKEN,
        cache_dir=tmp_path,
    )
    counts = hub.request_counts("alice/counted")
    assert counts["api"] == 1 and counts["file"] >= 1 and counts["storage"] == 0
    assert all(r.kind == "file" for r in hub.requests("alice/counted") if "/resolve/" in r.path)
    hub.reset_requests()
    assert hub.request_counts("alice/counted") == {"api": 0, "file": 0, "storage": 0}


def test_request_bytes_count_what_the_client_sent(hub: HubServer, api: HfApi) -> None:
    """A commit's bytes reach the log as its request bodies: the regular file inside the
    commit's payload (base64), the LFS object in the storage PUT, byte for byte; and the time
    the server took to answer each."""
    hub.create_repo("alice/sent")
    hub.reset_requests()
    regular, stored = b"r" * 30_000, b"z" * 20_000
    api.create_commit(
        "alice/sent",
        [add("a.json", regular), add("b.tar.zst", stored)],
        commit_message="two files",
        repo_type="dataset",
    )
    sent = hub.request_bytes("alice/sent")
    assert sent["storage"] == len(stored) + sum(
        r.request_size for r in hub.requests("alice/sent", kind="storage") if r.method == "POST"
    )
    (commit,) = [r for r in hub.requests("alice/sent") if "/commit/" in r.path]
    assert len(regular) * 4 // 3 < commit.request_size < len(regular) * 4 // 3 + 1_000
    assert sent["api"] == sum(r.request_size for r in hub.requests("alice/sent", kind="api"))
    assert sent["api"] > commit.request_size and sent["file"] == 0
    assert 0 < commit.seconds < hub.seconds_serving("alice/sent")  # the preupload's too
    hub.reset_requests()
    api.dataset_info("alice/sent")
    assert hub.request_bytes("alice/sent") == {"api": 0, "file": 0, "storage": 0}


def test_repo_info_with_expand_answers_only_what_was_asked(hub: HubServer, api: HfApi) -> None:
    files = {f"bundles/p{i}/t@unpinned.json": b"{}" for i in range(40)}
    hub.create_repo("alice/expanded", files=files)
    hub.reset_requests()
    whole = api.dataset_info("alice/expanded")
    assert whole.siblings is not None and len(whole.siblings) == 41  # with .gitattributes
    only_sha = api.dataset_info("alice/expanded", expand=["sha"])
    assert only_sha.sha == whole.sha and only_sha.siblings is None and only_sha.private is None
    card = api.dataset_info("alice/expanded", expand=["private", "lastModified"])
    assert card.private is False and card.sha is None and card.siblings is None
    whole_bytes, sha_bytes, _ = (record.size for record in hub.requests("alice/expanded"))
    assert sha_bytes < 200 < 40 * 50 < whole_bytes  # every file's name, or none
    with pytest.raises(HfHubHTTPError) as refused:
        api.dataset_info("alice/expanded", expand=["sha", "nonsense"])  # type: ignore[list-item]
    assert refused.value.response.status_code == 400
    assert hub.response_bytes("alice/expanded")["api"] == sum(
        record.size for record in hub.requests("alice/expanded")
    )


@pytest.fixture
def plain_client() -> Iterator[None]:
    """huggingface_hub's own client, as any user of the server has it: the bundler's commands
    run in this process may have bounded the shared session's waits on 429s (a response hook,
    bundler.hub.client.ratelimit), which would answer for the server here; it is put back after."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils._http import default_client_factory

    from bundler.hub.client import ratelimit

    set_client_factory(default_client_factory)
    yield
    if ratelimit._installed:
        set_client_factory(ratelimit.bounded_client)


def test_rate_limit_windows_begin_when_limits_are_turned_on_not_on_the_wall_clock() -> None:
    # a wall-clock window would end one second after the limits are turned on; the quota
    # spent before that mark is still spent after it, until the limits' own window ends
    now = [299.0]
    limiter = RateLimiter(Clock(lambda: now[0]))
    limiter.enable(RateLimits(anonymous_resolvers=2))
    for _ in range(2):
        limiter.check_request("file", "anonymous:127.0.0.1", anonymous=True)
    now[0] = 301.0
    with pytest.raises(RateLimitedError) as refused:
        limiter.check_request("file", "anonymous:127.0.0.1", anonymous=True)
    assert (refused.value.status, refused.value.ratelimit.reset) == (429, 298)
    now[0] = 599.0
    limiter.check_request("file", "anonymous:127.0.0.1", anonymous=True)
    limiter.reset()  # a new window from now: the wall-clock mark at 600 s changes nothing
    now[0] = 601.0
    for _ in range(2):
        limiter.check_request("file", "anonymous:127.0.0.1", anonymous=True)
    with pytest.raises(RateLimitedError):
        limiter.check_request("file", "anonymous:127.0.0.1", anonymous=True)


@pytest.mark.usefixtures("plain_client")
def test_rate_limits_answer_429_with_ratelimit_headers(hub: HubServer, api: HfApi) -> None:
    hub.create_repo("alice/limited", files={"a.json": b"{}"})
    hub.enable_rate_limits(RateLimits(api=3, commits_per_hour=2))
    try:
        for _ in range(3):
            api.dataset_info("alice/limited")
        with pytest.raises(HfHubHTTPError) as err:
            api.dataset_info("alice/limited")
        response = err.value.response
        assert response.status_code == 429 and "Retry-After" not in response.headers
        info = parse_ratelimit_headers(response.headers)
        assert info is not None and (info.remaining, info.limit, info.window_seconds) == (0, 3, 300)
        assert 0 < info.reset_in_seconds <= 300
        hub.advance_clock(300)  # the next window: the quota is back
        api.dataset_info("alice/limited")
        # commits: 2 an hour on this repo, then 429 "commits" (the client does not retry it)
        hub.enable_rate_limits(RateLimits(commits_per_hour=2))
        for n in range(2):
            api.upload_file(
                path_or_fileobj=str(n).encode(),
                path_in_repo="n",
                repo_id="alice/limited",
                repo_type="dataset",
            )
        with pytest.raises(HfHubHTTPError) as err:
            api.upload_file(
                path_or_fileobj=b"9", path_in_repo="n", repo_id="alice/limited", repo_type="dataset"
            )
        assert err.value.response.status_code == 429
        assert (
            err.value.response.headers["RateLimit-Policy"] == '"fixed window";"commits";q=2;w=3600'
        )
        hub.advance_clock(3600)
        api.upload_file(
            path_or_fileobj=b"9", path_in_repo="n", repo_id="alice/limited", repo_type="dataset"
        )
    finally:
        hub.disable_rate_limits()


def test_armed_rate_limit_fault_is_retried_after_its_reset(hub: HubServer, api: HfApi) -> None:
    """The client sleeps t + 1 s on a 429 carrying RateLimit headers, then retries."""
    hub.create_repo("alice/armed", files={"a.json": b"{}"})
    hub.inject("GET", r"/api/datasets/alice/armed/tree/", Fault.rate_limited(0))
    assert len(list(api.list_repo_tree("alice/armed", repo_type="dataset"))) == 2
    faulted = [r for r in hub.requests("alice/armed") if r.fault]
    assert [(r.status, r.fault) for r in faulted] == [(429, "status 429")]


def refusal(call: Callable[[], object]) -> HfHubHTTPError:
    """The client's error for a request the server refuses."""
    with pytest.raises(HfHubHTTPError) as err:
        call()
    return err.value


def test_at_most_10000_entries_a_folder_and_the_hub_says_why(hub: HubServer, api: HfApi) -> None:
    hub.create_repo("alice/full", files={f"d/{i}": b"" for i in range(10_000)})
    one_more = partial(
        api.upload_file,
        path_or_fileobj=b"x",
        path_in_repo="d/one-more",
        repo_id="alice/full",
        repo_type="dataset",
    )
    error = refusal(one_more)
    assert error.response.status_code == 400
    # The Hub's reason, in the body's `error` and X-Error-Message, which the client keeps as
    # the server's message (its own text begins "Bad request for commit endpoint:").
    reason = error.response.json()["error"]
    assert reason == error.response.headers["X-Error-Message"] == error.server_message
    assert reason == (
        "Your push was rejected because it contains too many files per directory. Each "
        "directory in your git repo can only contain up to 10000 files. Offending reference: "
        "refs/heads/main Offending directories: /d/"
    )
    # As from the Hub, the client's first line is the request's id alone: the reason is below
    request_id = error.response.headers["X-Request-Id"]
    assert request_id.startswith("Root=1-")
    assert str(error).splitlines()[0] == f"(Request ID: {request_id})"
    api.upload_file(
        path_or_fileobj=b"x", path_in_repo="e/elsewhere", repo_id="alice/full", repo_type="dataset"
    )
    # a subfolder is an entry too; replacing a file adds none
    assert "/d/" in str(refusal(partial(one_more, path_in_repo="d/sub/file")))
    api.upload_file(
        path_or_fileobj=b"y", path_in_repo="d/0", repo_id="alice/full", repo_type="dataset"
    )


def test_every_commit_path_is_held_to_the_repositorys_limits(hub: HubServer, api: HfApi) -> None:
    """The commit endpoint on a branch and on a pull request, a merge, and seeded files alike;
    each limit is the repository's own (a test makes it small), the Hub's by default."""
    small = RepoLimits(folder_entries=3, files=6)
    hub.create_repo("alice/small", files={"d/a": b"a", "d/b": b"b"}, limits=small)
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    for name in ("c", "x"):  # two pull requests, each within the limit alone
        bob.create_commit(
            "alice/small",
            [add(f"d/{name}", name.encode())],
            commit_message=f"Add {name}",
            repo_type="dataset",
            create_pr=True,
        )
    api.merge_pull_request("alice/small", 1, repo_type="dataset")
    error = refusal(partial(api.merge_pull_request, "alice/small", 2, repo_type="dataset"))
    assert error.response.status_code == 400
    assert error.server_message is not None
    assert "up to 3 files. Offending reference: refs/heads/main" in error.server_message
    refused_in_pr = partial(
        bob.create_commit,
        "alice/small",
        [add("d/y", b"y")],
        commit_message="More",
        repo_type="dataset",
        revision="refs/pr/2",
    )
    assert "Offending reference: refs/pr/2 " in str(refusal(refused_in_pr))
    opening = partial(
        bob.create_commit,
        "alice/small",
        [add("d/z", b"z")],
        commit_message="Another",
        repo_type="dataset",
        create_pr=True,
    )
    assert "Offending reference: refs/pr/3 " in str(refusal(opening))
    # files: .gitattributes and d/a, d/b, d/c make 4; two more make 6, a seventh is refused
    api.create_commit(
        "alice/small",
        [add("e/1", b"1"), add("e/2", b"2")],
        commit_message="Two more",
        repo_type="dataset",
    )
    seventh = partial(
        api.upload_file,
        path_or_fileobj=b"3",
        path_in_repo="e/3",
        repo_id="alice/small",
        repo_type="dataset",
    )
    error = refusal(seventh)
    assert error.response.status_code == 400 and error.server_message == (
        "Your push was rejected because it contains too many files: 7, more than the 6 a "
        "repository may hold (the Hub recommends fewer than 100k files per repository). "
        "Offending reference: refs/heads/main"
    )
    hub.set_limits("alice/small", RepoLimits(folder_entries=3, files=None))
    seventh()
    with pytest.raises(HubError, match="too many files per directory"):
        hub.create_repo("alice/seeded", files={f"s/{i}": b"" for i in range(4)}, limits=small)
    assert RepoLimits() == RepoLimits(folder_entries=10_000, files=100_000)


def test_a_merge_counts_against_the_commits_an_hour(hub: HubServer, api: HfApi) -> None:
    hub.create_repo("alice/hourly", files={"a.json": b"{}"})
    bob = HfApi(endpoint=hub.url, token=SUBMITTER_TOKEN)
    bob.create_commit(
        "alice/hourly",
        [add("b.json", b"{}")],
        commit_message="Add b",
        repo_type="dataset",
        create_pr=True,
    )
    hub.enable_rate_limits(RateLimits(commits_per_hour=1))
    try:
        api.upload_file(
            path_or_fileobj=b"1", path_in_repo="n", repo_id="alice/hourly", repo_type="dataset"
        )
        error = refusal(partial(api.merge_pull_request, "alice/hourly", 1, repo_type="dataset"))
        assert error.response.status_code == 429
        assert "1 commits per 3600 seconds" in str(error.server_message)
    finally:
        hub.disable_rate_limits()


def test_card_metadata_is_validated(hub: HubServer, api: HfApi, repo: str) -> None:
    good = (
        "---\nconfigs:\n- config_name: default\n"
        "  data_files:\n  - split: train\n    path: a.csv\n---\n"
    )
    api.upload_file(
        path_or_fileobj=good.encode(), path_in_repo="README.md", repo_id=repo, repo_type="dataset"
    )
    for bad in (
        "---\nconfigs:\n- data_files: a.csv\n---\n",  # no config_name
        "---\nconfigs: default\n---\n",
        "---\nlicense: [1, 2]\n---\n",
        "---\ndataset_info:\n  features: 3\n---\n",
        "---\n- a list\n---\n",
        "---\nkey: [unclosed\n---\n",
    ):
        with pytest.raises(ValueError, match=r"Invalid metadata in README\.md"):
            api.upload_file(
                path_or_fileobj=bad.encode(),
                path_in_repo="README.md",
                repo_id=repo,
                repo_type="dataset",
            )
    # the commit itself refuses it too, when a client skips validate-yaml
    card = base64.b64encode(b"---\nlicense: 3\n---\n").decode()
    header = {"key": "header", "value": {"summary": "bad card"}}
    file = {"key": "file", "value": {"path": "README.md", "encoding": "base64", "content": card}}
    payload = json.dumps(header) + "\n" + json.dumps(file) + "\n"
    response = httpx2.post(
        f"{hub.url}/api/datasets/{repo}/commit/main",
        content=payload,
        headers={"Authorization": f"Bearer {WRITE_TOKEN}", "Content-Type": "application/x-ndjson"},
    )
    assert (
        response.status_code == 400 and "Invalid metadata in README.md" in response.json()["error"]
    )
    big = "---\npretty_name: " + "x" * (1024 * 1024 + 1) + "\n---\n"
    answer = httpx2.post(
        f"{hub.url}/api/validate-yaml", json={"content": big, "repoType": "dataset"}
    )
    assert answer.status_code == 413
    assert hub.file_bytes(repo, "README.md") == good.encode()
