"""What `bundler audit` costs on a board of N bundles on the local Hub server: requests, bytes
received, peak RSS and time, a first run (fresh home) and a second (its verdicts and parts
kept). Run by hand: `python tests/benchmark_audit.py --size 100 [--json-out FILE]`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchlib import BUNDLER, machine, run_measured
from benchmark_scale import TOKENS, generate, the_dataset
from hubserver import HubServer, client_env
from scalelib import defined_tasks, repository_files, run_specs


def measured(hub: HubServer, repo_id: str, home: Path, args: list[str]) -> dict[str, Any]:
    env = os.environ | client_env(hub, "", hf_home=str(home))
    hub.reset_requests()
    run = run_measured([str(BUNDLER), "audit", "--repo", repo_id, *args, "--json"], env=env)
    counts, received = hub.request_counts(), hub.response_bytes()
    return {
        "exit_code": run.exit_code,
        "api": counts["api"],
        "file": counts["file"],
        "received_kib": round(sum(received.values()) / 1024, 1),
        "peak_rss_mib": round(run.peak_rss_kib / 1024, 1),
        "seconds": round(run.seconds, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--json-out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bundler-bench-audit-"))
    hub = HubServer(tokens=TOKENS).start()
    try:
        seeds = generate(workdir / "runs", run_specs(args.size, **the_dataset(hub)))
        repo_id = "bench/audit"
        hub.create_repo(repo_id, files=repository_files(seeds, repo_id, defined_tasks(seeds)))
        home = workdir / "home"
        runs = []
        for name, extra in (("first", []), ("again", []), ("sample 5, fresh", ["--sample", "5"])):
            if name.endswith("fresh"):
                shutil.rmtree(home, ignore_errors=True)
            runs.append({"run": name, "size": args.size} | measured(hub, repo_id, home, extra))
            print(json.dumps(runs[-1]))
        if args.json_out is not None:
            payload = {"machine": machine(), "size": args.size, "runs": runs}
            args.json_out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        return 0
    finally:
        hub.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
