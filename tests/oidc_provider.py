"""A GitHub Actions OIDC endpoint for tests: what a job with `permissions: id-token: write`
reaches through `ACTIONS_ID_TOKEN_REQUEST_URL`, with `ACTIONS_ID_TOKEN_REQUEST_TOKEN` as its
bearer, and which answers `{"value": <id token>}` for the `audience` asked for (GitHub's docs,
"Requesting the JWT using environment variables"; huggingface_hub's `_get_github_oidc_token`).

Its id tokens are signed by the GitHub issuer the test Hub trusts (`HubServer.trust_issuer`),
and carry the claims of one workflow run: `repository`, `workflow`, `ref`, `sub` and the rest.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hubserver import HubServer
from hubserver.oidc import GITHUB_ISSUER, mint_id_token

WORKFLOW_CLAIMS = {
    "sub": "repo:gptnt/harness:ref:refs/heads/main",
    "repository": "gptnt/harness",
    "repository_owner": "gptnt",
    "workflow": "nightly-sync",
    "workflow_ref": "gptnt/harness/.github/workflows/nightly-sync.yml@refs/heads/main",
    "ref": "refs/heads/main",
    "event_name": "schedule",
}
"""A nightly-sync run on the harness repository's main branch, as GitHub's id token says it."""


class GitHubOidc:
    """The endpoint, on 127.0.0.1, for one job: `env()` is what the runner gives the job."""

    def __init__(self, hub: HubServer, claims: dict[str, Any] | None = None) -> None:
        self.hub = hub
        self.claims = dict(WORKFLOW_CLAIMS if claims is None else claims)
        self.request_token = f"ghs_{secrets.token_hex(16)}"
        self.requests: list[dict[str, str]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/token?api-version=2.0"
        self._key = hub.trust_issuer(GITHUB_ISSUER)

    def env(self) -> dict[str, str]:
        """What the runner gives a job with `permissions: id-token: write`."""
        return {
            "GITHUB_ACTIONS": "true",
            "ACTIONS_ID_TOKEN_REQUEST_URL": self.url,
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": self.request_token,
        }

    def _mint(self, audience: str) -> str:
        now = int(self.hub.now())
        claims = {"iss": GITHUB_ISSUER, "aud": audience, "iat": now, "exp": now + 300}
        return mint_id_token(self._key, {**claims, **self.claims})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                """Silenced: `GitHubOidc.requests` is the log."""

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                audience = (query.get("audience") or [""])[0]
                bearer = self.headers.get("Authorization", "")
                provider.requests.append({"audience": audience})
                if bearer.partition(" ")[2] != provider.request_token:
                    self._answer(401, {"message": "Bad credentials"})
                elif not audience:
                    self._answer(400, {"message": "audience is required"})
                else:
                    self._answer(200, {"value": provider._mint(audience), "count": 1})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    @contextmanager
    def serving(self) -> Iterator[GitHubOidc]:
        thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._httpd.shutdown()
            self._httpd.server_close()
            thread.join(timeout=5)
