"""The Hub's HTTP API, as `huggingface_hub` 2.4.0 uses it, mapped onto the in-memory store.

Kept free of socket handling so each endpoint reads as "request in, response out": routing,
authentication and the Hub's error conventions (JSON `{"error": ...}` plus `X-Error-Message` and
`X-Error-Code`, which the client turns into its typed errors) live here; `server.py` only moves
bytes and injects faults. Every handler runs under the server's single lock.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlencode

from .limits import RateLimitedError
from .oidc import ExchangeRefused, TrustedPublishers
from .records import RequestKind, TokenInfo
from .store import (
    REPO_TYPES,
    Blob,
    BranchRef,
    Commit,
    Delete,
    Discussion,
    HubError,
    Operation,
    PullRequestRef,
    Put,
    Repo,
    RepoType,
    Store,
    WritableRef,
    conflicting_files,
    entry_not_found,
    gated_repo,
    hub_now,
    pull_request_diff,
    repo_not_found,
    revision_not_found,
    upload_mode,
)

try:  # PyYAML comes with `datasets`; without it the server simply omits `cardData`.
    import yaml
except ImportError:  # pragma: no cover - depends on the environment
    yaml = None

OPEN_USER = TokenInfo("local-user", "write")
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
NO_WRITE_RIGHTS = "Forbidden: you don't have the rights to write to this repo"
READ_TOKEN_REFUSED = (
    "Forbidden: this is a read token, which can only be used to provide read access;"
    " use a token with the write role"
)
"""Hub docs security-tokens: a `read` token "can only be used to provide read access": no
commit (not even to a pull request), no pull request, no discussion, no comment."""
CREATE_PR_REQUIRED = "Forbidden: pass `create_pr=1` as a query parameter to create a Pull Request"
"""What the Hub answers (403) to a direct commit or preupload by a user without write access to
the repository (hub-protocol.md "Permissions")."""
COMMIT_CONFLICT = "A commit has happened since. Please refresh and try again."
DISCUSSIONS_PER_PAGE = 50
COMMITS_PER_PAGE = 50
"""The Hub pages `/api/{t}/{id}/commits/{rev}` (hub-protocol.md "Rate limits and page sizes");
huggingface_hub's `list_repo_commits` sends no page size and just follows the `Link: <...>;
rel="next"` header (`utils.paginate`), so the client works with any page size. The Hub's size
is not documented; 50 (its discussions page size, and that of its web commit history) is used,
and a test can make it smaller."""
MAX_METADATA_BYTES = 1024 * 1024
"""Card metadata (the YAML header of README.md) above this size is refused: `validate-yaml`
answers 413 and a commit 400. The Hub has answered 413 to large metadata (hub-protocol.md
"Rate limits and page sizes") but documents no number; 1 MiB is this server's choice."""


def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


REPO_INFO_EXPAND: dict[RepoType, frozenset[str]] = {
    "dataset": _names(
        "author cardData citation createdAt description disabled downloads downloadsAllTime "
        "gated lastModified likes mainSize paperswithcode_id private resourceGroup sha "
        "siblings tags trendingScore usedStorage"
    ),
    "model": _names(
        "author baseModels cardData childrenModelCount config createdAt disabled downloads "
        "downloadsAllTime evalResults gated gguf inference inferenceProviderMapping "
        "lastModified library_name likes mask_token model-index pipeline_tag private "
        "resourceGroup safetensors sha siblings spaces tags transformersInfo trendingScore "
        "usedStorage widgetData"
    ),
    "space": _names(
        "author cardData createdAt datasets disabled lastModified likes models private region "
        "resourceGroup runtime sdk sha siblings subdomain tags trendingScore usedStorage"
    ),
}
"""What `repo_info`'s `?expand=` may name, per repository type (huggingface_hub's
`Expand{Model,Dataset,Space}Property_T`). With it the Hub answers only `_id`, `id` and those
properties (`HfApi.dataset_info` docs: "When used, only the properties in the list will be
returned"), so asking for `sha` alone does not bring every file's name along, as `siblings`
does: a response that grows with the repository. A name outside the list is refused (400), as
the Hub validates its query; `expand` with `blobs` too (the client itself refuses
`files_metadata` with `expand`). Of the properties, this server keeps the ones in
`repo_info`; it leaves the others (downloads over all time, trending score...) out."""
_URL_TYPES: dict[str, RepoType] = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX: dict[str, str] = {"model": "", "dataset": "datasets/", "space": "spaces/"}


@dataclass
class Request:
    method: str
    raw_path: str
    query: dict[str, list[str]]
    headers: Message
    body: bytes
    client: str = ""
    """The client's address (the anonymous rate-limit key)."""

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        return (self.param(name) or "").lower() in ("1", "true")

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except json.JSONDecodeError as err:
            raise HubError(400, f"Invalid JSON body: {err}") from err

    def json_object(self) -> dict[str, Any]:
        body = self.json()
        if not isinstance(body, dict):
            raise HubError(400, "Expected a JSON object body")
        return body


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_json(
        cls, payload: object, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        return cls(
            status,
            json.dumps(payload).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )

    @classmethod
    def error(cls, err: HubError) -> Response:
        headers = {"X-Error-Message": err.message}
        if err.code:
            headers["X-Error-Code"] = err.code
        if isinstance(err, RateLimitedError):
            headers.update(err.ratelimit.headers())
        return cls.of_json({"error": err.message}, err.status, headers)


Access = Literal["none", "read", "contribute", "write"]
"""`read`: anyone who may see the repo; `contribute`: a signed-in user whose token may open
discussions and pull requests, comment and upload LFS objects (`require_contributor`; the
handler decides the rest); `write`: write access to the repository (`require_repo_write`)."""
Handler = Callable[[Request, "re.Match[str]", "TokenInfo | None"], Response]

_REPO = r"(?P<ns>[^/]+)/(?P<name>[^/]+)"
_API_REPO = r"/api/(?P<t>models|datasets|spaces)/" + _REPO
_GIT_REPO = r"/(?:(?P<t>datasets|spaces)/)?" + _REPO
_RESOLVE_ROUTE = re.compile(_GIT_REPO + r"/resolve/")
_API_REPO_PREFIX = re.compile(_API_REPO + r"(?:/|$)")
_LFS_ROUTE = re.compile(_GIT_REPO + r"\.git/")


class HubApp:
    """Routes requests to handlers; `base_url` is what absolute URLs in responses start with."""

    def __init__(
        self,
        store: Store,
        tokens: dict[str, TokenInfo] | None,
        base_url: str,
        tree_page_size: int,
        commits_page_size: int = COMMITS_PER_PAGE,
        commit_quota: Callable[[Repo], None] | None = None,
        publishers: TrustedPublishers | None = None,
    ) -> None:
        self.store = store
        self.tokens = tokens
        self.publishers = publishers
        """Trusted Publishers (hubserver.oidc): `/oauth/token` and the tokens it gave."""
        self.base_url = base_url
        self.tree_page_size = tree_page_size
        self.commits_page_size = commits_page_size
        self.commit_quota = commit_quota
        """Called before every commit lands on a repo; raises a 429 HubError past the quota."""
        self._lfs_tickets: dict[str, tuple[tuple[str, str], str, int]] = {}
        self._event_ids = itertools.count(1)
        table: list[tuple[str, str, Access, Handler]] = [
            ("GET", r"/api/whoami-v2", "none", self.whoami),
            ("POST", r"/oauth/token", "none", self.oauth_token),
            ("GET", r"/api/users/(?P<user>[^/]+)/overview", "none", self.user_overview),
            ("GET", r"/api/agent-harnesses", "none", self.agent_harnesses),
            ("POST", r"/api/repos/create", "none", self.create_repo),
            ("DELETE", r"/api/repos/delete", "none", self.delete_repo),
            ("POST", r"/api/validate-yaml", "none", self.validate_yaml),
            ("GET", _API_REPO, "read", self.repo_info),
            ("GET", _API_REPO + r"/revision/(?P<rev>[^/]+)", "read", self.repo_info),
            ("GET", _API_REPO + r"/refs", "read", self.list_refs),
            ("GET", _API_REPO + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?", "read", self.tree),
            ("POST", _API_REPO + r"/paths-info/(?P<rev>[^/]+)", "read", self.paths_info),
            ("GET", _API_REPO + r"/commits/(?P<rev>[^/]+)", "read", self.list_commits),
            ("POST", _API_REPO + r"/preupload/(?P<rev>[^/]+)", "contribute", self.preupload),
            ("POST", _API_REPO + r"/commit/(?P<rev>[^/]+)", "contribute", self.commit),
            ("POST", _API_REPO + r"/branch/(?P<rev>[^/]+)", "write", self.create_branch),
            ("GET", _API_REPO + r"/discussions", "read", self.list_discussions),
            ("POST", _API_REPO + r"/discussions", "contribute", self.create_discussion),
            ("GET", _API_REPO + r"/discussions/(?P<num>\d+)", "read", self.discussion_details),
            (
                "POST",
                _API_REPO + r"/discussions/(?P<num>\d+)/(?P<action>comment|status|title|merge)",
                "contribute",
                self.change_discussion,
            ),
            (
                "POST",
                _API_REPO + r"/discussions/(?P<num>\d+)/comment/(?P<cid>[0-9a-f]+)/edit",
                "contribute",
                self.edit_comment,
            ),
            ("POST", _GIT_REPO + r"\.git/info/lfs/objects/batch", "contribute", self.lfs_batch),
            ("PUT", r"/__lfs/upload/(?P<ticket>[0-9a-f]+)", "none", self.lfs_put),
            ("POST", r"/__lfs/verify/(?P<ticket>[0-9a-f]+)", "none", self.lfs_verify),
            ("HEAD", _GIT_REPO + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "read", self.resolve),
            ("GET", _GIT_REPO + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)", "read", self.resolve),
        ]
        self._routes = [(m, re.compile(p + "$"), a, h) for m, p, a, h in table]

    # ----------------------------------------------------------------- dispatch and auth

    def handle(self, request: Request) -> Response:
        try:
            identity = self._identity(request.headers)
            for method, pattern, access, handler in self._routes:
                match = pattern.match(request.raw_path)
                if match is None or method != request.method:
                    continue
                if access != "none":
                    self._check_access(match, access, identity)
                return handler(request, match, identity)
            raise HubError(404, f"No route for {request.method} {request.raw_path}")
        except HubError as err:
            return Response.error(err)

    def _identity(self, headers: Message) -> TokenInfo | None:
        """The token's owner; an unknown token is refused on every endpoint, as on the Hub."""
        if self.tokens is None:
            return OPEN_USER
        auth = headers.get("Authorization")
        if auth is None:
            return None
        token = auth.removeprefix("Bearer ").strip()
        info = self.tokens.get(token)
        if info is None and self.publishers is not None:
            info = self.publishers.holder(token)
        if info is None:
            raise HubError(401, INVALID_CREDENTIALS)
        return info

    def knows(self, token: str) -> bool:
        """A token the Hub would accept now: a user's, or an exchanged one not yet expired."""
        if self.tokens is None or token in self.tokens:
            return True
        return self.publishers is not None and self.publishers.holder(token) is not None

    def _check_access(self, match: re.Match[str], access: Access, who: TokenInfo | None) -> None:
        repo = self.store.get(*repo_key(match))
        if repo.private and not (
            who is not None
            and (who.owns(repo.repo_id.split("/")[0]) or who.repository == repo.repo_id)
        ):
            raise repo_not_found(repo.repo_type, repo.repo_id)
        if access == "write":
            require_repo_write(who, repo.repo_id)
        elif access == "contribute":
            require_contributor(who, repo.repo_id)

    def stored_oid(self, raw_path: str) -> str | None:
        """The LFS object a storage URL (`/__lfs/upload/<ticket>`, `/__lfs/verify/<ticket>`) is
        for; None for any other path."""
        ticket = self._lfs_tickets.get(raw_path.rsplit("/", 1)[-1])
        return ticket[1] if raw_path.startswith("/__lfs/") and ticket is not None else None

    def classify(self, raw_path: str) -> tuple[RequestKind, RepoType | None, str | None]:
        """Which rate-limit bucket a request falls in, and which repository it concerns.

        Hub docs rate-limits: "resolvers" are the file URLs (`/resolve/`); everything else on
        the Hub is "api". The LFS storage PUT/verify go, on the Hub, to signed storage URLs.
        """
        if raw_path.startswith("/__lfs/"):
            ticket = self._lfs_tickets.get(raw_path.rsplit("/", 1)[-1])
            if ticket is None:
                return "storage", None, None
            (repo_type, repo_id), _, _ = ticket
            return "storage", repo_type, repo_id  # type: ignore[return-value]
        for pattern, kind in (
            (_RESOLVE_ROUTE, "file"),
            (_API_REPO_PREFIX, "api"),
            (_LFS_ROUTE, "api"),
        ):
            match = pattern.match(raw_path)
            if match is not None:
                repo_type, repo_id = repo_key(match)
                return kind, repo_type, repo_id  # type: ignore[return-value]
        return "api", None, None

    def _repo(self, match: re.Match[str]) -> Repo:
        return self.store.get(*repo_key(match))

    def repo_url(self, repo: Repo) -> str:
        return f"{self.base_url}/{_URL_PREFIX[repo.repo_type]}{repo.repo_id}"

    # ------------------------------------------------------------------------ account

    def oauth_token(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """Trusted Publishers' token exchange (RFC 8693; hubserver.oidc): the id token's
        audience must be this Hub's own address, as the client asks it to be."""
        if self.publishers is None:
            raise HubError(404, "No route for POST /oauth/token")
        try:
            answer = self.publishers.exchange(request.json(), self.base_url, self._repo_exists)
        except ExchangeRefused as refused:
            return Response.of_json(refused.body, 400)
        return Response.of_json(answer)

    def _repo_exists(self, repo_type: str, repo_id: str) -> bool:
        return (repo_type, repo_id) in self.store.repos

    def whoami(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        if who is None:
            raise HubError(401, INVALID_CREDENTIALS)
        """The token's user, its organizations and the token's role, as whoami-v2 reports
        them (hub-protocol.md "Permissions"; a fineGrained token also lists its scopes)."""
        access_token: dict[str, Any] = {"displayName": f"{who.name}-{who.role}", "role": who.role}
        if who.role == "fineGrained":
            access_token["fineGrained"] = {
                "canReadGatedRepos": False,
                "global": [],
                "scoped": [
                    {
                        "entity": {"type": entity_type(who, scope.entity), "name": scope.entity},
                        "permissions": list(scope.permissions),
                    }
                    for scope in who.scopes
                ],
            }
        orgs = [
            {"type": "org", "name": org, "fullname": org, "roleInOrg": "write"}
            for org in who.memberships
        ]
        return Response.of_json(
            {
                "type": "user",
                "id": who.name,
                "name": who.name,
                "fullname": who.name,
                "isPro": False,
                "orgs": orgs,
                "auth": {"type": "access_token", "accessToken": access_token},
            }
        )

    def user_overview(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """A user's public profile, to anyone (no token needed), as `HfApi.get_user_overview`
        reads it (huggingface_hub 2.4.0 `User`: `user`, `fullname`, `avatarUrl`, `type`,
        `isPro`, the counts, and `orgs`, each an `Organization`: `name`, `fullname`,
        `avatarUrl`). `orgs` lists only the memberships the profile shows (TokenInfo.orgs,
        never `unlisted_orgs`). A name that is no user's (an organization's too) is 404, as
        the client documents ("HTTP 404 If the user does not exist on the Hub"). A user is
        anyone holding a token here; with no tokens configured, the open user."""
        name = unquote(match["user"])
        holders = list(self.tokens.values()) if self.tokens is not None else [OPEN_USER]
        profiles = [token for token in holders if token.name == name]
        if not profiles:
            raise HubError(404, f"User {name} not found")
        orgs = sorted({org for token in profiles for org in token.orgs})
        return Response.of_json(
            {
                "_id": f"user-{name}",
                "user": name,
                "fullname": name,
                "avatarUrl": f"/avatars/{name}.svg",
                "type": "user",
                "isPro": False,
                "numModels": 0,
                "numDatasets": 0,
                "numSpaces": 0,
                "numFollowers": 0,
                "numFollowing": 0,
                "orgs": [
                    {"name": org, "fullname": org, "avatarUrl": f"/avatars/{org}.svg"}
                    for org in orgs
                ],
            }
        )

    def agent_harnesses(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        return Response.of_json({"standardEnvVars": [], "harnesses": {}})

    # -------------------------------------------------------------------------- repos

    def create_repo(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """Create a repo, only under the user's own name or one of its organizations (403
        otherwise, hub-protocol.md "Permissions"), and never with a read token."""
        who = require_user(who)
        if who.role == "read":
            raise HubError(403, READ_TOKEN_REFUSED)
        body = request.json_object()
        repo_type = body.get("type") or "model"
        if repo_type not in REPO_TYPES or not body.get("name"):
            raise HubError(400, "Invalid repo type or name")
        namespace = body.get("organization") or who.name
        repo_id = f"{namespace}/{body['name']}"
        if not has_write(who, repo_id):
            raise HubError(
                403,
                f"You don't have the rights to create a {repo_type} under the namespace"
                f' "{namespace}"',
            )
        private = body.get("private") is True or body.get("visibility") == "private"
        url = f"{self.base_url}/{_URL_PREFIX[repo_type]}{repo_id}"
        try:
            self.store.create_repo(repo_type, repo_id, private, who.name)
        except HubError as err:
            return Response.of_json({"error": err.message, "url": url}, err.status)
        return Response.of_json({"url": url, "name": repo_id, "id": repo_id})

    def delete_repo(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        who = require_user(who)
        body = request.json_object()
        repo_type = body.get("type") or "model"
        repo_id = f"{body.get('organization') or who.name}/{body.get('name')}"
        require_repo_write(who, repo_id)
        if self.store.repos.pop((repo_type, repo_id), None) is None:
            raise repo_not_found(repo_type, repo_id)
        return Response.of_json({})

    def validate_yaml(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """Validate a card's metadata as the Hub does before a README.md commit (hub-docs
        datasets-cards / model-cards): 413 when it is too large, 400 with `errors` when it does
        not parse or its known fields have the wrong shape."""
        body = request.json_object()
        content = str(body.get("content") or "")
        repo_type = str(body.get("repoType") or "model")
        header = card_header(content)
        if header is not None and len(header.encode()) > MAX_METADATA_BYTES:
            raise HubError(413, f"Metadata is too large: over {MAX_METADATA_BYTES} bytes of YAML")
        try:
            errors = metadata_errors(card_metadata(content), repo_type)
        except HubError as err:
            errors = [err.message]
        if errors:
            return Response.of_json(
                {"errors": [{"message": e} for e in errors], "warnings": []}, 400
            )
        return Response.of_json({"errors": [], "warnings": []})

    def repo_info(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        repo = self._repo(match)
        commit = repo.resolve(revision_of(match))
        blobs = request.flag("blobs")
        expand = request.query.get("expand") or request.query.get("expand[]")
        if expand and blobs:
            raise HubError(400, "expand cannot be used with blobs")
        unknown = sorted(set(expand or ()) - REPO_INFO_EXPAND[repo.repo_type])
        if unknown:
            kind = repo.repo_type
            raise HubError(400, f'"expand" must be one of the {kind} properties: {unknown}')

        def card_data() -> Any:
            readme = commit.tree.get("README.md")
            if readme is None or yaml is None:
                return None
            with contextlib.suppress(HubError):  # a broken card is served, without cardData
                return card_metadata(readme.data.decode("utf-8", "replace"))
            return None

        properties: dict[str, Callable[[], Any]] = {
            "author": lambda: repo.repo_id.split("/")[0],
            "sha": lambda: commit.oid,
            "createdAt": lambda: repo.created_at,
            "lastModified": lambda: commit.created_at,
            "private": lambda: repo.private,
            "gated": lambda: "auto" if repo.gated else False,
            "disabled": lambda: False,
            "downloads": lambda: 0,
            "likes": lambda: 0,
            "tags": lambda: [],
            "siblings": lambda: [
                blob.sibling(path, blobs) for path, blob in sorted(commit.tree.items())
            ],
            "cardData": card_data,
            "usedStorage": lambda: sum(len(b.data) for b in commit.tree.values()),
        }
        wanted = expand or [name for name in properties if name != "usedStorage" or blobs]
        info: dict[str, Any] = {"_id": repo.repo_id, "id": repo.repo_id}
        if repo.repo_type == "model":
            info["modelId"] = repo.repo_id
        for name in wanted:
            if name in properties:  # the ones this server keeps; the others it leaves out
                value = properties[name]()
                if value is not None:
                    info[name] = value
        return Response.of_json(info)

    def list_refs(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        repo = self._repo(match)
        refs: dict[str, Any] = {
            "branches": [
                {"name": n, "ref": f"refs/heads/{n}", "targetCommit": oid}
                for n, oid in sorted(repo.branches.items())
            ],
            "converts": [],
            "tags": [
                {"name": n, "ref": f"refs/tags/{n}", "targetCommit": oid}
                for n, oid in sorted(repo.tags.items())
            ],
        }
        if request.flag("include_prs"):
            refs["pullRequests"] = [
                {"name": f"refs/pr/{d.num}", "ref": f"refs/pr/{d.num}", "targetCommit": d.head_oid}
                for d in sorted(repo.discussions.values(), key=lambda d: d.num)
                if d.is_pull_request
            ]
        return Response.of_json(refs)

    def create_branch(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        repo = self._repo(match)
        branch = revision_of(match)
        body = request.json() or {}
        start = repo.resolve(str(body.get("startingPoint") or "main"))
        if branch in repo.branches:
            raise HubError(409, f"Reference already exists: refs/heads/{branch}")
        repo.branches[branch] = start.oid
        return Response.of_json({})

    # ------------------------------------------------------------------- tree listing

    def _entries(
        self, repo: Repo, commit: Commit, paths: list[str], expand: bool
    ) -> list[dict[str, Any]]:
        """`tree` entries for `paths` (files or folders), Hub-shaped; unknown paths are skipped."""
        entries = []
        for path in paths:
            blob = commit.tree.get(path)
            if blob is not None:
                entry = blob.entry(path)
            else:
                tree_oid = commit.folder_oid(path)
                if tree_oid is None:
                    continue
                entry = {"type": "directory", "oid": tree_oid, "size": 0, "path": path}
            if expand:
                last = repo.last_commit_touching(commit.oid, path)
                if last is not None:
                    entry["lastCommit"] = {
                        "id": last.oid,
                        "title": last.summary,
                        "date": last.created_at,
                    }
            entries.append(entry)
        return entries

    def tree(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        repo = self._repo(match)
        commit = repo.resolve(revision_of(match))
        folder = unquote(match.group("path") or "").strip("/")
        recursive = request.flag("recursive")
        expand = request.flag("expand")
        node = commit.tree.root.find(folder)
        if node is None:
            raise entry_not_found(folder)
        paths = sorted(node.listing(folder + "/" if folder else "", recursive))
        page_size = min(self.tree_page_size, 50) if expand else self.tree_page_size
        start = int(request.param("cursor") or 0)
        page = paths[start : start + page_size]
        headers = {}
        if start + page_size < len(paths):
            params = {"recursive": str(recursive).lower(), "expand": str(expand).lower()}
            params["cursor"] = str(start + page_size)
            headers["Link"] = f'<{self.base_url}{request.raw_path}?{urlencode(params)}>; rel="next"'
        return Response.of_json(self._entries(repo, commit, page, expand), headers=headers)

    def paths_info(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        repo = self._repo(match)
        commit = repo.resolve(revision_of(match))
        form = parse_qs(request.body.decode(), keep_blank_values=True)
        paths = [p.strip("/") for p in form.get("paths", []) if p.strip("/")]
        expand = (form.get("expand") or ["false"])[0].lower() in ("1", "true")
        return Response.of_json(self._entries(repo, commit, list(dict.fromkeys(paths)), expand))

    def list_commits(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """First-parent history, newest first, `commits_page_size` a page (`?p=N`), with a
        `Link: <...>; rel="next"` header while more remain (see COMMITS_PER_PAGE)."""
        repo = self._repo(match)
        commit = repo.resolve(revision_of(match))
        history = list(repo.history(commit.oid))
        page_num = int(request.param("p") or 0)
        start = page_num * self.commits_page_size
        page = history[start : start + self.commits_page_size]
        headers = {}
        if start + self.commits_page_size < len(history):
            params = {k: v[0] for k, v in request.query.items() if k != "p"}
            params["p"] = str(page_num + 1)
            headers["Link"] = f'<{self.base_url}{request.raw_path}?{urlencode(params)}>; rel="next"'
        return Response.of_json(
            [
                {
                    "id": c.oid,
                    "title": c.summary,
                    "message": c.description,
                    "authors": [{"user": c.author}],
                    "date": c.created_at,
                }
                for c in page
            ],
            headers=headers,
        )

    # ------------------------------------------------------------------------ commits

    def preupload(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        """Tell the client, per file, regular vs LFS (`upload_mode`: from its name and the sample
        of its content the client sends) and the remote file's current id."""
        repo = self._repo(match)
        revision = revision_of(match)
        if request.flag("create_pr"):
            require_contributor(who, repo.repo_id)
            pr_base(repo, revision)
        else:
            require_ref_write(repo, repo.writable_ref(revision), who)
        tree = repo.resolve(revision).tree
        files = request.json_object().get("files")
        if not isinstance(files, list):
            raise HubError(400, "Expected a 'files' list")
        answer = []
        for item in files:
            if not isinstance(item, dict) or not isinstance(item.get("path"), str):
                raise HubError(400, "Each file needs a 'path'")
            path, size = item["path"], int(item.get("size") or 0)
            try:
                sample = base64.b64decode(item.get("sample") or "", validate=True)
            except binascii.Error as err:
                raise HubError(400, f"Invalid base64 sample for {path}") from err
            current = tree.get(path)
            answer.append(
                {
                    "path": path,
                    "uploadMode": upload_mode(path, size, sample),
                    "shouldIgnore": False,
                    "oid": current.preupload_oid if current else None,
                }
            )
        return Response.of_json({"files": answer})

    def commit(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        """The NDJSON commit: on a branch or `refs/pr/N`, or (`?create_pr=1`) as a new PR.

        Any write token may open a PR and add commits to its own PR; a branch, or somebody
        else's PR, takes write access to the repo (hub-protocol.md "Permissions"); a read token
        commits nothing. A README.md's metadata is validated (400 `Invalid metadata in
        README.md`), the repo's commit quota applies (429, see `limits.RateLimiter`), and so do
        its limits on what the tree may hold (400 with the Hub's reason, `store.RepoLimits`)."""
        repo = self._repo(match)
        revision = revision_of(match)
        if request.flag("create_pr"):
            author = require_contributor(who, repo.repo_id).name
        else:
            author = require_ref_write(repo, repo.writable_ref(revision), who).name
        header, operations = self._parse_commit(repo, request.body)
        check_card(operations, repo.repo_type)
        check_eval_yaml(operations, repo.repo_type)
        if self.commit_quota is not None:
            self.commit_quota(repo)
        summary = str(header.get("summary") or "").strip()
        if not summary:
            raise HubError(400, "Commit summary is required")
        description = str(header.get("description") or "")
        parent = header.get("parentCommit")
        if request.flag("create_pr"):
            base = pr_base(repo, revision)
            fork = repo.find_commit(parent).oid if parent else repo.head(base)
            new_ref = f"refs/pr/{max(repo.discussions, default=0) + 1}"
            commit = self.store.make_commit(
                repo, fork, operations, summary, description, author, new_ref
            )
            pr = self._open_discussion(repo, summary, description, author, True, "open")
            pr.base_branch, pr.fork_oid, pr.head_oid = base.name, fork, commit.oid
            pr.events.append(self._event("commit", author, {"subject": summary, "oid": commit.oid}))
            extra = {"pullRequestUrl": f"{self.repo_url(repo)}/discussions/{pr.num}"}
        else:
            ref = repo.writable_ref(revision)
            head = repo.head(ref)
            if parent and not (len(parent) >= 5 and head.startswith(parent.lower())):
                raise HubError(412, COMMIT_CONFLICT)
            if isinstance(ref, PullRequestRef) and repo.discussions[ref.num].status == "merged":
                raise HubError(400, f"Pull request #{ref.num} is already merged")
            commit = self.store.make_commit(
                repo, head, operations, summary, description, author, ref_name(ref)
            )
            repo.move(ref, commit.oid)
            if isinstance(ref, PullRequestRef):
                pr = repo.discussions[ref.num]
                pr.events.append(
                    self._event("commit", author, {"subject": summary, "oid": commit.oid})
                )
                if pr.status == "draft":
                    pr.status = "open"
            extra = {}
        return Response.of_json(
            {
                "success": True,
                "commitOid": commit.oid,
                "commitUrl": f"{self.repo_url(repo)}/commit/{commit.oid}",
                "commitMessage": summary,
                "hookOutput": "",
                **extra,
            }
        )

    def _parse_commit(self, repo: Repo, body: bytes) -> tuple[dict[str, Any], list[Operation]]:
        """The NDJSON lines of a commit. An `lfsFile` names an LFS object by its sha256: one
        uploaded through the batch API, or, for a `CommitOperationCopy` of an LFS file, the
        source's own object, sent with no `size` (huggingface_hub 2.4.0
        `_commit_api._prepare_commit_payload`; huggingface/huggingface_hub#1495 copies on the
        Hub what it already stores, nothing uploaded). Either way the object must be one the
        repository holds, or the push is rejected. A copy of a regular file the client
        downloads and sends back as a `file` line (huggingface/huggingface_hub#1996)."""
        header: dict[str, Any] | None = None
        operations: list[Operation] = []
        for line in body.splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                key, value = item["key"], item["value"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise HubError(400, f"Malformed NDJSON line: {err}") from err
            if key == "header":
                header = value
                continue
            path = checked_path(value.get("path"), folder=key == "deletedFolder")
            if key == "file":
                try:
                    data = base64.b64decode(value["content"], validate=True)
                except (KeyError, binascii.Error) as err:
                    raise HubError(400, f"Invalid base64 content for {path}") from err
                if b"\0" in data[:8000]:  # git's test for binary content, as the Hub applies it
                    raise HubError(
                        400,
                        "Your push was rejected because it contains binary files. Please use"
                        " https://git-lfs.github.com/ to store binary files. Offending files:"
                        f" {path}",
                    )
                operations.append(Put(path, Blob.make(data, False)))
            elif key == "lfsFile":
                stored = repo.lfs_objects.get(str(value.get("oid")))
                if stored is None or value.get("size", len(stored)) != len(stored):
                    raise HubError(
                        400,
                        "Your push was rejected because an LFS pointer pointed to a file that does"
                        f" not exist: {path}",
                    )
                operations.append(Put(path, Blob.make(stored, True)))
            elif key in ("deletedFile", "deletedFolder"):
                operations.append(Delete(path, folder=key == "deletedFolder"))
            else:
                raise HubError(400, f"Unknown commit operation {key!r}")
        if header is None:
            raise HubError(400, "The commit payload needs a header line")
        return header, operations

    # ---------------------------------------------------------------------------- LFS

    def lfs_batch(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        """git-lfs batch API, basic transfer: objects the repo lacks get upload + verify hrefs."""
        repo = self._repo(match)
        body = request.json_object()
        if body.get("operation") != "upload":
            raise HubError(400, "Only the upload operation is supported")
        objects = []
        for obj in body.get("objects") or []:
            oid, size = obj.get("oid"), obj.get("size")
            if not (
                isinstance(oid, str)
                and re.fullmatch(r"[0-9a-f]{64}", oid)
                and isinstance(size, int)
            ):
                raise HubError(400, f"Invalid LFS object: {obj!r}")
            if oid in repo.lfs_objects:
                objects.append({"oid": oid, "size": size})
                continue
            ticket = secrets.token_hex(16)
            self._lfs_tickets[ticket] = ((repo.repo_type, repo.repo_id), oid, size)
            objects.append(
                {
                    "oid": oid,
                    "size": size,
                    "authenticated": True,
                    "actions": {
                        "upload": {"href": f"{self.base_url}/__lfs/upload/{ticket}"},
                        "verify": {"href": f"{self.base_url}/__lfs/verify/{ticket}"},
                    },
                }
            )
        return Response.of_json(
            {"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
            headers={"Content-Type": "application/vnd.git-lfs+json"},
        )

    def lfs_put(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        """The storage PUT: the unguessable ticket is the credential, as a signed URL would be."""
        key, oid, size = self._ticket(match)
        if len(request.body) != size or Blob.make(request.body, True).sha256 != oid:
            raise HubError(400, "Uploaded content does not match the announced oid/size")
        self.store.get(*key).lfs_objects[oid] = request.body
        return Response(200)

    def lfs_verify(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        require_user(who)
        key, oid, _ = self._ticket(match)
        if oid not in self.store.get(*key).lfs_objects:
            raise HubError(404, f"LFS object {oid} was never uploaded")
        return Response.of_json({"success": True})

    def _ticket(self, match: re.Match[str]) -> tuple[tuple[str, str], str, int]:
        ticket = self._lfs_tickets.get(match.group("ticket"))
        if ticket is None:
            raise HubError(404, "Unknown upload URL")
        return ticket

    # ---------------------------------------------------------------------- downloads

    def resolve(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        repo = self._repo(match)
        if repo.gated and not (who is not None and who.owns(repo.repo_id.split("/")[0])):
            raise gated_repo(repo.repo_type, repo.repo_id, signed_in=who is not None)
        commit = repo.resolve(revision_of(match))
        path = unquote(match.group("path"))
        blob = commit.tree.get(path)
        if blob is None:
            err = entry_not_found(path)
            response = Response.error(err)
            response.headers["X-Repo-Commit"] = commit.oid
            return response
        headers = {
            "X-Repo-Commit": commit.oid,
            "ETag": f'"{blob.oid}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if blob.lfs:
            headers["X-Linked-Etag"] = f'"{blob.sha256}"'
            headers["X-Linked-Size"] = str(len(blob.data))
        data = blob.data
        range_header = request.headers.get("Range")
        if range_header:
            first, last = byte_range(range_header, len(data))
            headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
            return Response(206, data[first : last + 1], headers)
        return Response(200, data, headers)

    # ---------------------------------------------------------------------- discussions

    def _event(self, kind: str, author: str, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"{next(self._event_ids):024x}",
            "type": kind,
            "createdAt": hub_now(),
            "author": {"name": author, "type": "user"},
            "data": data,
        }

    def _comment(self, author: str, text: str) -> dict[str, Any]:
        latest = {"raw": text, "html": text, "updatedAt": hub_now(), "author": {"name": author}}
        return self._event("comment", author, {"edited": False, "hidden": False, "latest": latest})

    def _open_discussion(
        self,
        repo: Repo,
        title: str,
        description: str,
        author: str,
        is_pull_request: bool,
        status: Literal["open", "draft"],
    ) -> Discussion:
        num = max(repo.discussions, default=0) + 1
        discussion = Discussion(num, title, author, hub_now(), is_pull_request, status)
        discussion.events.append(self._comment(author, description))
        repo.discussions[num] = discussion
        return discussion

    def _summary(self, repo: Repo, d: Discussion) -> dict[str, Any]:
        return {
            "num": d.num,
            "title": d.title,
            "status": d.status,
            "isPullRequest": d.is_pull_request,
            "createdAt": d.created_at,
            "author": {"name": d.author, "type": "user"},
            "repo": {"name": repo.repo_id, "type": repo.repo_type},
            "pinned": False,
            "numComments": sum(e["type"] == "comment" for e in d.events),
            "topReactions": [],
        }

    def list_discussions(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        repo = self._repo(match)
        kind, status, author = (
            request.param("type"),
            request.param("status"),
            request.param("author"),
        )
        selected = [
            d
            for d in sorted(repo.discussions.values(), key=lambda d: -d.num)
            if kind in (None, "all") or d.is_pull_request == (kind == "pull_request")
            if status in (None, "all") or (d.status in ("closed", "merged")) == (status == "closed")
            if author is None or d.author == author
        ]
        start = int(request.param("p") or 0) * DISCUSSIONS_PER_PAGE
        page = selected[start : start + DISCUSSIONS_PER_PAGE]
        return Response.of_json(
            {
                "discussions": [self._summary(repo, d) for d in page],
                "count": len(selected),
                "start": start,
            }
        )

    def create_discussion(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """A discussion, or an empty draft PR on `refs/pr/N` forked from `main`'s head; any
        write token may open one (not a read token), and its user is the author."""
        author = require_contributor(who, self._repo(match).repo_id).name
        repo = self._repo(match)
        body = request.json_object()
        title = str(body.get("title") or "").strip()
        if len(title) < 3:
            raise HubError(400, "Title is too short (3 characters minimum)")
        is_pr = bool(body.get("pullRequest"))
        status: Literal["open", "draft"] = "draft" if is_pr else "open"
        d = self._open_discussion(
            repo, title, str(body.get("description") or ""), author, is_pr, status
        )
        if is_pr:
            d.base_branch, d.fork_oid, d.head_oid = (
                "main",
                repo.branches["main"],
                repo.branches["main"],
            )
        return Response.of_json({"num": d.num, **self._summary(repo, d)})

    def _discussion(self, repo: Repo, match: re.Match[str]) -> Discussion:
        d = repo.discussions.get(int(match.group("num")))
        if d is None:
            raise HubError(404, f"Discussion #{match.group('num')} not found")
        return d

    def discussion_details(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        repo = self._repo(match)
        d = self._discussion(repo, match)
        details = {**self._summary(repo, d), "events": d.events}
        if d.is_pull_request:
            changes: dict[str, Any] = {"base": f"refs/heads/{d.base_branch}"}
            if d.merge_commit_oid:
                changes["mergeCommitId"] = d.merge_commit_oid
            details["changes"] = changes
            details["filesWithConflicts"] = (
                conflicting_files(repo, d) if d.status in ("open", "draft") else []
            )
            if request.flag("diff"):  # what huggingface_hub's get_discussion_details asks
                details["diff"] = pull_request_diff(repo, d)
        return Response.of_json(details)

    def edit_comment(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """Edit a comment (a PR's description is its first comment), as huggingface_hub's
        `HfApi.edit_discussion_comment` asks: `POST .../discussions/{num}/comment/{id}/edit`
        with `{"content": str}`, answered `{"updatedComment": <event>}`. Its author may, and
        anyone with write access to the repository, as the Hub documents for a discussion's
        title (hub-docs repositories-pull-requests-discussions: "If you opened a PR or
        discussion, are the author of the repository, or have write access to it"); its docs
        say nothing more of comments, so no one else may. A read token may not (Hub docs
        security-tokens). The content must be a string (JSON's null or a number is no text)
        and not blank, as for a new comment."""
        repo = self._repo(match)
        user = require_contributor(who, repo.repo_id)
        d = self._discussion(repo, match)
        event = next((e for e in d.events if e["id"] == match.group("cid")), None)
        if event is None or event["type"] != "comment":
            raise HubError(404, f"Comment {match.group('cid')} not found")
        if event["author"]["name"] != user.name and not has_write(user, repo.repo_id):
            raise HubError(403, "You can only edit your own comments")
        content = request.json_object().get("content")
        if not isinstance(content, str):
            raise HubError(400, "content must be a string")
        content = content.strip()
        if not content:
            raise HubError(400, "Comment cannot be empty")
        data = event["data"]
        data["edited"] = True
        data["latest"] = {**data["latest"], "raw": content, "html": content, "updatedAt": hub_now()}
        return Response.of_json({"updatedComment": event})

    def change_discussion(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """comment / status / title / merge on an existing discussion.

        Any write token may comment; a discussion's author may retitle, close and reopen it;
        anyone else needs write access to the repo for those, and everyone for a merge
        (hub-protocol.md "Permissions"). A read token does none of these."""
        repo = self._repo(match)
        user = require_contributor(who, repo.repo_id)
        author = user.name
        d = self._discussion(repo, match)
        action = match.group("action")
        if action == "merge" or (action in ("status", "title") and d.author != author):
            require_repo_write(user, repo.repo_id)
        body = request.json() or {}
        comment = str(body.get("comment") or "").strip()
        if action == "comment":
            if not comment:
                raise HubError(400, "Comment cannot be empty")
            event = self._comment(author, comment)
            d.events.append(event)
            return Response.of_json({"newMessage": event})
        if action == "title":
            title = str(body.get("title") or "").strip()
            event = self._event("title-change", author, {"from": d.title, "to": title})
            d.title = title
            d.events.append(event)
            return Response.of_json({"newTitle": event})
        if d.status == "merged":
            raise HubError(400, f"Pull request #{d.num} is already merged")
        if action == "status":
            new_status = body.get("status")
            if new_status not in ("open", "closed"):
                raise HubError(400, "Status must be 'open' or 'closed'")
            d.status = new_status
            event = self._event("status-change", author, {"status": new_status})
            d.events.append(event)
            if comment:
                d.events.append(self._comment(author, comment))
            return Response.of_json({"newStatus": event})
        if not d.is_pull_request or d.status == "closed":
            raise HubError(400, f"Discussion #{d.num} is not an open pull request")
        if self.commit_quota is not None:
            self.commit_quota(repo)
        merge = self.store.merge(repo, d, author)
        d.status, d.merge_commit_oid = "merged", merge.oid
        d.events.append(self._event("status-change", author, {"status": "merged"}))
        if comment:
            d.events.append(self._comment(author, comment))
        return Response.of_json({"mergeCommitId": merge.oid})


# -------------------------------------------------------------------------------- helpers


def require_user(who: TokenInfo | None) -> TokenInfo:
    """Anything that changes state needs someone signed in: anonymous is 401."""
    if who is None:
        raise HubError(401, "You must be authenticated to write to the Hub")
    return who


def has_write(who: TokenInfo | None, repo_id: str) -> bool:
    """Write access to `repo_id`: from ownership, not from the token's role (hub-protocol.md
    "Permissions"). The namespace must be the user's or one of its organizations', and the
    token a write token, or a fineGrained one with `repo.write` on the repo or namespace
    (this server asks a fineGrained token for ownership too: it models no collaborators)."""
    if who is not None and who.repository is not None:  # a Trusted Publisher's: one repo
        return who.repository == repo_id and who.grants("repo.write", repo_id)
    if who is None or who.role == "read" or not who.owns(repo_id.split("/")[0]):
        return False
    return who.role == "write" or who.grants("repo.write", repo_id)


def require_repo_write(
    who: TokenInfo | None, repo_id: str, refusal: str = NO_WRITE_RIGHTS
) -> TokenInfo:
    """Write access or an error: 401 anonymous, 403 a read token, 403 `refusal` otherwise."""
    user = require_user(who)
    if user.role == "read":
        raise HubError(403, READ_TOKEN_REFUSED)
    if not has_write(user, repo_id):
        raise HubError(403, refusal)
    return user


def require_contributor(who: TokenInfo | None, repo_id: str) -> TokenInfo:
    """May open discussions and pull requests, comment, upload LFS objects for a PR: any write
    token; a fineGrained one with `discussion.write` (or write access); never a read token
    (Hub docs security-tokens)."""
    user = require_user(who)
    if user.role == "read":
        raise HubError(403, READ_TOKEN_REFUSED)
    if user.role == "fineGrained" and not (
        user.grants("discussion.write", repo_id) or has_write(user, repo_id)
    ):
        raise HubError(
            403, f"Forbidden: this token has no discussion.write permission on {repo_id}"
        )
    return user


def require_ref_write(repo: Repo, ref: WritableRef, who: TokenInfo | None) -> TokenInfo:
    """A branch takes write access (without it the Hub says to pass `create_pr=1`); a PR ref
    takes write access or being the PR's author, with a token that may contribute."""
    if isinstance(ref, BranchRef):
        return require_repo_write(who, repo.repo_id, CREATE_PR_REQUIRED)
    user = require_contributor(who, repo.repo_id)
    if repo.discussions[ref.num].author == user.name or has_write(user, repo.repo_id):
        return user
    raise HubError(
        403,
        f"Forbidden: only the author of pull request #{ref.num} or the repo's owners may push"
        f" to refs/pr/{ref.num}",
    )


def entity_type(who: TokenInfo, entity: str) -> str:
    """How whoami-v2 names a fine-grained scope's entity: the user, an org, or a repo."""
    if entity == who.name:
        return "user"
    return "org" if entity in who.memberships else "repo"


def ref_name(ref: WritableRef) -> str:
    """The full name of a ref a commit goes to, as the Hub's refusals name it."""
    return f"refs/heads/{ref.name}" if isinstance(ref, BranchRef) else f"refs/pr/{ref.num}"


def pr_base(repo: Repo, revision: str) -> BranchRef:
    """The branch a new PR targets; like the Hub, anything but a branch is RevisionNotFound."""
    name = revision.removeprefix("refs/heads/")
    if name not in repo.branches:
        raise revision_not_found(revision)
    return BranchRef(name)


def repo_key(match: re.Match[str]) -> tuple[RepoType, str]:
    """(repo_type, repo_id) from a route match; URLs without a type prefix are models."""
    repo_type = _URL_TYPES[match.group("t") or "models"]
    return repo_type, f"{unquote(match.group('ns'))}/{unquote(match.group('name'))}"


def revision_of(match: re.Match[str]) -> str:
    """The revision segment, decoded after the path was split (`refs%2Fpr%2F1` → `refs/pr/1`)."""
    raw = match.groupdict().get("rev")
    return unquote(raw) if raw else "main"


def checked_path(path: object, folder: bool) -> str:
    """A repo path the Hub would accept; folders keep their trailing `/` in delete operations."""
    if not isinstance(path, str) or not path.strip("/"):
        raise HubError(400, f"Invalid path: {path!r}")
    parts = path.rstrip("/").split("/") if folder else path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise HubError(400, f"Invalid path: {path!r}")
    return path


def card_header(readme: str) -> str | None:
    """The YAML between the leading `---` lines of a card, None without a header."""
    match = re.match(r"^---\s*\n(.*?)\n---\s*(?:\n|$)", readme, re.DOTALL)
    return match.group(1) if match else None


def card_metadata(readme: str) -> dict[str, Any]:
    """The YAML header of a dataset card, as the Hub parses it into `cardData`."""
    header = card_header(readme)
    if header is None or yaml is None:
        return {}
    try:
        data = yaml.safe_load(header)
    except yaml.YAMLError as err:
        raise HubError(400, f"Invalid YAML in README.md: {err}") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise HubError(400, "README.md metadata must be a YAML mapping")
    return data


def byte_range(header: str, size: int) -> tuple[int, int]:
    """The inclusive byte range of a single-range `Range` header; 416 when unsatisfiable."""
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if match is None or match.groups() == ("", ""):
        raise HubError(416, f"Unsupported Range header: {header}")
    first_s, last_s = match.groups()
    if first_s:
        first, last = int(first_s), min(int(last_s), size - 1) if last_s else size - 1
    else:
        first, last = max(size - int(last_s), 0), size - 1
    if first >= size or first > last:
        raise HubError(416, f"Range not satisfiable: {header}")
    return first, last


# ----------------------------------------------------------------- card metadata validation

_STRING_OR_LIST_FIELDS = (
    "license",
    "tags",
    "language",
    "task_categories",
    "task_ids",
    "size_categories",
    "source_datasets",
    "annotations_creators",
    "language_creators",
    "multilinguality",
    "library_name",
    "pipeline_tag",
)
"""Card fields that hub-docs datasets-cards / model-cards show as a string or a list of
strings (huggingface_hub's `DatasetCardData` / `ModelCardData` hold them as such)."""


def _strings(value: object) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    )


def metadata_errors(data: dict[str, Any], repo_type: str) -> list[str]:
    """What the Hub's metadata validation would refuse in `data` (empty: valid).

    Modelled, and only where a source says so: the header must be a YAML mapping
    (`card_metadata`); the fields of `_STRING_OR_LIST_FIELDS` are strings or lists of strings
    and `pretty_name` a string (hub-docs datasets-cards, model-cards); for datasets, `configs`
    is a list of mappings each with a string `config_name` (unique) and `data_files` a path, a
    list of paths, or a list of `{split, path}` mappings (hub-docs datasets-manual-configuration,
    `datasets.utils.metadata.MetadataConfigs`), and `dataset_info` a mapping or a list of
    mappings with `config_name` when several, whose `features` and `splits` are lists of
    mappings named by a string `name` and whose sizes are integers (`datasets.DatasetInfo`).
    """
    errors: list[str] = []
    for key in _STRING_OR_LIST_FIELDS:
        if key in data and data[key] is not None and not _strings(data[key]):
            errors.append(f'"{key}" must be a string or a list of strings')
    if "pretty_name" in data and not isinstance(data["pretty_name"], str):
        errors.append('"pretty_name" must be a string')
    if repo_type != "dataset":
        return errors
    if "configs" in data:
        errors += _config_errors(data["configs"])
    if "dataset_info" in data:
        errors += _dataset_info_errors(data["dataset_info"])
    return errors


def _config_errors(configs: object) -> list[str]:
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        return ['"configs" must be a list of mappings']
    errors: list[str] = []
    names: list[object] = [c.get("config_name") for c in configs]
    for index, config in enumerate(configs):
        name = config.get("config_name")
        if not isinstance(name, str) or not name:
            errors.append(f'"configs[{index}].config_name" must be a non-empty string')
        if "data_files" in config and not _data_files_ok(config["data_files"]):
            errors.append(
                f'"configs[{index}].data_files" must be a path, a list of paths or a list of'
                " {split, path} mappings"
            )
        if "data_dir" in config and not isinstance(config["data_dir"], str):
            errors.append(f'"configs[{index}].data_dir" must be a string')
        if "default" in config and not isinstance(config["default"], bool):
            errors.append(f'"configs[{index}].default" must be a boolean')
    duplicates = sorted({str(n) for n in names if names.count(n) > 1})
    if duplicates:
        errors.append(f'"configs" names a config more than once: {", ".join(duplicates)}')
    return errors


def _data_files_ok(data_files: object) -> bool:
    if _strings(data_files):
        return True
    return isinstance(data_files, list) and all(
        isinstance(item, dict) and isinstance(item.get("split"), str) and _strings(item.get("path"))
        for item in data_files
    )


def _dataset_info_errors(info: object) -> list[str]:
    if isinstance(info, dict):
        return _one_info_errors(info, "dataset_info")
    if not isinstance(info, list) or not all(isinstance(i, dict) for i in info):
        return ['"dataset_info" must be a mapping or a list of mappings']
    errors: list[str] = []
    for index, item in enumerate(info):
        if len(info) > 1 and not isinstance(item.get("config_name"), str):
            errors.append(f'"dataset_info[{index}].config_name" must be a string')
        errors += _one_info_errors(item, f"dataset_info[{index}]")
    return errors


def _one_info_errors(info: dict[str, Any], where: str) -> list[str]:
    errors: list[str] = []
    for key in ("features", "splits"):
        value = info.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(
            isinstance(v, dict) and isinstance(v.get("name"), str) for v in value
        ):
            errors.append(f'"{where}.{key}" must be a list of mappings with a string "name"')
    for key in ("download_size", "dataset_size"):
        if key in info and not (isinstance(info[key], int) and not isinstance(info[key], bool)):
            errors.append(f'"{where}.{key}" must be an integer')
    return errors


def check_card(operations: list[Operation], repo_type: str) -> None:
    """A commit that writes README.md must carry valid metadata (400 `Invalid metadata in
    README.md`, hub-protocol.md "Rate limits and page sizes"), size limit included."""
    for op in operations:
        if not isinstance(op, Put) or op.path != "README.md":
            continue
        text = op.blob.data.decode("utf-8", "replace")
        header = card_header(text)
        if header is not None and len(header.encode()) > MAX_METADATA_BYTES:
            raise HubError(400, f"Invalid metadata in README.md: over {MAX_METADATA_BYTES} bytes")
        try:
            errors = metadata_errors(card_metadata(text), repo_type)
        except HubError as err:
            errors = [err.message]
        if errors:
            raise HubError(400, "Invalid metadata in README.md: " + "; ".join(errors))


def check_eval_yaml(operations: list[Operation], repo_type: str) -> None:
    """A dataset's `eval.yaml` (what makes it a benchmark) "is validated at push time"
    (hub-docs eval-results, "Registering a Benchmark"): a commit writing one that is not a
    mapping with a `name` and a non-empty list of `tasks`, each with the `id`, `config` and
    `split` the docs' example gives, is refused (400). The docs do not list the Hub's checks, so
    this asks for every field of the example, never less."""
    for op in operations:
        if repo_type != "dataset" or not isinstance(op, Put) or op.path != "eval.yaml":
            continue
        if yaml is None:  # as for card metadata: without PyYAML, nothing is validated
            return
        try:
            data = yaml.safe_load(op.blob.data.decode("utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError) as error:
            raise HubError(400, f"Invalid eval.yaml: {type(error).__name__}") from None
        tasks = data.get("tasks") if isinstance(data, dict) else None
        fields = ("id", "config", "split")
        if (
            not isinstance(data, dict)
            or not _text(data.get("name"))
            or not isinstance(tasks, list)
            or not tasks
            or not all(isinstance(t, dict) and all(_text(t.get(f)) for f in fields) for t in tasks)
        ):
            raise HubError(400, "Invalid eval.yaml: expected name and tasks [{id, config, split}]")


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())
