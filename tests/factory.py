"""Builds realistic statics output trees on disk, the way the GPTNT harness writes them.

Tests describe a run by what matters to them (task, model, revision, rows, faults) and get real
files: run_meta.json with capabilities and provenance, one prediction file per row with usage,
long thoughts, some errors and exceptions, and a task-specific metrics.json.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.hub.leaderboard.rows import TableRow
from bundler.local.metrics import flatten_metrics

DEFAULT_SHA = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"


def capabilities(player_name: str, **extra: Any) -> dict[str, Any]:
    return {
        "player_name": player_name,
        "player_type": "ai",
        "provider": "openrouter",
        "reasoning_effort": "high",
        "vision": True,
        "max_output_tokens": 32768,
        "usage_limits": {"max_cost_usd": 25.0},
        **extra,
    }


@dataclass
class RunSpec:
    task: str = "expert-vqa"
    model: str = "gpt-5.2"
    player_name: str | None = None
    rows: int = 5
    resolved_revision: str | None = DEFAULT_SHA
    requested_revision: str | None = "v1.0"
    hf_repo_id: str = "GPTNT/expert-VQA"
    dataset_split: str | None = "test"
    run_date: str = "2026-06-15T10:42:22.045588909Z"
    gptnt_version: str = "1.4.2"
    git_sha: str | None = "0123456789abcdef0123456789abcdef01234567"
    thoughts_chars: int = 400
    scored_output: bool = True
    extra_capabilities: dict[str, Any] = field(default_factory=dict)
    exact_capabilities: dict[str, Any] | None = None
    """The capabilities object exactly as written, instead of the default one (and extras)."""
    extra_provenance: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] | None = None
    seed: int = 7
    directory: str | None = None
    """Model directory below <task>_predictions/; defaults to the model name (may hold '/')."""
    indices: list[int] | None = None
    """Rows actually written (to make gaps); defaults to 0..rows-1."""

    def written_indices(self) -> list[int]:
        return list(range(self.rows)) if self.indices is None else list(self.indices)

    def run_meta(self) -> dict[str, Any]:
        return {
            "model_name": self.model,
            "run_date": self.run_date,
            "statics": {
                "task_name": self.task,
                "hf_repo_id": self.hf_repo_id,
                "dataset_split": self.dataset_split,
                "requested_revision": self.requested_revision,
                "resolved_revision": self.resolved_revision,
            },
            "capabilities": self.exact_capabilities
            or capabilities(self.player_name or self.model, **self.extra_capabilities),
            "provenance": {
                "gptnt_version": self.gptnt_version,
                "git_sha": self.git_sha,
                **self.extra_provenance,
            },
        }

    def prediction(self, index: int, rng: random.Random) -> dict[str, Any]:
        failed = index % 7 == 3
        crashed = index % 11 == 5
        words = ["wire", "cut", "red", "blue", "module", "serial", "strike", "button"]
        thoughts = " ".join(rng.choice(words) for _ in range(self.thoughts_chars // 5))
        usage = {"input_tokens": 1200 + index, "output_tokens": 300 + index % 50}
        if index % 2:
            usage["reasoning_tokens"] = 150
        record: dict[str, Any] = {
            "index": index,
            "usage": usage,
            "model": self.model,
            "output": f"answer {index}",
            "thoughts": thoughts,
            "raw_output": f"<answer>answer {index}</answer>",
            "error": "unparseable answer; recovered" if failed else None,
            "exception": {"type": "TimeoutError", "trace": ["a.py:1"]} if crashed else None,
        }
        if self.scored_output:
            record["scored_output"] = f"ANSWER {index}"
        return record

    def default_metrics(self) -> dict[str, Any]:
        return {
            "exact_match": {"accuracy": 0.62, "n": self.rows},
            f"{self.task}_scorer": {"score": 41.5, "per_module": {"wires": 0.9, "maze": 0.3}},
        }


def write_run(root: Path, spec: RunSpec) -> Path:
    """Write one run under `root` and return its directory."""
    run_dir = root / f"{spec.task}_predictions" / (spec.directory or spec.model)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run_meta.json").write_text(json.dumps(spec.run_meta(), indent=2))
    rng = random.Random(spec.seed)
    for index in spec.written_indices():
        (run_dir / f"prediction_{index}.json").write_text(json.dumps(spec.prediction(index, rng)))
    metrics = spec.metrics if spec.metrics is not None else spec.default_metrics()
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return run_dir


def write_how_do_you(root: Path, model: str = "gpt-5.2") -> Path:
    path = root / "how_do_you" / f"{model}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"answer": "carefully"}))
    return path


def write_tree(root: Path, specs: list[RunSpec], *, how_do_you: bool = True) -> list[Path]:
    if how_do_you:
        write_how_do_you(root)
    return [write_run(root, spec) for spec in specs]


SAMPLE_SPECS = [
    RunSpec(model="Qwen/Qwen3.5-27B", rows=4, thoughts_chars=120, seed=1),
    RunSpec(model="gpt-5.2", rows=4, thoughts_chars=120, seed=2),
    RunSpec(
        task="maze-solve",
        model="gpt-5.2",
        rows=3,
        thoughts_chars=120,
        resolved_revision=None,
        requested_revision="main",
        hf_repo_id="GPTNT/maze-solve",
        git_sha="0123456789abcdef0123456789abcdef01234567-dirty",
        seed=3,
    ),
]
"""The runs in tests/sample_output (README quick start): a nested model name, a plain one, and
an unpinned run from a dirty harness tree. Collect it with --expect expert-vqa=4 and
--expect maze-solve=3."""


def write_sample_output(root: Path) -> list[Path]:
    """Regenerate tests/sample_output: `python -c "from factory import *;
    write_sample_output(Path('tests/sample_output'))"` from tests/."""
    return write_tree(root, SAMPLE_SPECS)


def gptnt_capabilities(player_name: str, **changes: Any) -> dict[str, Any]:
    """Capabilities as GPTNT's own harness records them: exactly its PlayerCapabilities fields,
    in its order, with the pydantic-ai usage limits spelled out (see bundler/export.py)."""
    return {
        "player_name": player_name,
        "player_type": "ai",
        "thinking_method": "thinking-out-loud",
        "structured_output_mode": None,
        "include_schema_in_instructions": True,
        "max_observations_per_request": 16,
        "usage_limits": {
            "request_limit": 50,
            "tool_calls_limit": None,
            "input_tokens_limit": 400000,
            "output_tokens_limit": 128000,
            "total_tokens_limit": None,
            "count_tokens_before_request": False,
        },
        "image_dimensions": {"width": 1280, "height": 720},
        "tokens_per_image": 383,
        "interaction_location_method": "set-of-marks",
        "coordinate_mode": "absolute",
        "preserve_last_frame_for_n_turns": 0,
        "enable_nobf_generation": True,
        **changes,
    }


def make_row(
    player: str = "gpt",
    task: str = "expert-vqa",
    label: str = "a1b2c3d4",
    metrics: dict[str, Any] | None = None,
    published_at: str = "2026-06-16T08:00:00Z",
    **fields: Any,
) -> TableRow:
    """A table row as the bundler builds it, without a bundle behind it (for card and table
    tests): `player` is the player slug, `label` the revision label, `fields` override the rest
    (`sidecar_blob_id` too)."""
    metrics = {"exact_match": {"accuracy": 0.5}} if metrics is None else metrics
    pinned = label != "unpinned"
    values: dict[str, Any] = {
        "bundle_id": f"{player}_1054f537/{task}@{label}",
        "task_name": task,
        "target": f"{task}@{label}",
        "model_name": player,
        "player_name": player,
        "player_type": "ai",
        "capability_fingerprint": "1054f537" * 4,
        "hf_repo_id": "GPTNT/expert-VQA",
        "dataset_split": "test",
        "requested_revision": "v1.0",
        "resolved_revision": DEFAULT_SHA if pinned else None,
        "is_pinned": pinned,
        "run_date": "2026-06-15T10:42:22.045588909Z",
        "published_at": published_at,
        "coverage": "complete",
        "expected_rows": 5,
        "rows_present": 5,
        "predictions": 5,
        "errors": 1,
        "exceptions": 0,
        "input_tokens": 6000,
        "output_tokens": 1500,
        "requests": 0,
        "usage": [{"key": "input_tokens", "count": 6000}, {"key": "output_tokens", "count": 1500}],
        "submitter_name": "Ada",
        "submitter_affiliation": None,
        "signer_fingerprint": None,
        "gptnt_version": "1.4.2",
        "harness_git_sha": None,
        "bundler_version": "0.1.0",
        "archive_sha256": "0" * 64,
        "archive_size": 1000,
        "metrics": flatten_metrics(metrics),
        "metrics_json": json.dumps(metrics),
        "warnings": [],
        "sidecar_blob_id": "5" * 40,
    }
    values.update(fields)
    return TableRow(**values)
