"""`bundler eval-results`: read the board, its benchmarks and the models' repositories, and
propose each model's results as one pull request (`bundler.hub.evalresults.plan` decides what).

Reads, in order: the leaderboard's head, task definitions and allowed signers; per task its
table and its benchmark dataset's `eval.yaml`; per entry that may be proposed, whether its
model repository exists, and its bundle (downloaded and verified, its row derived and compared
with the board's, its score computed again by the task's definition); the commits that
published the archives (one request); per model, the results files of its main branch and of
each open pull request. Only then, unless a dry run, one pull request per model with new
entries: anyone with a write token may open one on any model (hub-docs eval-results,
"Community Contributions"), and only the model's owner merges it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import CommitOperationAdd, hf_hub_url
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from bundler.core.errors import (
    GatedRepo,
    HubAccessError,
    HubError,
    RepositoryNotFound,
    RowError,
    TemporaryError,
    UnusableSetting,
    UsageError,
)
from bundler.core.progress import NoProgress, ProgressSink
from bundler.hub.audit.parts import MAX_TABLE_DECODED_BYTES, table_problem
from bundler.hub.client.access import AccessRights, require_upload
from bundler.hub.client.answers import checked_discussions, remote_entries
from bundler.hub.client.exists import model_exists
from bundler.hub.client.remote import RemoteFile
from bundler.hub.client.session import (
    MAX_SMALL_FILE_BYTES,
    REPO_ID,
    HubSession,
    status_of,
)
from bundler.hub.evalresults.benchmark import (
    EVAL_YAML,
    MAX_EVAL_YAML_BYTES,
    Benchmark,
    parse_benchmark,
    task_id_of,
)
from bundler.hub.evalresults.plan import (
    RESULTS_FOLDER,
    AlreadyHeld,
    EvalResultsReport,
    HeldFile,
    ModelProposal,
    NotProposed,
    ProposedEntry,
    ProposedFile,
    Reason,
    choose,
    file_text,
    holds,
    notes_of,
    proposal_description,
    proposal_title,
    read_held,
    results_path,
)
from bundler.hub.leaderboard.columns import validated
from bundler.hub.leaderboard.ranking import TaskScoring
from bundler.hub.leaderboard.rows import ShownRow, TaskRow, build_row
from bundler.hub.leaderboard.tables import TASK_TABLE_ROWS, task_table_rows
from bundler.hub.repo.download import fetch_bundle
from bundler.hub.repo.paths import repo_archive, repo_paths, task_table
from bundler.hub.tasks.definitions import TaskDefinition, read_definitions
from bundler.hub.tasks.signers import read_signers
from bundler.local.allowed_signers import AllowedSigners
from bundler.local.layout import TEMP_PREFIX, BundleId, LayoutError
from bundler.local.verify import read_bundle

MODEL = "model"
BOARD_JUDGED = ("rank", "ranking_score", "stale", "ci_low", "ci_high")
"""A task table's columns that are the board's judgement, not the bundle's claims: the score is
computed again from the bundle, the rest follow from the definition."""


@dataclass(frozen=True)
class EvalResultsOptions:
    repo_id: str
    revision: str = "main"
    tasks: tuple[str, ...] = ()
    """Only these tasks; none: every task the leaderboard defines."""
    model_repo: str | None = None
    setup: str | None = None
    """`model_repo` is the repository of this player setup's model (`<player>_<fp8>`), for a
    run whose model name is no repository id."""
    dry_run: bool = False
    token: str | bool | None = None


@dataclass
class _Reading:
    """What one run reads once and uses for every task: the board's session and head, its
    allowed signers, the benchmarks and model repositories looked up so far."""

    session: HubSession
    head: str
    signers: AllowedSigners | None
    token: str | bool | None
    staging: Path
    progress: ProgressSink
    benchmarks: dict[str, Benchmark | str] = field(default_factory=dict)
    models: dict[str, bool] = field(default_factory=dict)

    def model_exists(self, repo: str) -> bool:
        if repo not in self.models:
            self.models[repo] = model_exists(HubSession(repo, token=self.token))
        return self.models[repo]


def eval_results(
    options: EvalResultsOptions, progress: ProgressSink | None = None
) -> EvalResultsReport:
    """Propose the board's scores to the models' repositories (see the module docstring)."""
    named = _named_setup(options)
    session = HubSession(options.repo_id, token=options.token)
    head = session.head(options.revision)
    definitions = read_definitions(session, head)
    unknown = sorted(set(options.tasks) - set(definitions.tasks))
    if unknown:
        raise UsageError(
            f"{options.repo_id} defines no task {unknown[0]!r}",
            hint="scores are proposed for the tasks its maintainers define",
        )
    report = EvalResultsReport(
        repo_id=options.repo_id, revision=options.revision, commit=head, dry_run=options.dry_run
    )
    staging = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}eval-results-"))
    reading = _Reading(
        session, head, read_signers(session, head), options.token, staging, progress or NoProgress()
    )
    try:
        for setup, repo in named.items():
            if not reading.model_exists(repo):
                raise RepositoryNotFound(repo, doing=f"naming the model repository of {setup}")
        entries: list[ProposedEntry] = []
        for task in options.tasks or sorted(definitions.tasks):
            entries += _task_entries(reading, task, definitions.tasks[task], named, report)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    leaderboard = f"{session.api.endpoint}/datasets/{options.repo_id}"
    for repo in sorted({e.model_repo for e in entries}):
        mine = [e for e in entries if e.model_repo == repo]
        _propose(HubSession(repo, token=options.token), mine, report, options, leaderboard)
    return report


def _named_setup(options: EvalResultsOptions) -> dict[str, str]:
    """The model repository named for one player setup (none when neither is given)."""
    if (options.model_repo is None) != (options.setup is None):
        raise UsageError(
            "a model repository is named for one player setup: name both, or neither",
            hint="a setup is the bundle's folder, <player>_<fp8>",
        )
    if options.model_repo is None or options.setup is None:
        return {}
    if not REPO_ID.fullmatch(options.model_repo):
        raise UnusableSetting("model_repo", options.model_repo, "expected OWNER/NAME")
    try:
        BundleId(options.setup, "task", "unpinned")
    except LayoutError as error:
        raise UnusableSetting("setup", options.setup, str(error)) from None
    return {options.setup: options.model_repo}


def _task_entries(
    reading: _Reading,
    task: str,
    definition: TaskDefinition,
    named: dict[str, str],
    report: EvalResultsReport,
) -> list[ProposedEntry]:
    """The entries one task proposes; what it leaves out goes into `report`."""

    def skip(reason: Reason, detail: str) -> list[ProposedEntry]:
        report.not_proposed.append(NotProposed(task=task, reason=reason, detail=detail))
        return []

    rows = _board_rows(reading, task)
    if isinstance(rows, str):
        return skip("no-table" if rows == "" else "not-verified", rows or "no bundle yet")
    benchmark = _benchmark(reading, definition.hf_repo_id)
    if isinstance(benchmark, str):
        return skip("not-a-benchmark", f"{definition.hf_repo_id}: {benchmark}")
    task_id = task_id_of(benchmark, task, definition.split)
    if task_id is None:
        return skip(
            "task-not-in-benchmark",
            f"{definition.hf_repo_id}'s {EVAL_YAML} names no task {task!r}, nor one task of "
            f"split {definition.split!r}",
        )
    chosen = choose(task, rows, named)
    report.not_proposed += chosen.left_out
    verified: list[tuple[ShownRow, str, str | None]] = []
    for row, repo in chosen.entries:
        reason: Reason = "no-model-repository"
        problem: str | None = f"the Hub has no model repository {repo}"
        signer = None
        if reading.model_exists(repo):
            reason = "not-verified"
            problem, signer = _verify(reading, row, definition)
        if problem is not None:
            report.not_proposed.append(
                NotProposed(
                    task=task,
                    bundle_id=row.bundle_id,
                    model_repo=repo,
                    reason=reason,
                    detail=problem,
                )
            )
            continue
        verified.append((row, repo, signer))
    published = _publishing_commits(reading, [row.key for row, _, _ in verified])
    return [
        ProposedEntry(
            task=task,
            bundle_id=row.bundle_id,
            model_repo=repo,
            path=results_path(definition.hf_repo_id),
            dataset_id=definition.hf_repo_id,
            task_id=task_id,
            dataset_revision=str(row.resolved_revision),  # pinned: `choose` keeps no other
            value=float(row.ranking_score or 0.0),  # ranked: `choose` keeps no other
            date=row.run_date,
            source_url=hf_hub_url(
                reading.session.repo_id,
                repo_archive(row.key),
                repo_type="dataset",
                revision=published[row.key],
                endpoint=reading.session.api.endpoint,
            ),
            source_name=reading.session.repo_id,
            notes=notes_of(row.bundle_id, signer),
        )
        for row, repo, signer in verified
    ]


def _board_rows(reading: _Reading, task: str) -> list[ShownRow] | str:
    """The task's board as its table holds it; `""` when the branch holds no table of it,
    else why the table cannot be read."""
    path = task_table(task)
    listed = reading.session.paths_info([path], reading.head).get(path)
    if listed is None:
        return ""
    if listed.size > MAX_TABLE_DECODED_BYTES:
        return f"{path} is {listed.size:,} bytes, more than a task table holds"
    try:
        data = reading.session.read_file(path, reading.head, MAX_TABLE_DECODED_BYTES)
        if (refused := table_problem(data, TASK_TABLE_ROWS)) is not None:
            raise RowError(refused)
        return [validated(cells, ShownRow) for cells in task_table_rows(data).to_pylist()]
    except (TemporaryError, HubAccessError):
        raise
    except (HubError, RowError) as error:
        return f"{path}: {error}"


def _benchmark(reading: _Reading, dataset_id: str) -> Benchmark | str:
    """The benchmark dataset's eval.yaml on its main branch, or why it has none."""
    if dataset_id not in reading.benchmarks:
        dataset = HubSession(dataset_id, token=reading.token, owned=False)
        try:
            present = dataset.paths_info([EVAL_YAML], "main")
            found: Benchmark | str = (
                parse_benchmark(dataset.read_file(EVAL_YAML, "main", MAX_EVAL_YAML_BYTES))
                if EVAL_YAML in present
                else f"no {EVAL_YAML}: the Hub does not know it as a benchmark"
            )
        except GatedRepo:
            found = "gated: its eval.yaml cannot be read with this token"
        except RepositoryNotFound:
            found = "the Hub has no such dataset (or hides it)"
        reading.benchmarks[dataset_id] = found
    return reading.benchmarks[dataset_id]


