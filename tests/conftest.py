"""Session set-up shared by every test: a local Hub-compatible server on 127.0.0.1.

huggingface_hub reads HF_ENDPOINT (and the Xet and telemetry switches) once, when it is first
imported, so the server is started and the environment set here, at import time of this
conftest, before any test module (or the bundler's Hub code) imports the client. The real
client then speaks real HTTP to the local server; nothing in it is patched.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator

import pytest
from hubserver import HubServer, TokenInfo, client_env

WRITE_TOKEN = "hf_WriteTokenForTests0123456789abcdef"
READ_TOKEN = "hf_ReadTokenForTests0123456789abcdefgh"
OTHER_WRITE_TOKEN = "hf_OtherWriterForTests0123456789abcd"
OTHER_READ_TOKEN = "hf_OtherReaderForTests0123456789abcd"
SUBMITTER_TOKEN = "hf_SubmitterWriteTokenForTests012345"
"""A submitter's write token of its own account: it may open pull requests (not commit) on
the leaderboard's repositories, owned by the organization `gptnt`."""
OTHER_SUBMITTER_TOKEN = "hf_OtherSubmitterWriteTokenForTests01"

HUB = HubServer(
    tokens={
        WRITE_TOKEN: TokenInfo(name="leaderboard-bot", role="write", orgs=("gptnt",)),
        OTHER_WRITE_TOKEN: TokenInfo(name="second-bot", role="write", orgs=("gptnt",)),
        READ_TOKEN: TokenInfo(name="submitter", role="read"),
        OTHER_READ_TOKEN: TokenInfo(name="second-submitter", role="read"),
        SUBMITTER_TOKEN: TokenInfo(name="submitter", role="write"),
        OTHER_SUBMITTER_TOKEN: TokenInfo(name="second-submitter", role="write"),
    }
).start()
os.environ.update(client_env(HUB, hf_home=tempfile.mkdtemp(prefix="bundler-tests-hf-home-")))


@pytest.fixture(scope="session")
def hub() -> Iterator[HubServer]:
    yield HUB
    HUB.clear_faults()


@pytest.fixture
def repo_id(hub: HubServer) -> Iterator[str]:
    """A repository name no other test uses; faults injected by the test are cleared after."""
    yield f"gptnt/leaderboard-{uuid.uuid4().hex[:10]}"
    hub.clear_faults()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    HUB.stop()
