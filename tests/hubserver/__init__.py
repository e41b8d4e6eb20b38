"""A local Hugging Face Hub look-alike for tests, driven by the real `huggingface_hub` client.

Why: the bundler's upload logic (LFS uploads, unchanged-file skipping, `parentCommit` checks,
pull requests, recovering from a lost commit response) can only be trusted if it is exercised
against the real client over real HTTP, with failures on demand. `HubServer` implements the HTTP
surface `huggingface_hub` 2.4.0 uses (see /work/shared/docs/hub-protocol.md) on 127.0.0.1 with the
standard library only, keeps git-like state the tests can inspect, and injects faults.

Pointing the client at it. `huggingface_hub` reads `HF_ENDPOINT` (and `HF_HUB_DISABLE_XET`,
`HF_HUB_DISABLE_TELEMETRY`, `HF_HOME`, ...) once, when it is first imported, so the server must be
running and the environment set BEFORE anything imports it. In a `conftest.py`, at module level
(conftest modules are imported before test modules are collected)::

    from hubserver import HubServer, client_env

    HUB = HubServer().start()
    os.environ.update(client_env(HUB, hf_home=tempfile.mkdtemp()))
    # only now may anything import huggingface_hub

and expose `HUB` through a session fixture (call `HUB.stop()` at session end). For a subprocess
(e.g. the bundler CLI) pass `env={**os.environ, **client_env(server, token)}`. When the client
may already have been imported with another endpoint, pass the endpoint explicitly instead:
`HfApi(endpoint=server.url, token=...)`, `hf_hub_download(..., endpoint=server.url)`; then also
set `huggingface_hub.constants.HF_HUB_DISABLE_XET = True` (read at call time), otherwise LFS
uploads go through Xet, which this server cannot offer.
"""

from __future__ import annotations

from .faults import LOST_RESPONSE, RACE, Fault, FaultKind
from .limits import RateLimits
from .records import CommitRecord, PullRequestRecord, RequestRecord, Scope, TokenInfo
from .server import HubServer
from .store import RepoLimits, upload_mode


def client_env(
    server: HubServer, token: str | None = None, hf_home: str | None = None
) -> dict[str, str]:
    """Environment variables that make a fresh `huggingface_hub` process use `server`.

    Xet is disabled (LFS files then take the basic LFS transfer this server implements),
    telemetry too (it would call the endpoint's agent registry), and progress bars (noise).
    `HF_TOKEN` is always set, to `token` or empty, so a token inherited from the caller's
    environment never authenticates the subprocess by accident; give `hf_home` (a temporary
    directory) so no token stored on the machine is found either, and the cache stays private.
    """
    if not server.url:
        raise RuntimeError("start() the HubServer before asking for its client environment")
    env = {
        "HF_ENDPOINT": server.url,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_TOKEN": token or "",
    }
    if hf_home is not None:
        env["HF_HOME"] = hf_home
    return env


__all__ = [
    "LOST_RESPONSE",
    "RACE",
    "CommitRecord",
    "Fault",
    "FaultKind",
    "HubServer",
    "PullRequestRecord",
    "RateLimits",
    "RepoLimits",
    "RequestRecord",
    "Scope",
    "TokenInfo",
    "client_env",
    "upload_mode",
]
