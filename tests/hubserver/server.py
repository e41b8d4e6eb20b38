"""`HubServer`: the fake Hub on 127.0.0.1, its state-inspection API and its fault injection.

The HTTP layer is `http.server.ThreadingHTTPServer` speaking HTTP/1.1 with keep-alive, because
the client (`httpx`) pools connections, and because a dropped connection (`LOST_RESPONSE`) must
look to the client exactly like a real network failure after the server acted.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from .app import HubApp, Request, Response
from .faults import Fault, FaultBook, FaultKind
from .limits import Clock, RateLimiter, RateLimits, client_key
from .oidc import GITHUB_ISSUER, Publisher, TrustedPublishers, mint_id_token
from .records import CommitRecord, PullRequestRecord, RequestKind, RequestRecord, TokenInfo
from .store import (
    Blob,
    BranchRef,
    Commit,
    HubError,
    Operation,
    PullRequestRef,
    Put,
    Repo,
    RepoLimits,
    RepoType,
    Store,
    upload_mode,
)

_RACE_TARGET_ACTIONS = ("commit", "preupload", "tree", "paths-info", "revision", "commits")


class HubServer:
    """A Hugging Face Hub look-alike that the real `huggingface_hub` client talks to unchanged.

    `tokens` maps bearer tokens to their owner and role; without it every request (even
    anonymous) acts as the write user `local-user`. `port=0` picks a free port at `start()`.
    `tree_page_size` / `commits_page_size` let a test force pagination with smaller pages
    than the Hub's (1,000 tree entries, 50 with `expand=true`; 50 commits). `now` is the clock
    the rate-limit windows follow (seconds since the epoch); `advance_clock` moves it.

    What a test uses beyond seeding and inspection: `requests()` / `request_counts()` /
    `reset_requests()` (the request log split into "api", "file" and "storage" requests),
    `enable_rate_limits()` / `disable_rate_limits()` / `reset_rate_limits()` /
    `advance_clock()`, `inject()` with `Fault.rate_limited(...)` for a one-off 429, and a
    repo's limits on what a commit may leave in it (`create_repo(limits=...)`, `set_limits()`,
    see `RepoLimits`: the Hub's by default), and Trusted Publishers (`trust_issuer`,
    `add_trusted_publisher`, `id_token`, `exchanged_tokens`; hubserver.oidc): `/oauth/token`
    exchanges a CI job's id token for a token to one repository.
    """

    def __init__(
        self,
        tokens: dict[str, TokenInfo] | None = None,
        *,
        port: int = 0,
        tree_page_size: int = 1000,
        commits_page_size: int = 50,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._tokens = dict(tokens) if tokens is not None else None
        self._port = port
        self._tree_page_size = tree_page_size
        self._commits_page_size = commits_page_size
        self._lock = threading.RLock()
        self._store = Store()
        self._faults = FaultBook()
        self._clock = Clock(now)
        self._limiter = RateLimiter(self._clock)
        self._publishers = TrustedPublishers(self._clock)
        self._races: dict[tuple[str, str], int] = {}
        """Race commits made so far per repo, so each repo's are numbered from 1."""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._app: HubApp | None = None
        self.url = ""
        self.request_log: list[RequestRecord] = []

    # ---------------------------------------------------------------------- lifecycle

    def start(self) -> HubServer:
        """Bind 127.0.0.1 and serve from a daemon thread; returns self for chaining."""
        if self._httpd is not None:
            raise RuntimeError("HubServer already started")
        httpd = _HTTPServer(("127.0.0.1", self._port), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        self._app = HubApp(
            self._store,
            self._tokens,
            self.url,
            self._tree_page_size,
            self._commits_page_size,
            commit_quota=lambda repo: self._limiter.check_commit(repo.repo_type, repo.repo_id),
            publishers=self._publishers,
        )
        self._thread = threading.Thread(target=httpd.serve_forever, name="hubserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------- seeding state

    def create_repo(
        self,
        repo_id: str,
        repo_type: RepoType = "dataset",
        private: bool = False,
        files: dict[str, bytes] | None = None,
        *,
        gated: bool = False,
        limits: RepoLimits | None = None,
    ) -> None:
        """Create a repo directly (no HTTP); `files` land in one commit after the initial one.
        A `gated` repo serves its files to its owners only (a GatedRepo error to anyone else).
        `limits`: what its commits may leave in it (default: the Hub's, see `RepoLimits`);
        the seeded files are held to them too.

        Files follow the same regular/LFS rule as uploads, so the client's unchanged-file
        detection works against seeded content too. A repository nothing has touched since it
        was created (the `repo_id` fixture's, as `bundler init` or `hf repos create` leaves
        it, less the board) is made again, so that a test seeds the one it needs.
        """
        with self._lock:
            held = self._store.repos.get((repo_type, repo_id))
            if held is not None and len(held.commits) == 1 and not held.discussions:
                del self._store.repos[(repo_type, repo_id)]
            repo = self._store.create_repo(repo_type, repo_id, private, "system")
            repo.gated = gated
            if limits is not None:
                repo.limits = limits
            if files:
                ops: list[Operation] = []
                for path, data in sorted(files.items()):
                    lfs = upload_mode(path, len(data), data[:512]) == "lfs" and len(data) > 0
                    blob = Blob.make(data, lfs)
                    if lfs:
                        repo.lfs_objects[blob.sha256] = data
                    ops.append(Put(path, blob))
                commit = self._store.make_commit(
                    repo, repo.branches["main"], ops, "Seed files", "", "system"
                )
                repo.branches["main"] = commit.oid

    def trust_issuer(self, issuer: str = GITHUB_ISSUER) -> bytes:
        """Trust an OIDC issuer (its signing key, made here): the key a test's CI signs its id
        tokens with (`mint_id_token`, `tests/oidc_provider.py`)."""
        with self._lock:
            return self._publishers.issuers.setdefault(issuer, secrets.token_bytes(32))

    def add_trusted_publisher(
        self,
        resource: str,
        claims: dict[str, str],
        *,
        issuer: str = GITHUB_ISSUER,
        read_only: bool = False,
    ) -> None:
        """Register a Trusted Publisher on `resource` (`datasets/ns/name`), as a maintainer does
        in the repository's settings: id tokens of `issuer` whose claims hold all of `claims`
        exactly may be exchanged for a token to it."""
        with self._lock:
            self._publishers.publishers.append(
                Publisher(resource, issuer, tuple(sorted(claims.items())), read_only)
            )

    def id_token(
        self, claims: dict[str, object], *, issuer: str = GITHUB_ISSUER, lifetime: float = 300
    ) -> str:
        """An id token `issuer` (trusted, `trust_issuer`) mints for a CI job with `claims`,
        for this Hub (`aud`), valid `lifetime` seconds of the server's clock."""
        now = int(self.now())
        full = {"iss": issuer, "aud": self.url, "iat": now, "exp": now + int(lifetime), **claims}
        return mint_id_token(self.trust_issuer(issuer), full)

    def now(self) -> float:
        """The server's clock (seconds since the epoch; `advance_clock` moves it)."""
        return self._clock()

    def exchanged_tokens(self) -> list[str]:
        """Every token `/oauth/token` gave, for a test to look for in output."""
        with self._lock:
            return list(self._publishers.issued)

    def seed_commits(
        self,
        repo_id: str,
        count: int,
        repo_type: RepoType = "dataset",
        *,
        branch: str = "main",
        path: str = "history.txt",
    ) -> None:
        """Add `count` commits to `branch` directly (no HTTP), each rewriting the small file
        `path`: a long history, as a busy repository has, in a second rather than an hour of
        commits through the API (which the Hub's commit rate limit would stop anyway)."""
        with self._lock:
            repo = self._store.get(repo_type, repo_id)
            for number in range(count):
                blob = Blob.make(f"commit {number}\n".encode(), False)
                commit = self._store.make_commit(
                    repo, repo.branches[branch], [Put(path, blob)], f"Commit {number}", "", "system"
                )
                repo.branches[branch] = commit.oid

    def move_pull_request_base(
        self, repo_id: str, num: int, revision: str, repo_type: RepoType = "dataset"
    ) -> None:
        """Make the Hub take PR `num`'s changes (its diff, its conflicts, its merge) from
        `revision` instead of the commit it branched from: a Hub whose account of a pull request
        is not what the PR's own commits changed, for the tests of what review does then."""
        with self._lock:
            repo, commit = self._resolve(repo_id, repo_type, revision)
            pr = repo.discussions[num]
            assert pr.is_pull_request, f"#{num} is not a pull request"
            pr.fork_oid = commit.oid

    def set_limits(self, repo_id: str, limits: RepoLimits, repo_type: RepoType = "dataset") -> None:
        """Hold the repo's next commits to `limits` (a repo the client created, say)."""
        with self._lock:
            repo = self._store.repos.get((repo_type, repo_id))
            if repo is None:
                raise LookupError(f"no {repo_type} repo {repo_id}")
            repo.limits = limits

    # --------------------------------------------------------------- state inspection

    def commits(
        self, repo_id: str, repo_type: RepoType = "dataset", revision: str = "main"
    ) -> list[CommitRecord]:
        """First-parent history of `revision`, newest first (raises LookupError if unknown)."""
        with self._lock:
            repo, commit = self._resolve(repo_id, repo_type, revision)
            return [
                CommitRecord(
                    c.oid,
                    c.parents,
                    c.summary,
                    c.description,
                    c.author,
                    c.created_at,
                    c.added,
                    c.modified,
                    c.deleted,
                )
                for c in repo.history(commit.oid)
            ]

    def file_bytes(
        self, repo_id: str, path: str, repo_type: RepoType = "dataset", revision: str = "main"
    ) -> bytes | None:
        """The file's content at `revision`, or None if absent (LookupError if repo/rev unknown)."""
        with self._lock:
            _, commit = self._resolve(repo_id, repo_type, revision)
            blob = commit.tree.get(path)
            return blob.data if blob else None

    def list_files(
        self, repo_id: str, repo_type: RepoType = "dataset", revision: str = "main"
    ) -> list[str]:
        """Sorted paths of every file at `revision` (including the Hub's `.gitattributes`)."""
        with self._lock:
            _, commit = self._resolve(repo_id, repo_type, revision)
            return sorted(commit.tree)

    def pull_requests(
        self, repo_id: str, repo_type: RepoType = "dataset"
    ) -> list[PullRequestRecord]:
        """Every PR of the repo, by number."""
        with self._lock:
            repo = self._store.repos.get((repo_type, repo_id))
            if repo is None:
                raise LookupError(f"no {repo_type} repo {repo_id}")
            return [
                PullRequestRecord(
                    num=d.num,
                    title=d.title,
                    description=d.description,
                    status=d.status,
                    author=d.author,
                    ref=f"refs/pr/{d.num}",
                    base_branch=d.base_branch or "main",
                    head_oid=d.head_oid or "",
                    merge_commit_oid=d.merge_commit_oid,
                )
                for d in sorted(repo.discussions.values(), key=lambda d: d.num)
                if d.is_pull_request
            ]

    def _resolve(self, repo_id: str, repo_type: str, revision: str) -> tuple[Repo, Commit]:
        repo = self._store.repos.get((repo_type, repo_id))
        if repo is None:
            raise LookupError(f"no {repo_type} repo {repo_id}")
        try:
            return repo, repo.resolve(revision)
        except HubError as err:
            raise LookupError(err.message) from err

    # --------------------------------------------------------------- request log

    def requests(
        self,
        repo_id: str | None = None,
        *,
        kind: RequestKind | None = None,
        repo_type: RepoType | None = None,
    ) -> list[RequestRecord]:
        """The logged requests, oldest first, optionally only those about `repo_id` (of
        `repo_type`, any type if None) and of one `kind` ("api", "file" or "storage")."""
        with self._lock:
            return [
                r
                for r in self.request_log
                if (repo_id is None or r.repo_id == repo_id)
                and (repo_type is None or r.repo_type == repo_type)
                and (kind is None or r.kind == kind)
            ]

    def lfs_uploads(self, repo_id: str) -> list[str]:
        """The sha256 of each LFS object uploaded to storage for `repo_id` (its storage PUTs
        the server took), oldest first: which files a client sent, and how often."""
        assert self._app is not None
        return [
            oid
            for r in self.requests(repo_id, kind="storage")
            if r.method == "PUT"
            and r.status == 200
            and (oid := self._app.stored_oid(r.path)) is not None
        ]

    def request_counts(
        self, repo_id: str | None = None, *, repo_type: RepoType | None = None
    ) -> dict[str, int]:
        """How many requests of each kind were logged: `{"api": n, "file": m, "storage": k}`.

        "api" counts against the Hub's api quota, "file" (resolver HEAD/GET) against its
        resolvers quota, "storage" (LFS PUT/verify) against neither (see RequestKind). With
        `repo_id`, only the requests about that repository (storage ones included)."""
        counts = Counter(r.kind for r in self.requests(repo_id, repo_type=repo_type))
        return {"api": counts["api"], "file": counts["file"], "storage": counts["storage"]}

    def response_bytes(
        self, repo_id: str | None = None, *, repo_type: RepoType | None = None
    ) -> dict[str, int]:
        """The bytes of the response bodies of each kind logged, as `request_counts` counts
        them: a request whose answer grows with the repository costs more at every size."""
        return self._bytes_by_kind(lambda record: record.size, repo_id, repo_type)

    def request_bytes(
        self, repo_id: str | None = None, *, repo_type: RepoType | None = None
    ) -> dict[str, int]:
        """The bytes of the request bodies of each kind logged (what the client sent: commit
        payloads, LFS uploads under "storage"), as `response_bytes` counts answers."""
        return self._bytes_by_kind(lambda record: record.request_size, repo_id, repo_type)

    def seconds_serving(self, repo_id: str | None = None) -> float:
        """The time the server spent answering the logged requests (about `repo_id`): what a
        client's wall time owes to this server, whose commits cost more as a repository grows
        (every commit a full snapshot), rather than to the client itself."""
        return sum(record.seconds for record in self.requests(repo_id))

    def _bytes_by_kind(
        self,
        size: Callable[[RequestRecord], int],
        repo_id: str | None,
        repo_type: RepoType | None,
    ) -> dict[str, int]:
        sizes: Counter[str] = Counter()
        for record in self.requests(repo_id, repo_type=repo_type):
            sizes[record.kind] += size(record)
        return {"api": sizes["api"], "file": sizes["file"], "storage": sizes["storage"]}

    def reset_requests(self) -> None:
        """Empty the request log (e.g. before the part of a test that measures a budget)."""
        with self._lock:
            self.request_log.clear()

    # ---------------------------------------------------------------- rate limits

    def enable_rate_limits(self, limits: RateLimits | None = None) -> None:
        """Apply the Hub's rate limits (defaults: the free-user numbers) from now on, with
        every count at zero and a window beginning now; they stay on until
        `disable_rate_limits()`."""
        self._limiter.enable(limits or RateLimits())

    def disable_rate_limits(self) -> None:
        self._limiter.disable()

    def reset_rate_limits(self) -> None:
        """Zero every rate-limit count: a new window begins now for everyone."""
        with self._lock:
            self._limiter.reset()

    def advance_clock(self, seconds: float) -> None:
        """Move the rate-limit clock forward, e.g. past the end of the current window."""
        with self._lock:
            self._clock.advance(seconds)

    def seconds_to_window_reset(self, window: int = 300) -> int:
        """What `t=` in a 429 would say now for a window of `window` seconds."""
        return self._limiter._window(window)[1]

    # ---------------------------------------------------------------- fault injection

    def inject(
        self, method: str, path_regex: str, fault: Fault, times: int = 1, *, after: int = 0
    ) -> None:
        """Arm `fault` for the next `times` requests matching `method` and `path_regex`, after
        letting `after` of them through (to hit, say, the second read of a PR's head).

        `path_regex` is searched in the raw (percent-encoded) path without the query string.
        """
        self._faults.arm(method, path_regex, fault, times, after)

    def clear_faults(self) -> None:
        self._faults.clear()

    # -------------------------------------------------------------- request handling

    def _serve(self, request: Request, query: str) -> tuple[Response, Fault | None]:
        """Run one request under the lock, applying the fault armed for it, and log it."""
        assert self._app is not None
        fault = self._faults.take(request.method, request.raw_path)
        with self._lock:
            started = time.perf_counter()
            kind, repo_type, repo_id = self._app.classify(request.raw_path)
            if fault is not None and fault.kind is FaultKind.STATUS:
                assert fault.code is not None
                response = Response.error(
                    HubError(fault.code, f"Injected fault: HTTP {fault.code}")
                )
                if fault.ratelimit is not None:
                    response.headers.update(fault.ratelimit.headers())
                if fault.retry_after is not None:
                    response.headers["Retry-After"] = str(fault.retry_after)
            elif fault is not None and fault.kind is FaultKind.BODY:
                headers = {"Content-Type": "application/json"}
                response = Response(200, fault.body or b"", headers)
            else:
                if fault is not None and fault.kind is FaultKind.RACE:
                    self._race(request)
                try:
                    self._rate_limit(request, kind)
                    response = self._app.handle(request)
                except HubError as err:
                    response = Response.error(err)
                except Exception as err:  # a server bug must reach the test as a 500, not a hang
                    response = Response.error(HubError(500, f"{type(err).__name__}: {err}"))
            # Every answer of the Hub names its request, as huggingface_hub then shows in an
            # error ("(Request ID: Root=1-...)"): a client's words must not stop at that id.
            response.headers.setdefault("X-Request-Id", f"Root=1-{secrets.token_hex(12)}")
            record = RequestRecord(
                request.method,
                request.raw_path,
                query,
                response.status,
                fault.describe() if fault else None,
                kind,
                repo_type,
                repo_id,
                0 if request.method == "HEAD" else len(response.body),
                request.headers.get("User-Agent"),
                len(request.body),
                time.perf_counter() - started,
            )
            self.request_log.append(record)
        return response, fault

    def _rate_limit(self, request: Request, kind: RequestKind) -> None:
        """Count the request against its caller's quota (429 past it, see `limits`)."""
        auth = request.headers.get("Authorization")
        token = auth.removeprefix("Bearer ").strip() if auth else None
        known = token is not None and self._app is not None and self._app.knows(token)
        key = client_key(token if known else None, request.client)
        self._limiter.check_request(kind, key, anonymous=not known)

    def _race(self, request: Request) -> None:
        """Land a commit by "someone else" on the branch (or PR ref) the request targets."""
        parts = request.raw_path.split("/")
        # /api/{t}/{ns}/{name}/{action}/{rev}
        if len(parts) < 5 or parts[1] != "api" or parts[2] not in ("models", "datasets", "spaces"):
            return
        repo_type = parts[2][:-1]
        repo = self._store.repos.get((repo_type, f"{parts[3]}/{parts[4]}"))
        if repo is None:
            return
        revision = "main"
        if len(parts) > 6 and parts[5] in _RACE_TARGET_ACTIONS:
            revision = unquote(parts[6])
        try:
            ref = repo.writable_ref(revision)
        except HubError:
            ref = BranchRef("main")
        key = (repo.repo_type, repo.repo_id)
        number = self._races[key] = self._races.get(key, 0) + 1
        blob = Blob.make(f"race {number}\n".encode(), False)
        commit = self._store.make_commit(
            repo,
            repo.head(ref),
            [Put(f".race/{number}", blob)],
            f"Concurrent commit {number}",
            "",
            "someone-else",
        )
        repo.move(ref, commit.oid)
        if isinstance(ref, PullRequestRef) and self._app is not None:  # as any push to a PR
            event = {"subject": commit.summary, "oid": commit.oid}
            repo.discussions[ref.num].events.append(
                self._app._event("commit", commit.author, event)
            )


class _HTTPServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        """What socketserver prints about a request that failed (a client that gave up), on
        the process's own stderr: `sys.stderr` may be a command's, run in the tests' process
        (helpers.run_cli), and this is the server's output, not the command's."""
        print(f"hubserver: error serving {client_address}", file=sys.__stderr__)
        traceback.print_exc(file=sys.__stderr__)


def _make_handler(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """Moves bytes between the socket and `HubServer._serve`; no logic of its own."""

        protocol_version = "HTTP/1.1"
        server_version = "hubserver/1"
        disable_nagle_algorithm = True
        """TCP_NODELAY, as production HTTP servers set it: a response goes out as two writes
        (headers, then body), and with Nagle's algorithm the body waited for the client's
        delayed ACK, 40 ms a request, which made every client look slow."""

        def log_message(self, format: str, *args: object) -> None:
            """Silenced: the request log is `HubServer.request_log`."""

        def _read_body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _handle(self) -> None:
            split = urlsplit(self.path)
            request = Request(
                method=self.command,
                raw_path=split.path,
                query=parse_qs(split.query, keep_blank_values=True),
                headers=self.headers,
                body=self._read_body(),
                client=self.client_address[0],
            )
            response, fault = hub._serve(request, split.query)
            if fault is not None and fault.kind is FaultKind.LOST_RESPONSE:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)

        do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _handle

    return Handler