def _verify(
    reading: _Reading, row: ShownRow, definition: TaskDefinition
) -> tuple[str | None, str | None]:
    """Why the board entry's bundle does not stand behind it (None: it does), and who signed
    it: downloaded, verified, its row derived and compared with the board's, its score
    computed again."""
    paths = repo_paths(row.key)
    listed = reading.session.paths_info(list(paths), reading.head)
    if paths[0] not in listed:
        return "the branch does not hold its archive", None
    try:
        archive = fetch_bundle(reading.session, row.key, reading.head, listed, reading.staging)
    except (TemporaryError, HubAccessError):
        raise
    except HubError as error:
        return f"could not be read ({error})", None
    try:
        bundle = read_bundle(archive, reading.progress)
        verification = bundle.verification()
        if not verification.ok or bundle.sidecar is None or bundle.metrics_text is None:
            return f"failed verification ({verification.describe_failures()})", None
        derived = build_row(bundle.sidecar, bundle.metrics_text, row.published_at)
    finally:
        shutil.rmtree(reading.staging, ignore_errors=True)
        reading.staging.mkdir(exist_ok=True)
    shown, claimed = (TaskRow.of(r).model_dump(exclude=set(BOARD_JUDGED)) for r in (row, derived))
    differing = sorted(name for name in shown if shown[name] != claimed[name])
    if differing:
        return f"the board's row differs from its bundle's in {', '.join(differing)}", None
    score = TaskScoring(definition).value(derived)
    if score != row.ranking_score:
        return f"the board shows the score {row.ranking_score!r}, its bundle gives {score!r}", None
    return None, _signer(reading.signers, row, verification.signer)


