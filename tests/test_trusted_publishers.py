"""A CI job with no stored token (Trusted Publishers): huggingface_hub exchanges the job's OIDC
id token at the test Hub's `/oauth/token` (tests/hubserver/oidc.py) for a short-lived token to
one repository, and every command given no token uses it, as it would use HF_TOKEN.

Each command runs as a process of its own (run_cli_process): huggingface_hub keeps the token it
exchanged for the life of the process, as a CI step's process does."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factory import RunSpec, write_tree
from helpers import one_line_error, run_cli_process
from hubserver import Fault, HubServer
from hubserver.oidc import LIFETIME, OIDC_USER
from oidc_provider import WORKFLOW_CLAIMS, GitHubOidc

EXPECT = ("--expect", "expert-vqa=3")
PUBLISHER = {key: WORKFLOW_CLAIMS[key] for key in ("repository", "workflow", "ref")}
"""What a maintainer registers on the Hub: this workflow of this repository, on main."""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "output"
    write_tree(root, [RunSpec(model="qwen3", rows=3), RunSpec(model="llama4", rows=3)])
    return root


@pytest.fixture
def publisher(hub: HubServer, repo_id: str) -> str:
    """The repository's Trusted Publisher registered; the resource a job names."""
    resource = f"datasets/{repo_id}"
    hub.add_trusted_publisher(resource, PUBLISHER)
    return resource


@pytest.fixture
def github(hub: HubServer) -> Iterator[GitHubOidc]:
    with GitHubOidc(hub).serving() as endpoint:
        yield endpoint


