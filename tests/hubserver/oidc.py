"""Trusted Publishers on the test Hub: `POST /oauth/token` exchanges a CI's OIDC id token for
a short-lived token that may write to one repository, as hub-docs `trusted-publishers.md`
describes it, and as huggingface_hub 2.4.0 (`_oidc.py`) asks for it.

What the Hub checks, and so what this server checks, never less (the docs, "API reference" and
"Security model"): the request is RFC 8693 JSON (`grant_type` token-exchange, `subject_token_type`
id_token, `subject_token`, `resource`); the id token is signed by an issuer the Hub trusts, its
`aud` is the Hub's own address, it has not expired; a publisher is registered on the
`resource` repository for that issuer, and every claim it names matches exactly (no prefix, no
pattern). Any failure is `400` with an OAuth body, `invalid_request` for a malformed request,
`invalid_grant` for everything else, and a description that never says which check failed.

The token it gives lasts `LIFETIME` seconds of the server's clock, writes to that repository
only (or only reads it, for a read-only publisher), and its pushes are attributed to the
synthetic user `OIDC_USER`. whoami-v2 describes it as a fine-grained token scoped to that
repository (the Hub's docs say nothing of whoami for it: this is the least it could say).

Id tokens here are JWTs signed with HMAC-SHA256 under a key per issuer that the test registers
(`HubServer.trust_issuer`): a real issuer signs with RSA and publishes its keys, which changes
nothing the client or the bundler sees.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .records import Scope, TokenInfo

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
"""The issuer of GitHub Actions' id tokens (hub-docs trusted-publishers.md, providers)."""
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
LIFETIME = 3600
"""Seconds an exchanged token lasts (the docs: 1 hour, no refresh token)."""
OIDC_USER = "[OIDC]"  # not a name a Hub account can have
"""Who the Hub says pushed what an exchanged token committed (the docs, "Security model")."""
REFUSED = "The provided subject token is not valid for this resource"
"""The one description of every refused grant: the Hub's never says which check failed."""
RESOURCE_PREFIXES = {"datasets/": "dataset", "spaces/": "space", "kernels/": "kernel"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint_id_token(key: bytes, claims: Mapping[str, object]) -> str:
    """An OIDC id token (a JWT) holding `claims`, signed under the issuer's `key`."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64(json.dumps(dict(claims), sort_keys=True).encode())
    signature = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


def read_id_token(token: str, keys: Mapping[str, bytes]) -> dict[str, Any] | None:
    """The claims of an id token signed by an issuer in `keys`; None for anything else (not a
    JWT, an unknown issuer, a signature that does not verify)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(_unb64(parts[1]))
        signature = _unb64(parts[2])
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(claims, dict):
        return None
    key = keys.get(str(claims.get("iss")))
    if key is None:
        return None
    expected = hmac.new(key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
    return claims if hmac.compare_digest(expected, signature) else None


def repository_of(resource: str) -> tuple[str, str] | None:
    """(repo type, repo id) a repository resource names (`datasets/ns/name`, `ns/name` for a
    model); None for a user name or anything malformed."""
    repo_type, rest = "model", resource
    for prefix, kind in RESOURCE_PREFIXES.items():
        if resource.startswith(prefix):
            repo_type, rest = kind, resource.removeprefix(prefix)
    parts = rest.split("/")
    if len(parts) != 2 or not all(parts):
        return None
    return repo_type, rest


@dataclass(frozen=True)
class Publisher:
    """A Trusted Publisher registered on a repository: the issuer, and the claims that must all
    match exactly (`repository`, `workflow`, `ref`, `sub`, ...)."""

    resource: str
    issuer: str
    claims: tuple[tuple[str, str], ...]
    read_only: bool = False

    def matches(self, claims: Mapping[str, Any]) -> bool:
        return claims.get("iss") == self.issuer and all(
            claims.get(name) == value for name, value in self.claims
        )


class ExchangeRefused(Exception):
    """A refused exchange: the status and the OAuth error body the Hub answers."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.body = {"error": error, "error_description": description}


class TrustedPublishers:
    """The issuers the Hub trusts, the publishers registered on repositories, and the tokens
    it gave (with when each expires, on the server's clock)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._lock = threading.Lock()
        self.issuers: dict[str, bytes] = {}
        self.publishers: list[Publisher] = []
        self.issued: dict[str, tuple[TokenInfo, float]] = {}

    def exchange(
        self, body: object, audience: str, repo_exists: Callable[[str, str], bool]
    ) -> dict[str, Any]:
        """The answer to one exchange (RFC 8693), or ExchangeRefused."""
        if not isinstance(body, dict):
            raise ExchangeRefused("invalid_request", "The request body must be a JSON object")
        fields = ("grant_type", "subject_token_type", "subject_token", "resource")
        if not all(isinstance(body.get(name), str) and body[name] for name in fields):
            raise ExchangeRefused("invalid_request", f"Missing parameter: one of {fields}")
        if body["grant_type"] != TOKEN_EXCHANGE or body["subject_token_type"] != ID_TOKEN_TYPE:
            raise ExchangeRefused("invalid_request", "Unsupported grant or subject token type")
        resource = body["resource"]
        repository = repository_of(resource)
        if repository is None:
            raise ExchangeRefused("invalid_request", "Invalid resource")
        with self._lock:
            claims = read_id_token(body["subject_token"], self.issuers)
            now = self._now()
            if (
                claims is None
                or claims.get("aud") != audience
                or not isinstance(claims.get("exp"), int | float)
                or claims["exp"] <= now
                or not repo_exists(*repository)
            ):
                raise ExchangeRefused("invalid_grant", REFUSED)
            publisher = next(
                (p for p in self.publishers if p.resource == resource and p.matches(claims)),
                None,
            )
            if publisher is None:
                raise ExchangeRefused("invalid_grant", REFUSED)
            token = f"hf_jwt_{secrets.token_urlsafe(32)}"
            permissions = ("repo.content.read",) if publisher.read_only else ("repo.write",)
            holder = TokenInfo(
                name=OIDC_USER,
                role="fineGrained",
                scopes=(Scope(repository[1], permissions),),
                repository=repository[1],
            )
            self.issued[token] = (holder, now + LIFETIME)
        return {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": LIFETIME,
            "issued_token_type": ACCESS_TOKEN_TYPE,
        }

    def holder(self, token: str) -> TokenInfo | None:
        """Whose an exchanged token is; None when it is not one, or has expired (then the Hub
        refuses it as any unknown token)."""
        with self._lock:
            held = self.issued.get(token)
        if held is None or held[1] <= self._now():
            return None
        return held[0]