def _signer(signers: AllowedSigners | None, row: ShownRow, fingerprint: str | None) -> str | None:
    """Who signed: the names the leaderboard's allowed signers gave the key when the bundle
    was published (as the card names them), with the key; the key alone when they give it
    none; None: unsigned."""
    if fingerprint is None:
        return None
    names = (
        sorted(signers.principals_of(fingerprint, int(row.published.timestamp())))
        if signers is not None
        else []
    )
    return f"{', '.join(names)} ({fingerprint})" if names else fingerprint


def _publishing_commits(reading: _Reading, bundles: list[BundleId]) -> dict[BundleId, str]:
    """The commit that last changed each bundle's archive on the branch (one request per 500):
    the address of the archive at it gives those very bytes for good."""
    if not bundles:
        return {}
    entries = reading.session.entries([repo_archive(b) for b in bundles], reading.head)
    commits: dict[BundleId, str] = {}
    for bundle in bundles:
        entry = entries.get(repo_archive(bundle))
        last = entry.last_commit if isinstance(entry, RemoteFile) else None
        commits[bundle] = last.oid if last is not None else reading.head
    return commits


def _propose(
    model: HubSession,
    entries: list[ProposedEntry],
    report: EvalResultsReport,
    options: EvalResultsOptions,
    leaderboard: str,
) -> None:
    """One pull request on `model` with every entry it does not hold yet (on its main
    branch, or in an open pull request); none when it holds them all."""
    on_main = _held_files(model, "main")
    in_prs = {
        f"refs/pr/{pr.num}": _held_files(model, f"refs/pr/{pr.num}")
        for pr in model.call(
            "listing pull requests",
            lambda: checked_discussions(
                model.api.get_repo_discussions(
                    model.repo_id,
                    discussion_type="pull_request",
                    discussion_status="open",
                    repo_type=MODEL,
                )
            ),
        )
    }
    new: list[ProposedEntry] = []
    for entry in entries:
        held_in = next(
            (
                where
                for where, files in [("main", on_main), *in_prs.items()]
                if holds((f for f in files.values() if isinstance(f, HeldFile)), entry.entry())
            ),
            None,
        )
        unreadable = on_main.get(entry.path)
        if held_in is not None:
            report.already_held.append(
                AlreadyHeld(
                    bundle_id=entry.bundle_id,
                    model_repo=entry.model_repo,
                    path=entry.path,
                    held_in=held_in,
                )
            )
        elif isinstance(unreadable, str):
            report.not_proposed.append(
                NotProposed(
                    task=entry.task,
                    bundle_id=entry.bundle_id,
                    model_repo=entry.model_repo,
                    reason="unreadable-model-file",
                    detail=f"{entry.path} on its main branch is {unreadable}",
                )
            )
        else:
            new.append(entry)
    if not new:
        return
    files = []
    for path in sorted({e.path for e in new}):
        held = on_main.get(path)
        text = file_text(
            held if isinstance(held, HeldFile) else None, [e for e in new if e.path == path]
        )
        files.append(ProposedFile(path=path, text=text))
    proposal = ModelProposal(
        model_repo=model.repo_id, title=proposal_title(options.repo_id), entries=new, files=files
    )
    report.proposals.append(proposal)
    if not options.dry_run:
        _open_pull_request(model, proposal, leaderboard)


