"""The Hub session against the test Hub, through the real client: who it says it is (the
User-Agent every request carries), and what each failure the client raises becomes (one named
error of bundler.core.errors, with its fields and kind), and how the command line words it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import READ_TOKEN, SUBMITTER_TOKEN, WRITE_TOKEN
from helpers import run_cli
from hubserver import Fault, HubServer
from huggingface_hub import CommitOperationAdd

from bundler.cli.error_words import words_for
from bundler.core.errors import (
    BadCredentials,
    BundlerError,
    GatedRepo,
    HubDidNotAnswer,
    NoWriteAccess,
    RateLimited,
    RateLimitOutlasts,
    RefusedByHub,
    RepositoryNotFound,
    RevisionNotFound,
)
from bundler.core.version import VERSION
from bundler.hub.client import session as session_module
from bundler.hub.client.session import REPO_TYPE, HubSession, describe_failure

UNKNOWN_TOKEN = "hf_NoSuchTokenForTests0123456789abcdef"


def test_every_request_names_the_bundler_and_its_version(hub: HubServer, repo_id: str) -> None:
    """`HfApi(library_name=..., library_version=...)`: the Hub's logs tell our requests from any
    other client's. The API calls and the one-GET file reads (their own headers) alike."""
    hub.create_repo(repo_id, files={"a.json": b"{}"})
    hub.reset_requests()
    session = HubSession(repo_id, token=WRITE_TOKEN)
    head = session.head("main")
    assert session.read_small_file("a.json", head) == b"{}"
    session.whoami()
    agents = [record.user_agent or "" for record in hub.requests()]
    assert len(agents) == 3
    assert all(agent.startswith(f"statics-bundler/{VERSION};") for agent in agents), agents


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own retries of a read (not the client's) back off briefly, so a fault that lasts
    through every attempt fails in milliseconds."""
    monkeypatch.setattr(session_module, "READ_BACKOFF_SECONDS", 0.01)


def raised(action: object) -> BundlerError:
    assert callable(action)
    with pytest.raises(BundlerError) as caught:
        action()
    return caught.value


def test_a_token_the_hub_does_not_know_is_bad_credentials(hub: HubServer, repo_id: str) -> None:
    hub.create_repo(repo_id)
    error = raised(lambda: HubSession(repo_id, token=UNKNOWN_TOKEN).head("main"))
    assert isinstance(error, BadCredentials) and error.kind == "bad-credentials"
    assert error.exit_code == 2 and error.doing == "reading revision 'main'"
    assert "--token" in (words_for(error)[1] or "") and "--token" not in str(error)


def test_a_repository_nobody_can_see_is_repository_not_found(hub: HubServer, repo_id: str) -> None:
    hub.create_repo(repo_id, private=True)  # as the Hub: private and missing read the same
    for token in (READ_TOKEN, WRITE_TOKEN):
        missing = f"{repo_id}-missing" if token == WRITE_TOKEN else repo_id
        error = raised(lambda: HubSession(missing, token=token).head("main"))  # noqa: B023
        assert isinstance(error, RepositoryNotFound) and error.kind == "repository-not-found"
        assert error.repo == missing and error.exit_code == 2
        assert words_for(error)[1].startswith("check --repo (a typo?) and that the token can see")
        assert f"bundler init --repo {missing}" in str(words_for(error)[1])


def test_a_missing_revision_names_the_revision(hub: HubServer, repo_id: str) -> None:
    hub.create_repo(repo_id)
    session = HubSession(repo_id, token=READ_TOKEN)
    error = raised(lambda: session.head("no-such-branch"))
    assert isinstance(error, RevisionNotFound) and error.kind == "revision-not-found"
    assert (error.repo, error.revision, error.exit_code) == (repo_id, "no-such-branch", 2)
    error = raised(lambda: session.list_files("bundles", "refs/pr/9"))  # percent-encoded
    assert isinstance(error, RevisionNotFound) and error.revision == "refs/pr/9"
    assert "check --revision" in (words_for(error)[1] or "")


def test_a_commit_the_token_may_not_make_is_no_write_access(hub: HubServer, repo_id: str) -> None:
    """The Hub's 403s, as describe reads them: a submitter's direct commit (the Hub asks for a
    pull request), a read token's commit (propose a pull request), a read token's pull request
    (ask the owners)."""
    hub.create_repo(repo_id)
    cases = [(SUBMITTER_TOKEN, False, None), (READ_TOKEN, False, "committing"),
             (READ_TOKEN, True, "committing")]  # fmt: skip
    for token, create_pr, doing in cases:
        session = HubSession(repo_id, token=token)
        session.whoami()
        with pytest.raises(Exception) as failed:
            session.api.create_commit(
                repo_id,
                [CommitOperationAdd("a.json", b"{}")],
                commit_message="x",
                repo_type=REPO_TYPE,
                create_pr=create_pr,
            )
        error = session.describe(failed.value, doing="committing", create_pr=create_pr)
        assert isinstance(error, NoWriteAccess) and error.kind == "no-write-access"
        assert (error.repo, error.user, error.doing) == (repo_id, "submitter", doing)
        assert error.remedy == ("ask-owners" if create_pr else "create-pr")
        assert error.exit_code == 2
        if doing is None:
            assert words_for(error) == (
                f"no write access to {repo_id}, add --create-pr to propose the bundles",
                None,
            )
    assert hub.commits(repo_id)[0].summary == "initial commit"


def test_a_gated_repository_is_gated_repo(hub: HubServer, repo_id: str) -> None:
    hub.create_repo(repo_id, files={"a.json": b"{}"}, gated=True)
    session = HubSession(repo_id, token=READ_TOKEN)
    error = raised(lambda: session.read_small_file("a.json", "main"))
    assert isinstance(error, GatedRepo) and error.kind == "gated-repo"
    assert (error.repo, error.doing, error.exit_code) == (repo_id, "reading a.json", 2)
    assert HubSession(repo_id, token=WRITE_TOKEN).read_small_file("a.json", "main") == b"{}"


def test_rate_limiting_to_the_end_is_rate_limited(
    hub: HubServer, repo_id: str, quick_retries: None
) -> None:
    hub.create_repo(repo_id)
    hub.inject("GET", f"/api/datasets/{repo_id}/revision/", Fault.rate_limited(reset=0), times=4)
    before = datetime.now(UTC)
    error = raised(lambda: HubSession(repo_id, token=READ_TOKEN).head("main"))
    assert isinstance(error, RateLimited) and error.kind == "rate-limited"
    assert (error.repo, error.bucket, error.retry_after, error.exit_code) == (
        repo_id,
        "api",
        0,
        75,
    )
    assert error.reset_at is not None and before <= error.reset_at <= datetime.now(UTC)


def test_a_window_longer_than_the_command_waits_is_rate_limit_outlasts(
    hub: HubServer, repo_id: str
) -> None:
    hub.create_repo(repo_id)
    hub.inject("GET", f"/api/datasets/{repo_id}/revision/", Fault.rate_limited(reset=600))
    before = datetime.now(UTC)
    error = raised(lambda: HubSession(repo_id, token=READ_TOKEN, max_wait=1).head("main"))
    assert isinstance(error, RateLimitOutlasts) and error.kind == "rate-limit-outlasts-wait"
    assert (error.bucket, error.retry_after, error.max_wait, error.exit_code) == ("api", 600, 1, 75)
    assert (
        before + timedelta(seconds=600)
        <= error.reset_at
        <= datetime.now(UTC) + timedelta(seconds=600)
    )
    assert "--max-wait" in (words_for(error)[1] or "") and "--max-wait" not in str(error)


def test_a_server_error_to_the_end_is_hub_did_not_answer(
    hub: HubServer, repo_id: str, quick_retries: None
) -> None:
    hub.create_repo(repo_id)
    hub.inject("GET", f"/api/datasets/{repo_id}/revision/", Fault.status(503), times=4)
    error = raised(lambda: HubSession(repo_id, token=READ_TOKEN).head("main"))
    assert isinstance(error, HubDidNotAnswer) and error.kind == "hub-did-not-answer"
    assert (error.status, error.exit_code) == (503, 75)
    assert error.failure == "Injected fault: HTTP 503"  # the Hub's own words
    assert error.message == (
        "reading revision 'main': the Hub did not answer properly (HTTP 503: Injected fault: "
        "HTTP 503)"
    )
    assert error.doing == "reading revision 'main'"


def test_any_other_refusal_is_refused_by_hub(hub: HubServer, repo_id: str) -> None:
    hub.create_repo(repo_id)
    hub.inject("GET", f"/api/datasets/{repo_id}/revision/", Fault.status(400))
    error = raised(lambda: HubSession(repo_id, token=READ_TOKEN).head("main"))
    assert isinstance(error, RefusedByHub) and error.kind == "refused-by-hub"
    assert (error.status, error.exit_code) == (400, 1)
    # the Hub's own words, never the client's first line (its words, or the request's id)
    assert error.reason == "Injected fault: HTTP 400"
    assert f"(HTTP 400: {error.reason})" in error.message


def test_the_hubs_reason_is_one_line_and_bounded() -> None:
    """The client joins the Hub's messages (X-Error-Message, the body's) with line breaks."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    request = httpx2.Request("POST", "https://huggingface.co/api/datasets/o/n/commit/main")
    error = HfHubHTTPError(
        "(Request ID: Root=1-abc)\n\nBad request for commit endpoint:\nfirst line",
        response=httpx2.Response(400, request=request),
        server_message="first line\nsecond\tline " + "x" * 2000,
    )
    worded = describe_failure(error, repo="o/n", endpoint="https://huggingface.co", doing="c")
    assert isinstance(worded, RefusedByHub)
    assert worded.message.startswith("c: the Hub refused the request (HTTP 400: first line second")
    assert worded.reason.endswith("xxx...") and len(worded.reason) == 1000
    assert "\n" not in worded.message and "Request ID" not in worded.message
    error.server_message = None  # the Hub said nothing: the client's words, past the id
    worded = describe_failure(error, repo="o/n", endpoint="https://huggingface.co", doing="c")
    assert isinstance(worded, RefusedByHub)
    assert worded.reason == "Bad request for commit endpoint:"


def test_the_json_error_object_carries_the_kind(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """What a scheduler acts on, beside the words: the error's kind."""
    missing = f"{repo_id}-missing"
    result = run_cli(
        "download", "--repo", missing, "-o", tmp_path / "dl", "--json", env={"HF_TOKEN": ""}
    )
    assert result.returncode == 2, result.stderr
    payload = json.loads(result.stdout)
    assert payload["error_kind"] == "repository-not-found" and payload["exit_code"] == 2
    assert payload["hint"] == (
        "check --repo (a typo?) and that the token can see it; a new leaderboard is started "
        f"with `bundler init --repo {missing}`"
    )
    assert payload["error"] in result.stderr
