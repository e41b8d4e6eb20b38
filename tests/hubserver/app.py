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

from .records import TokenInfo
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
    hub_now,
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
NO_WRITE_RIGHTS = "You don't have the rights to write to this repo"
COMMIT_CONFLICT = "A commit has happened since. Please refresh and try again."
DISCUSSIONS_PER_PAGE = 50
_URL_TYPES: dict[str, RepoType] = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX: dict[str, str] = {"model": "", "dataset": "datasets/", "space": "spaces/"}


@dataclass
class Request:
    method: str
    raw_path: str
    query: dict[str, list[str]]
    headers: Message
    body: bytes

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
        return cls.of_json({"error": err.message}, err.status, headers)


Access = Literal["none", "read", "contribute", "write"]
"""`read`: anyone who may see the repo; `contribute`: any authenticated user (opening
discussions and PRs, commenting, uploading LFS objects; the handler decides the rest);
`write`: a write token."""
Handler = Callable[[Request, "re.Match[str]", "TokenInfo | None"], Response]

_REPO = r"(?P<ns>[^/]+)/(?P<name>[^/]+)"
_API_REPO = r"/api/(?P<t>models|datasets|spaces)/" + _REPO
_GIT_REPO = r"/(?:(?P<t>datasets|spaces)/)?" + _REPO


