"""What `bundler eval-results` proposes, decided from values alone.

A board entry becomes an entry of a model's `.eval_results/<benchmark>.yaml` only when it is a
claim the leaderboard stands behind today: ranked on its task's board, on a dataset revision
the task's definition accepts (not stale), with every row of the split (complete), pinned to a
dataset commit, and the best-ranked entry of its model on that task (an entry ranked below
another of the same model is superseded there). Its bundle must verify, and give the very row
the board shows, before it is proposed (`bundler.hub.evalresults.propose`): the board's tables
are a stranger's bytes too.

Each entry is huggingface_hub's own `EvalResultEntry` (`_eval_results.py`), written with
`eval_result_entries_to_yaml`: `dataset.id` the task's benchmark dataset, `dataset.task_id`
the task as its `eval.yaml` names it, `dataset.revision` the dataset commit the run resolved,
`value` the ranking score as the board shows it, `date` the run's date, `source.url` the
bundle's archive at the commit that published it (an address that always gives those bytes),
`source.name` the leaderboard, and `notes` the bundle's id and, when signed, its signer.

An entry equal to one the model's main branch or an open pull request on it already holds is
not proposed again, so running the command again proposes nothing new. A file the model's main
branch holds keeps every entry it has, but an earlier one of this leaderboard for the same
benchmark task, which the new one replaces.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from huggingface_hub import (
    EvalResultEntry,
    eval_result_entries_to_yaml,
    parse_eval_result_entries,
)
from pydantic import Field

from bundler.core import exitcodes
from bundler.core.model import Model
from bundler.core.yamltext import UnreadableYaml, load_untrusted_yaml
from bundler.hub.client.session import REPO_ID
from bundler.hub.leaderboard.rows import ShownRow
from bundler.hub.repo.markdown import code_span

RESULTS_FOLDER = ".eval_results"
COMPLETE = "complete"

Reason = Literal[
    "no-table",
    "not-a-benchmark",
    "task-not-in-benchmark",
    "unranked",
    "stale",
    "partial",
    "unpinned",
    "no-model-repository",
    "superseded",
    "not-verified",
    "unreadable-model-file",
]
"""Why a task or an entry is not proposed. Most are the rule (module docstring); `not-verified`
(the bundle fails verification, or is not what the board shows) and `unreadable-model-file`
(the model's main branch holds a results file that is no list of entries, which a pull request
would have to overwrite) are for a person to look at."""
LOOK_REASONS: frozenset[Reason] = frozenset({"not-verified", "unreadable-model-file"})


class NotProposed(Model):
    """A task, or a board entry, that is not proposed, and why."""

    task: str
    bundle_id: str | None = None
    """None: nothing of the task is proposed."""
    model_repo: str | None = None
    reason: Reason
    detail: str


class ProposedEntry(Model):
    """One entry of a model's results file, and the board entry it comes from."""

    task: str
    bundle_id: str
    model_repo: str
    path: str
    """The model repository's file: `.eval_results/<benchmark>.yaml`."""
    dataset_id: str
    task_id: str
    dataset_revision: str
    value: float
    date: str
    source_url: str
    source_name: str
    notes: str

    def entry(self) -> EvalResultEntry:
        return EvalResultEntry(
            dataset_id=self.dataset_id,
            task_id=self.task_id,
            value=self.value,
            dataset_revision=self.dataset_revision,
            date=self.date,
            source_url=self.source_url,
            source_name=self.source_name,
            notes=self.notes,
        )


class AlreadyHeld(Model):
    """An entry the model repository already holds, on its main branch or in an open pull
    request, and is therefore not proposed again."""

    bundle_id: str
    model_repo: str
    path: str
    held_in: str
    """`main`, or the pull request's ref (`refs/pr/N`)."""


class ProposedFile(Model):
    path: str
    text: str
    """The whole file the pull request writes (YAML)."""


class ModelProposal(Model):
    """The one pull request proposed to one model repository."""

    model_repo: str
    title: str
    entries: list[ProposedEntry]
    files: list[ProposedFile]
    pull_request: int | None = None
    """The pull request's number once opened; None on a dry run."""
    url: str | None = None


class EvalResultsReport(Model):
    """What `eval-results` proposed to the models' repositories, and what it did not, why."""

    repo_id: str
    revision: str
    commit: str
    """The leaderboard's commit the board was read at."""
    dry_run: bool
    proposals: list[ModelProposal] = Field(default_factory=list)
    already_held: list[AlreadyHeld] = Field(default_factory=list)
    not_proposed: list[NotProposed] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when a person must look (a bundle that did not verify, a model's results file
        that could not be read), else 0: an entry left out by the rules is no failure."""
        look = any(item.reason in LOOK_REASONS for item in self.not_proposed)
        return exitcodes.LOOK if look else exitcodes.OK


def model_repository(row: ShownRow, named: dict[str, str]) -> str | None:
    """The model repository a board entry's run names: the one named for its player setup
    (`named`, by `<player>_<fp8>`), else its model name when that is a Hub repository id
    (`OWNER/NAME`, as `Qwen/Qwen3.5-27B`); None for a provider's model name (`gpt-5.2`)."""
    setup = row.key.player_dir
    if setup in named:
        return named[setup]
    return row.model_name if REPO_ID.fullmatch(row.model_name) else None