def _held_files(model: HubSession, revision: str) -> dict[str, HeldFile | str]:
    """The results files `revision` of the model repository holds, each read (or why it is
    no list of entries); none without the folder."""

    def listing() -> dict[str, RemoteFile]:
        try:
            found = remote_entries(
                lambda: model.api.list_repo_tree(
                    model.repo_id, RESULTS_FOLDER, revision=revision, repo_type=MODEL
                )
            )
        except HfHubHTTPError as error:
            if status_of(error) == 404 and not isinstance(
                error, RepositoryNotFoundError | RevisionNotFoundError
            ):
                return {}
            raise
        return {p: e for p, e in found.items() if isinstance(e, RemoteFile)}

    files: dict[str, HeldFile | str] = {}
    for path, listed in sorted(model.call(f"listing {RESULTS_FOLDER}/", listing).items()):
        if not path.endswith(".yaml"):
            continue
        if listed.size > MAX_SMALL_FILE_BYTES:
            files[path] = f"{listed.size:,} bytes, more than a results file holds"
            continue
        url = hf_hub_url(
            model.repo_id, path, repo_type=MODEL, revision=revision, endpoint=model.api.endpoint
        )
        files[path] = read_held(model.read_url(f"reading {path}", url, path, MAX_SMALL_FILE_BYTES))
    return files


def _open_pull_request(model: HubSession, proposal: ModelProposal, leaderboard: str) -> None:
    """The pull request, opened by the token's user: any write token may open one on any model
    (the Hub's community contributions); the model's owner decides."""
    require_upload(AccessRights.of(model.whoami_info(), model.repo_id), create_pr=True)
    operations = [
        CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=f.text.encode("utf-8"))
        for f in proposal.files
    ]
    try:
        info = model.api.create_commit(
            model.repo_id,
            operations,
            commit_message=proposal.title,
            commit_description=proposal_description(leaderboard, proposal.entries),
            repo_type=MODEL,
            create_pr=True,
        )
    except Exception as error:  # the client's errors, read into the bundler's
        raise model.describe(
            error, doing=f"opening a pull request on {model.repo_id}", create_pr=True
        ) from None
    proposal.pull_request = info.pr_num
    proposal.url = info.pr_url