class HubApp:
    """Routes requests to handlers; `base_url` is what absolute URLs in responses start with."""

    def __init__(
        self, store: Store, tokens: dict[str, TokenInfo] | None, base_url: str, tree_page_size: int
    ) -> None:
        self.store = store
        self.tokens = tokens
        self.base_url = base_url
        self.tree_page_size = tree_page_size
        self._lfs_tickets: dict[str, tuple[tuple[str, str], str, int]] = {}
        self._event_ids = itertools.count(1)
        table: list[tuple[str, str, Access, Handler]] = [
            ("GET", r"/api/whoami-v2", "none", self.whoami),
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
        if info is None:
            raise HubError(401, INVALID_CREDENTIALS)
        return info

    def _check_access(self, match: re.Match[str], access: Access, who: TokenInfo | None) -> None:
        if access == "write":
            require_write(who)
        elif access == "contribute":
            require_user(who)
        repo = self.store.get(*repo_key(match))
        if repo.private and who is None:
            raise repo_not_found(repo.repo_type, repo.repo_id)

    def _repo(self, match: re.Match[str]) -> Repo:
        return self.store.get(*repo_key(match))

    def repo_url(self, repo: Repo) -> str:
        return f"{self.base_url}/{_URL_PREFIX[repo.repo_type]}{repo.repo_id}"

    # ------------------------------------------------------------------------ account

    def whoami(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        if who is None:
            raise HubError(401, INVALID_CREDENTIALS)
        access_token = {"displayName": f"{who.name}-{who.role}", "role": who.role}
        orgs = [
            {"type": "org", "name": org, "fullname": org, "roleInOrg": "write"} for org in who.orgs
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

    def agent_harnesses(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        return Response.of_json({"standardEnvVars": [], "harnesses": {}})

    # -------------------------------------------------------------------------- repos

    def create_repo(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        who = require_write(who)
        body = request.json_object()
        repo_type = body.get("type") or "model"
        if repo_type not in REPO_TYPES or not body.get("name"):
            raise HubError(400, "Invalid repo type or name")
        repo_id = f"{body.get('organization') or who.name}/{body['name']}"
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
        who = require_write(who)
        body = request.json_object()
        repo_type = body.get("type") or "model"
        repo_id = f"{body.get('organization') or who.name}/{body.get('name')}"
        if self.store.repos.pop((repo_type, repo_id), None) is None:
            raise repo_not_found(repo_type, repo_id)
        return Response.of_json({})

    def validate_yaml(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        content = request.json_object().get("content") or ""
        try:
            card_metadata(content)
        except HubError as err:
            return Response.of_json({"errors": [{"message": err.message}], "warnings": []}, 400)
        return Response.of_json({"errors": [], "warnings": []})

    def repo_info(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        repo = self._repo(match)
        commit = repo.resolve(revision_of(match))
        blobs = request.flag("blobs")
        info: dict[str, Any] = {
            "_id": repo.repo_id,
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": commit.oid,
            "createdAt": repo.created_at,
            "lastModified": commit.created_at,
            "private": repo.private,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": [blob.sibling(path, blobs) for path, blob in sorted(commit.tree.items())],
        }
        if repo.repo_type == "model":
            info["modelId"] = repo.repo_id
        readme = commit.tree.get("README.md")
        if readme is not None and yaml is not None:
            # the Hub serves a repo whose card is broken, just without cardData
            with contextlib.suppress(HubError):
                info["cardData"] = card_metadata(readme.data.decode("utf-8", "replace"))
        if blobs:
            info["usedStorage"] = sum(len(b.data) for b in commit.tree.values())
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
                prefix = path + "/"
                children = sorted(
                    (p, b.oid) for p, b in commit.tree.items() if p.startswith(prefix)
                )
                if not children:
                    continue
                tree_oid = Blob.make(repr(children).encode(), False).oid
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
        prefix = folder + "/" if folder else ""
        files = [p for p in commit.tree if p.startswith(prefix)]
        if folder and not files:
            raise entry_not_found(folder)
        listed: set[str] = set()
        for path in files:
            parts = path[len(prefix) :].split("/")
            depth = len(parts) if recursive else 1
            for i in range(1, depth + 1):
                listed.add(prefix + "/".join(parts[:i]))
        paths = sorted(listed)
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
        repo = self._repo(match)
        commit = repo.resolve(revision_of(match))
        return Response.of_json(
            [
                {
                    "id": c.oid,
                    "title": c.summary,
                    "message": c.description,
                    "authors": [{"user": c.author}],
                    "date": c.created_at,
                }
                for c in repo.history(commit.oid)
            ]
        )

    # ------------------------------------------------------------------------ commits

    def preupload(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        """Tell the client, per file, regular vs LFS and the remote file's current id."""
        repo = self._repo(match)
        revision = revision_of(match)
        if request.flag("create_pr"):
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
            current = tree.get(path)
            answer.append(
                {
                    "path": path,
                    "uploadMode": upload_mode(path, size),
                    "shouldIgnore": False,
                    "oid": current.preupload_oid if current else None,
                }
            )
        return Response.of_json({"files": answer})

    def commit(self, request: Request, match: re.Match[str], who: TokenInfo | None) -> Response:
        """The NDJSON commit: on a branch or `refs/pr/N`, or (`?create_pr=1`) as a new PR.

        Anyone signed in may open a PR and add commits to their own; a branch, or somebody
        else's PR, takes a write token."""
        author = require_user(who).name
        repo = self._repo(match)
        revision = revision_of(match)
        header, operations = self._parse_commit(repo, request.body)
        summary = str(header.get("summary") or "").strip()
        if not summary:
            raise HubError(400, "Commit summary is required")
        description = str(header.get("description") or "")
        parent = header.get("parentCommit")
        if request.flag("create_pr"):
            base = pr_base(repo, revision)
            fork = repo.find_commit(parent).oid if parent else repo.head(base)
            commit = self.store.make_commit(repo, fork, operations, summary, description, author)
            pr = self._open_discussion(repo, summary, description, author, True, "open")
            pr.base_branch, pr.fork_oid, pr.head_oid = base.name, fork, commit.oid
            pr.events.append(self._event("commit", author, {"subject": summary, "oid": commit.oid}))
            extra = {"pullRequestUrl": f"{self.repo_url(repo)}/discussions/{pr.num}"}
        else:
            ref = repo.writable_ref(revision)
            require_ref_write(repo, ref, who)
            head = repo.head(ref)
            if parent and not (len(parent) >= 5 and head.startswith(parent.lower())):
                raise HubError(412, COMMIT_CONFLICT)
            if isinstance(ref, PullRequestRef) and repo.discussions[ref.num].status == "merged":
                raise HubError(400, f"Pull request #{ref.num} is already merged")
            commit = self.store.make_commit(repo, head, operations, summary, description, author)
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
        signed-in user may open one (read tokens too), and is its author."""
        author = require_user(who).name
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
        return Response.of_json(details)

    def edit_comment(
        self, request: Request, match: re.Match[str], who: TokenInfo | None
    ) -> Response:
        """Edit a comment (a PR's description is its first comment); only its author may."""
        author = require_write(who).name
        d = self._discussion(self._repo(match), match)
        event = next((e for e in d.events if e["id"] == match.group("cid")), None)
        if event is None or event["type"] != "comment":
            raise HubError(404, f"Comment {match.group('cid')} not found")
        if event["author"]["name"] != author:
            raise HubError(403, "You can only edit your own comments")
        content = str(request.json_object().get("content") or "").strip()
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

        Anyone signed in may comment; the author (or a write token) may retitle; only a write
        token may close, reopen or merge, as with the Hub's read tokens."""
        user = require_user(who)
        author = user.name
        repo = self._repo(match)
        d = self._discussion(repo, match)
        action = match.group("action")
        if action in ("status", "merge") or (action == "title" and d.author != author):
            require_write(user)
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


def require_write(who: TokenInfo | None) -> TokenInfo:
    """Anonymous writes are 401 and read tokens 403, as on the Hub."""
    who = require_user(who)
    if who.role != "write":
        raise HubError(403, NO_WRITE_RIGHTS)
    return who


def require_ref_write(repo: Repo, ref: WritableRef, who: TokenInfo | None) -> TokenInfo:
    """A branch takes a write token; a PR ref also takes its own author's (read) token."""
    user = require_user(who)
    if isinstance(ref, PullRequestRef) and repo.discussions[ref.num].author == user.name:
        return user
    return require_write(user)


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


def card_metadata(readme: str) -> dict[str, Any]:
    """The YAML header of a dataset card, as the Hub parses it into `cardData`."""
    match = re.match(r"^---\s*\n(.*?)\n---\s*(?:\n|$)", readme, re.DOTALL)
    if match is None or yaml is None:
        return {}
    try:
        data = yaml.safe_load(match.group(1))
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