@dataclass
class Chosen:
    """The board entries of one task that may be proposed, each with its model repository,
    best-ranked first, and those that may not, with why."""

    entries: list[tuple[ShownRow, str]] = field(default_factory=list)
    left_out: list[NotProposed] = field(default_factory=list)


def choose(task: str, rows: Iterable[ShownRow], named: dict[str, str]) -> Chosen:
    """Which of a task's board entries may be proposed (see the module docstring)."""
    chosen = Chosen()
    best: dict[str, str] = {}
    ranked = sorted(rows, key=lambda r: (r.rank is None, r.rank or 0, r.bundle_id))
    for row in ranked:
        repo = model_repository(row, named)

        def leave(
            reason: Reason, detail: str, row: ShownRow = row, repo: str | None = repo
        ) -> None:
            chosen.left_out.append(
                NotProposed(
                    task=task,
                    bundle_id=row.bundle_id,
                    model_repo=repo,
                    reason=reason,
                    detail=detail,
                )
            )

        if repo is None:
            leave("no-model-repository", f"its model {row.model_name!r} names no repository")
        elif row.rank is None or row.ranking_score is None:
            leave("unranked", "the board gives it no rank")
        elif row.stale:
            leave("stale", "its dataset revision is no longer one its task accepts")
        elif row.coverage != COMPLETE:
            leave("partial", f"its coverage is {row.coverage}, not {COMPLETE}")
        elif row.resolved_revision is None:
            leave("unpinned", "its run resolved no dataset commit")
        elif repo in best:
            leave("superseded", f"{best[repo]} ranks higher for the same model")
        else:
            best[repo] = row.bundle_id
            chosen.entries.append((row, repo))
    return chosen


def results_path(dataset_id: str) -> str:
    """The model repository's file for a benchmark: `.eval_results/<benchmark>.yaml`, the
    benchmark dataset's name, as the Hub's own examples name them (`hle.yaml`)."""
    return f"{RESULTS_FOLDER}/{dataset_id.rpartition('/')[2]}.yaml"


def notes_of(bundle_id: str, signer: str | None) -> str:
    return f"bundle {bundle_id}" + ("" if signer is None else f", signed by {signer}")


@dataclass
class HeldFile:
    """A results file as a model repository holds it: its items as written (kept as they are
    when the file is written again), and the entry each is, where it is one."""

    items: list[Any]
    entries: list[EvalResultEntry | None]


def read_held(data: bytes) -> HeldFile | str:
    """A results file's bytes, or why they are no list of entries (one line)."""
    try:
        loaded = load_untrusted_yaml(data)
    except UnreadableYaml as error:
        return f"not YAML: {error}"
    if loaded is None:
        loaded = []
    if not isinstance(loaded, list):
        return "not a list of entries"
    entries: list[EvalResultEntry | None] = []
    for item in loaded:
        parsed: EvalResultEntry | None = None
        with contextlib.suppress(KeyError, TypeError, AttributeError, ValueError):
            parsed = parse_eval_result_entries([item])[0] if isinstance(item, dict) else None
        entries.append(parsed)
    return HeldFile(loaded, entries)


def holds(files: Iterable[HeldFile], entry: EvalResultEntry) -> bool:
    return any(entry == held for file in files for held in file.entries)


def file_text(held: HeldFile | None, new: Sequence[ProposedEntry]) -> str:
    """The results file a pull request writes: what the main branch holds (`held`), but an
    earlier entry of the same leaderboard for the same benchmark task, then the new entries."""
    replaced = {(e.dataset_id, e.task_id, e.source_name) for e in new}
    kept = (
        [
            item
            for item, entry in zip(held.items, held.entries, strict=True)
            if entry is None or (entry.dataset_id, entry.task_id, entry.source_name) not in replaced
        ]
        if held is not None
        else []
    )
    items = kept + eval_result_entries_to_yaml([e.entry() for e in new])
    return yaml.safe_dump(items, sort_keys=False, allow_unicode=True, default_flow_style=False)


def proposal_title(leaderboard: str) -> str:
    return f"Add evaluation results from the {leaderboard} leaderboard"


def proposal_description(leaderboard_url: str, entries: Sequence[ProposedEntry]) -> str:
    """The pull request's description: each result, and where its evidence is. The task's id
    is the benchmark owner's text: in code spans, as every stranger's value the bundler posts
    (bundler.hub.repo.markdown)."""
    lines = [
        f"Evaluation results from the leaderboard {leaderboard_url}, one per task, each the "
        "score its board shows for this model. Each links the verifiable submission bundle it "
        "comes from (its archive at the commit that published it).",
        "",
    ]
    lines += [
        f"- {code_span(e.dataset_id)} / {code_span(e.task_id)}: {e.value!r}, bundle "
        f"{code_span(e.bundle_id)}: {e.source_url}"
        for e in entries
    ]
    return "\n".join(lines) + "\n"