def sync(
    hub: HubServer, tree: Path, repo_id: str, env: dict[str, str], *args: object
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`bundler sync --json` with no HF_TOKEN (conftest leaves it empty) and `env`."""
    result = run_cli_process(
        "sync", tree, "-o", tree.parent / "bundles", "--repo", repo_id, *EXPECT, *args, "--json",
        env=env,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    for token in hub.exchanged_tokens():
        assert token not in output
    return result, json.loads(result.stdout)


def archives(hub: HubServer, repo_id: str) -> list[str]:
    return [path for path in hub.list_files(repo_id) if path.endswith(".tar.zst")]


def test_a_job_s_own_id_token_publishes_with_no_stored_token(
    hub: HubServer, repo_id: str, tree: Path, publisher: str
) -> None:
    """HF_OIDC_ID_TOKEN (a CI that mints its id token itself, GitLab's way): sync publishes,
    and the Hub says the synthetic publisher pushed it; --debug shows no token either."""
    before = set(hub.exchanged_tokens())
    env = {"HF_OIDC_RESOURCE": publisher, "HF_OIDC_ID_TOKEN": hub.id_token(WORKFLOW_CLAIMS)}
    result, report = sync(hub, tree, repo_id, env, "--debug")
    assert result.returncode == 0, result.stderr
    assert report["counts"]["published"] == 2 and len(archives(hub, repo_id)) == 2
    assert {commit.author for commit in hub.commits(repo_id)[:-1]} == {OIDC_USER}
    assert len(set(hub.exchanged_tokens()) - before) == 1  # one exchange for the whole sync


def test_a_github_job_publishes_with_its_id_token_endpoint(
    hub: HubServer, repo_id: str, tree: Path, publisher: str, github: GitHubOidc
) -> None:
    """In GitHub Actions (`permissions: id-token: write`), the client asks the runner's
    endpoint for an id token for this Hub, with the runner's bearer, and exchanges it."""
    result, report = sync(hub, tree, repo_id, {**github.env(), "HF_OIDC_RESOURCE": publisher})
    assert result.returncode == 0, result.stderr
    assert report["counts"]["published"] == 2
    assert [request["audience"] for request in github.requests] == [hub.url]
    upload = run_cli_process(
        "upload", tree.parent / "bundles", "--repo", repo_id, "--json",
        env={**github.env(), "HF_OIDC_RESOURCE": publisher},
    )  # fmt: skip
    assert upload.returncode == 0, upload.stderr
    outcomes = [bundle["outcome"] for bundle in json.loads(upload.stdout)["bundles"]]
    assert outcomes == ["already-there"] * 2


def refused(
    hub: HubServer, tree: Path, repo_id: str, env: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    """A sync that ends on a refused exchange: exit 2, one error line, nothing published."""
    result, report = sync(hub, tree, repo_id, env)
    assert result.returncode == 2, result.stderr
    assert report["exit_code"] == 2 and report["error_kind"] == "token-exchange"
    assert archives(hub, repo_id) == []
    return one_line_error(result.stderr), report


def test_an_unregistered_workflow_is_told_to_register_as_a_trusted_publisher(
    hub: HubServer, repo_id: str, tree: Path
) -> None:
    resource = f"datasets/{repo_id}"  # no publisher registered on it
    env = {"HF_OIDC_RESOURCE": resource, "HF_OIDC_ID_TOKEN": hub.id_token(WORKFLOW_CLAIMS)}
    line, report = refused(hub, tree, repo_id, env)
    assert line.endswith(
        f"the Hub refused to exchange this job's OIDC id token for a token to {resource}"
    )
    assert f"add this workflow as a Trusted Publisher of {resource} on the Hub" in report["hint"]
    assert "HF_TOKEN" not in line + report["hint"]  # never the stored token's advice


@pytest.mark.parametrize(
    "claims",
    [
        {**WORKFLOW_CLAIMS, "workflow": "another-workflow"},
        {**WORKFLOW_CLAIMS, "ref": "refs/heads/main-backup"},  # matched exactly, no prefix
        {**WORKFLOW_CLAIMS, "repository": "someone/fork"},
    ],
    ids=["workflow", "branch", "repository"],
)
def test_a_job_the_publisher_does_not_name_is_refused(
    hub: HubServer, repo_id: str, tree: Path, publisher: str, claims: dict[str, str]
) -> None:
    env = {"HF_OIDC_RESOURCE": publisher, "HF_OIDC_ID_TOKEN": hub.id_token(claims)}
    line, _ = refused(hub, tree, repo_id, env)
    assert "refused to exchange" in line


def test_a_publisher_of_another_repository_gets_no_token_to_this_one(
    hub: HubServer, repo_id: str, tree: Path, publisher: str
) -> None:
    """The workflow is registered on another leaderboard: asking for this one is refused by
    the Hub; asking for that one to write this one is refused before anything is sent."""
    other = f"gptnt/leaderboard-{uuid.uuid4().hex[:10]}"
    hub.create_repo(other)
    id_token = hub.id_token(WORKFLOW_CLAIMS)
    env = {"HF_OIDC_RESOURCE": f"datasets/{other}", "HF_OIDC_ID_TOKEN": id_token}
    line, _ = refused(hub, tree, other, env)
    assert "refused to exchange" in line

    env = {"HF_OIDC_RESOURCE": publisher, "HF_OIDC_ID_TOKEN": id_token}
    result, report = sync(hub, tree, other, env)
    assert result.returncode == 2, result.stderr
    assert one_line_error(result.stderr) == (
        f"error: {other}: the token exchanged for this job may write to {publisher} only "
        "(HF_OIDC_RESOURCE)"
    )
    assert report["error_kind"] == "token-exchange-elsewhere"
    assert f"set HF_OIDC_RESOURCE to datasets/{other}" in report["hint"]
    assert archives(hub, other) == []


def test_a_job_without_the_permission_is_told_to_grant_it(
    hub: HubServer, repo_id: str, tree: Path, publisher: str, github: GitHubOidc
) -> None:
    """Without `permissions: id-token: write` GitHub gives the job no id-token endpoint; a
    request token the endpoint does not know is refused by it; outside any CI there is no id
    token at all. Each: exit 2, one line naming the permission."""
    no_url = {"GITHUB_ACTIONS": "true", "HF_OIDC_RESOURCE": publisher}
    wrong_bearer = {
        **github.env(),
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "ghs_not-this-job-s",
        "HF_OIDC_RESOURCE": publisher,
    }
    no_ci = {"HF_OIDC_RESOURCE": publisher}
    for env in (no_url, wrong_bearer, no_ci):
        line, report = refused(hub, tree, repo_id, env)
        assert line.endswith(
            f"HF_OIDC_RESOURCE asks for a token to {publisher}, but this job has no OIDC id "
            "token to exchange for it"
        )
        assert "`permissions: id-token: write`" in report["hint"]
        assert "HF_OIDC_ID_TOKEN" in report["hint"]


def test_an_expired_or_foreign_id_token_is_refused(
    hub: HubServer, repo_id: str, tree: Path, publisher: str
) -> None:
    """The Hub checks the id token's lifetime, its audience (this Hub) and its signature (an
    issuer it trusts): each refused as any other grant."""
    expired = hub.id_token(WORKFLOW_CLAIMS, lifetime=-1)
    other_audience = hub.id_token({**WORKFLOW_CLAIMS, "aud": "https://elsewhere.example"})
    header, payload, _ = hub.id_token(WORKFLOW_CLAIMS).split(".")
    forged = f"{header}.{payload}.AAAA"
    for id_token in (expired, other_audience, forged):
        env = {"HF_OIDC_RESOURCE": publisher, "HF_OIDC_ID_TOKEN": id_token}
        line, _ = refused(hub, tree, repo_id, env)
        assert "refused to exchange" in line


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_in_any_status_reads_as_a_refused_exchange(
    hub: HubServer, repo_id: str, tree: Path, publisher: str, status: int
) -> None:
    """The Hub documents 400 for a refused exchange; a 401 or 403 there (a proxy, a change)
    means the same to the job, and is not taken for the stored token's fault."""
    hub.inject("POST", r"/oauth/token", Fault.status(status), times=100)
    env = {"HF_OIDC_RESOURCE": publisher, "HF_OIDC_ID_TOKEN": hub.id_token(WORKFLOW_CLAIMS)}
    line, _ = refused(hub, tree, repo_id, env)
    assert "refused to exchange" in line


def test_an_exchange_the_hub_does_not_answer_is_temporary(
    hub: HubServer, repo_id: str, tree: Path, publisher: str
) -> None:
    hub.inject("POST", r"/oauth/token", Fault.status(503), times=100)
    env = {"HF_OIDC_RESOURCE": publisher, "HF_OIDC_ID_TOKEN": hub.id_token(WORKFLOW_CLAIMS)}
    result, report = sync(hub, tree, repo_id, env, "--max-wait", "0")
    assert result.returncode == 75, result.stderr
    assert report["exit_code"] == 75 and archives(hub, repo_id) == []


def exchange(hub: HubServer, resource: str) -> str:
    """A token exchanged as huggingface_hub exchanges one."""
    from huggingface_hub._oidc import exchange_oidc_token

    answer = exchange_oidc_token(
        subject_token=hub.id_token(WORKFLOW_CLAIMS), resource=resource, endpoint=hub.url
    )
    assert answer["token_type"] == "bearer" and answer["expires_in"] == LIFETIME
    assert answer["access_token"].startswith("hf_jwt_")
    return str(answer["access_token"])


def test_the_exchanged_token_works_as_hf_token_there_and_nowhere_else(
    hub: HubServer, repo_id: str, tree: Path, publisher: str
) -> None:
    """Given as HF_TOKEN, the exchanged token publishes to its repository; to another one of
    the same organization, the bundler refuses it (exit 2), and the Hub would (403)."""
    token = exchange(hub, publisher)
    result, report = sync(hub, tree, repo_id, {"HF_TOKEN": token})
    assert result.returncode == 0, result.stderr
    assert report["counts"]["published"] == 2

    other = f"gptnt/leaderboard-{uuid.uuid4().hex[:10]}"
    hub.create_repo(other)
    result, report = sync(hub, tree, other, {"HF_TOKEN": token})
    assert result.returncode == 2, result.stderr
    assert (
        report["error_kind"] == "no-write-access"
        and f"no write access to {other}" in (report["error"])
    )
    assert archives(hub, other) == []


def test_the_hub_refuses_an_exchanged_token_outside_its_repository_and_after_it_expires(
    hub: HubServer, repo_id: str, publisher: str
) -> None:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    token = exchange(hub, publisher)
    api = HfApi(endpoint=hub.url, token=token)
    api.upload_file(
        path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=repo_id, repo_type="dataset"
    )
    other = f"gptnt/leaderboard-{uuid.uuid4().hex[:10]}"
    hub.create_repo(other)
    for create_pr in (False, True):
        with pytest.raises(HfHubHTTPError) as raised:
            api.upload_file(
                path_or_fileobj=b"x",
                path_in_repo="x.txt",
                repo_id=other,
                repo_type="dataset",
                create_pr=create_pr,
            )
        assert raised.value.response.status_code == 403
    hub.advance_clock(LIFETIME)
    try:
        with pytest.raises(HfHubHTTPError) as raised:
            api.upload_file(
                path_or_fileobj=b"y", path_in_repo="y.txt", repo_id=repo_id, repo_type="dataset"
            )
        assert raised.value.response.status_code == 401
    finally:
        hub.advance_clock(-LIFETIME)


def test_a_malformed_exchange_is_an_invalid_request(hub: HubServer, publisher: str) -> None:
    """The Hub's OAuth errors: 400, `invalid_request` for a request that is not RFC 8693."""
    import httpx2

    asked = {"grant_type": "client_credentials", "resource": publisher}
    answer = httpx2.post(f"{hub.url}/oauth/token", json=asked)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_request"


def test_other_commands_use_the_exchanged_token_as_they_would_hf_token(
    hub: HubServer, repo_id: str, publisher: str, tmp_path: Path
) -> None:
    """A maintainer's command in the job (defining a task commits the board): the exchanged
    token's write access to its repository is enough."""
    dataset = f"GPTNT/expert-VQA-{uuid.uuid4().hex[:8]}"
    hub.create_repo(dataset, files={"README.md": b"---\n---\n"})
    env = {"HF_OIDC_RESOURCE": publisher, "HF_OIDC_ID_TOKEN": hub.id_token(WORKFLOW_CLAIMS)}
    assert run_cli_process("init", "--repo", repo_id, env=env).returncode == 0
    defined = run_cli_process(
        "tasks", "define", "expert-vqa", "--repo", repo_id, "--dataset", dataset,
        "--split", "test", "--metric", "exact_match.accuracy", "--json", env=env,
    )  # fmt: skip
    assert defined.returncode == 0, defined.stderr
    assert hub.commits(repo_id)[0].author == OIDC_USER
