"""The pure decisions behind the Hub's permissions, rate limits and card checks: what a token
may do on a repository (bundler.hub.client.access), how a 429 is read
(bundler.hub.client.ratelimit), and what the Hub would refuse in a dataset card
(bundler.hub.leaderboard.card.check_card)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from functools import partial
from typing import Any

import httpx2
import pytest
from huggingface_hub import hf_raise_for_status

from bundler.cli.error_words import words_for
from bundler.core.errors import BundlerError, HubAccessError, NoWriteAccess
from bundler.hub.client.access import AccessRights, require_card, require_review, require_upload
from bundler.hub.client.commit import is_card_refusal
from bundler.hub.client.ratelimit import Announced, announced, too_long
from bundler.hub.client.session import HubSession, is_transient
from bundler.hub.leaderboard.card import MAX_METADATA_BYTES, check_card, render_dataset_card

REPO = "gptnt/leaderboard"


def whoami(
    role: str | None = "write",
    *,
    name: str = "alice",
    orgs: list[dict[str, Any]] | None = None,
    fine: dict[str, Any] | None = None,
) -> dict[str, Any]:
    token: dict[str, Any] = {"displayName": "t"}
    if role is not None:
        token["role"] = role
    if fine is not None:
        token["fineGrained"] = fine
    return {
        "type": "user",
        "name": name,
        "orgs": orgs or [],
        "auth": {"type": "access_token", "accessToken": token},
    }


MEMBER = [{"type": "org", "name": "gptnt", "roleInOrg": "write"}]


def rights(answer: dict[str, Any], repo: str = REPO) -> AccessRights:
    return AccessRights.of(answer, repo)


def refusal(action: Any) -> str:
    with pytest.raises(HubAccessError) as raised:
        action()
    assert raised.value.exit_code == 2
    return worded(raised.value)


def worded(error: BundlerError) -> str:
    """The error as the command line words it (bundler.cli.error_words): the library's own
    words name no flag."""
    message, hint = words_for(error)
    return message if hint is None else f"{message} ({hint})"


def test_write_access_comes_from_ownership_not_from_the_role() -> None:
    member, own, stranger = (
        rights(whoami(orgs=MEMBER)),
        rights(whoami(name="gptnt")),
        rights(whoami()),
    )
    assert member.can_write and own.can_write
    assert not stranger.can_write and stranger.can_contribute
    reader = rights(whoami(orgs=[{"name": "gptnt", "roleInOrg": "read"}]))
    assert not reader.can_write  # an org member with the read role writes nothing


def test_a_read_token_may_do_nothing_that_writes() -> None:
    reader = rights(whoami("read", orgs=MEMBER))
    assert not reader.can_write and not reader.can_contribute
    for create_pr in (False, True):
        text = refusal(partial(require_upload, reader, create_pr=create_pr))
        assert "read-only" in text and "write token of your own account" in text


def test_fine_grained_tokens_follow_their_grants() -> None:
    scoped = {
        "global": [],
        "scoped": [{"entity": {"type": "org", "name": "gptnt"}, "permissions": ["repo.write"]}],
    }
    assert rights(whoami("fineGrained", orgs=MEMBER, fine=scoped)).can_write
    assert not rights(whoami("fineGrained", orgs=MEMBER, fine=scoped), "other/x").can_write
    discuss = {"global": ["discussion.write"], "scoped": []}
    submitter = rights(whoami("fineGrained", fine=discuss))
    assert submitter.can_contribute and not submitter.can_write
    bare = rights(whoami("fineGrained", orgs=MEMBER, fine={"global": [], "scoped": []}))
    assert not bare.can_write and not bare.can_contribute
    text = refusal(lambda: require_upload(bare, create_pr=True))
    assert "may not open pull requests" in text


def test_upload_decisions() -> None:
    stranger, member = rights(whoami()), rights(whoami(orgs=MEMBER))
    require_upload(member, create_pr=False)
    require_upload(stranger, create_pr=True)
    assert refusal(lambda: require_upload(stranger, create_pr=False)) == (
        f"no write access to {REPO}, add --create-pr to propose the bundles"
    )


def test_review_and_card_decisions() -> None:
    stranger, member = rights(whoami()), rights(whoami(orgs=MEMBER))
    reader = rights(whoami("read", orgs=MEMBER))
    require_review(member, comment=True, merge=True)
    require_review(stranger, comment=True, merge=False)
    assert "--merge needs write access" in refusal(
        lambda: require_review(stranger, comment=False, merge=True)
    )
    assert "--comment needs a token allowed to comment" in refusal(
        lambda: require_review(reader, comment=True, merge=False)
    )
    require_card(member)
    assert "needs write access" in refusal(lambda: require_card(stranger))


def forbidden(message: str) -> httpx2.Response:
    request = httpx2.Request("POST", f"https://hub.example/api/datasets/{REPO}/commit/main")
    return httpx2.Response(403, headers={"X-Error-Message": message}, request=request)


def test_the_hubs_create_pr_refusal_reads_as_no_write_access() -> None:
    with pytest.raises(Exception) as raised:
        hf_raise_for_status(
            forbidden("Forbidden: pass `create_pr=1` as a query parameter to create a Pull Request")
        )
    described = HubSession(REPO).describe(raised.value, doing="committing")
    assert isinstance(described, NoWriteAccess) and described.remedy == "create-pr"
    assert worded(described) == f"no write access to {REPO}, add --create-pr to propose the bundles"


def test_rate_limit_headers_are_read_as_the_client_reads_them() -> None:
    headers = {
        "RateLimit": '"api";r=0;t=840',
        "RateLimit-Policy": '"fixed window";"api";q=1000;w=300',
    }
    assert announced(headers) == Announced(840.0, "api")
    assert announced({**headers, "Retry-After": "12"}) == Announced(12.0, None)
    assert announced({"RateLimit": '"api";r=5;t=840'}) is None  # requests remain
    assert announced({}) is None
    error = too_long(Announced(840, "api"), 300, now=datetime(2026, 1, 2, 3, 17, tzinfo=UTC))
    assert error.exit_code == 75 and error.retry_after == 840
    assert error.message.startswith("the Hub's api rate limit resets in 840 s (at 03:31 UTC)")


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "inf"},
        {"Retry-After": "nan"},
        {"Retry-After": "1e12"},
        {"RateLimit": '"api";r=0;t=1000000000000'},
    ],
    ids=["inf", "nan", "1e12", "ratelimit-t-1e12"],
)
def test_a_reset_no_clock_can_reach_is_a_long_wait_not_a_crash(headers: dict[str, str]) -> None:
    """A stranger's server may announce any reset: one past what a datetime can say is more
    than any command waits (exit 75, one line), never an OverflowError."""
    wait = announced(headers)
    assert wait is not None and wait.seconds == math.inf
    error = too_long(wait, 300, now=datetime(2026, 1, 2, 3, 17, tzinfo=UTC))
    assert error.exit_code == 75 and error.reset_at is None
    assert "announced no reset this command can wait for" in error.message


def test_xet_less_endpoint_is_not_transient() -> None:
    inner = RuntimeError("404 Not Found for url http://x/api/datasets/a/b/xet-write-token/main")
    outer = ConnectionError("upload failed")
    outer.__cause__ = inner
    assert not is_transient(outer)
    described = HubSession(REPO).describe(outer, doing="committing")
    assert described.exit_code == 2 and "HF_HUB_DISABLE_XET=1" in str(described)


def test_check_card() -> None:
    assert check_card(render_dataset_card(REPO, [], 0)) is None
    assert check_card("# no header\n") is not None
    assert "not valid" in (check_card("---\nkey: [1, 2\n---\n# body\n") or "")
    assert "not valid" in (check_card("---\n- a list\n---\n# body\n") or "")
    large = "---\nnote: " + "x" * MAX_METADATA_BYTES + "\n---\n# body\n"
    assert "over the" in (check_card(large) or "")


def test_card_refusals_are_told_from_other_refusals() -> None:
    assert is_card_refusal(ValueError("Invalid metadata in README.md.\n- bad"))
    assert not is_card_refusal(ValueError("something else"))
