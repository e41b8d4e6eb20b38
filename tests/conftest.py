"""Session set-up shared by every test: a local Hub-compatible server on 127.0.0.1.

huggingface_hub reads HF_ENDPOINT (and the Xet and telemetry switches) once, when it is first
imported, so the server is started and the environment set here, at import time of this
conftest, before any test module (or the bundler's Hub code) imports the client. The real
client then speaks real HTTP to the local server; nothing in it is patched. All of this is per
process: each pytest-xdist worker has its own server, port and HF_HOME.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest
from hubserver import HubServer, TokenInfo, client_env

from bundler.core.waiting import RETRY_WAITS, RetryWaits

WRITE_TOKEN = "hf_WriteTokenForTests0123456789abcdef"
"""The maintainer: user "leaderboard-bot", member of org "gptnt", which owns every test repo."""
READ_TOKEN = "hf_ReadTokenForTests0123456789abcdefgh"
"""A read token of user "submitter": refused every write, as on the Hub."""
OTHER_READ_TOKEN = "hf_OtherReaderForTests0123456789abcd"
SUBMITTER_TOKEN = "hf_SubmitterWriteForTests0123456789ab"
"""A write token of user "submitter", who owns no test repo: contributes by pull request."""
OTHER_SUBMITTER_TOKEN = "hf_SecondSubmitterForTests012345678"
OTHER_WRITE_TOKEN = "hf_OtherWriterForTests0123456789abcd"
"""A second maintainer ("second-bot", also in org "gptnt")."""

LAB = "submitters-lab"
"""An organization "submitter" shows on their Hub profile and "second-submitter" belongs to
without the profile listing it (TokenInfo.unlisted_orgs)."""

HUB = HubServer(
    tokens={
        WRITE_TOKEN: TokenInfo(name="leaderboard-bot", role="write", orgs=("gptnt",)),
        OTHER_WRITE_TOKEN: TokenInfo(name="second-bot", role="write", orgs=("gptnt",)),
        SUBMITTER_TOKEN: TokenInfo(name="submitter", role="write", orgs=(LAB,)),
        OTHER_SUBMITTER_TOKEN: TokenInfo(
            name="second-submitter", role="write", unlisted_orgs=(LAB,)
        ),
        READ_TOKEN: TokenInfo(name="submitter", role="read", orgs=(LAB,)),
        OTHER_READ_TOKEN: TokenInfo(name="second-submitter", role="read", unlisted_orgs=(LAB,)),
    }
).start()
HF_HOME = tempfile.mkdtemp(prefix="bundler-tests-hf-home-")
"""This process's own (each pytest-xdist worker has its server and its HF_HOME)."""
os.environ.update(client_env(HUB, hf_home=HF_HOME))


@pytest.fixture(autouse=True)
def instant_retries() -> Iterator[RetryWaits]:
    """The Hub client's retry waits, recorded but not slept, in the test process: a test that
    retries against the local server learns nothing from sleeping, and can assert the waits
    instead. A bundler run as a process of its own still waits for real."""
    RETRY_WAITS.instant = True
    RETRY_WAITS.waited.clear()
    yield RETRY_WAITS
    RETRY_WAITS.instant = False


@pytest.fixture(autouse=True)
def rate_limit_policy_of_its_own() -> Iterator[None]:
    """Each test starts with the rate-limit policy a new process has: a command run in this
    process (`--max-wait 5`, BUNDLER_MAX_WAIT=0.5) sets the policy of the client's shared
    session, which would otherwise outlive it into the next test of this worker."""
    from bundler.hub.client import ratelimit  # not at import: the client reads the env then

    yield
    ratelimit.POLICY.max_wait, ratelimit.POLICY.listener = ratelimit.DEFAULT_MAX_WAIT, None


@pytest.fixture
def plain_client() -> Iterator[None]:
    """The client as a process that never ran a bundler command has it: a command run in this
    process installs its rate-limit hook on the client's shared session, which turns a 429
    into the bundler's own refusal (tests of the server itself want the client's)."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils._http import default_client_factory

    from bundler.hub.client import ratelimit

    with ratelimit._install_lock:
        if ratelimit._installed:
            set_client_factory(default_client_factory)
            ratelimit._installed = False
    yield


@pytest.fixture(scope="session")
def hub() -> Iterator[HubServer]:
    yield HUB
    HUB.clear_faults()


@pytest.fixture
def repo_id(hub: HubServer) -> Iterator[str]:
    """A dataset repository no other test uses, created as `hf repos create` leaves one (only
    `bundler init` creates one of the bundler's: an upload never does); faults injected by the
    test are cleared after."""
    repo_id = f"gptnt/leaderboard-{uuid.uuid4().hex[:10]}"
    hub.create_repo(repo_id)
    yield repo_id
    hub.clear_faults()
    hub.disable_rate_limits()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    HUB.stop()
    shutil.rmtree(HF_HOME, ignore_errors=True)
