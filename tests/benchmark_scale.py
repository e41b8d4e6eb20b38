"""Benchmark: what each command costs the Hub as the leaderboard grows.

A script, not a test (the suite runs it once at a tiny size as a smoke test). It starts the test
suite's Hub-compatible server on 127.0.0.1 (which pages tree listings as the Hub does: 1,000
entries, 50 expanded) and builds repositories of N = 30, 300 and 3,000 bundles (10,000 with
--large) as the bundler lays them out (tests/scalelib.py: real bundles of 3 predictions, the
tables and card, put on the server in one commit). For each N it runs, as a user would:

- `upload` of 1 new bundle, and `upload` of the folder of all N bundles with nothing new;
- `card` with nothing to do;
- `download --bundle ID`, and a full `download` against `hf download --repo-type dataset` of
  the same repository (at the smallest sizes only: both fetch everything);
- `datasets.load_dataset(repo)` and `load_dataset(repo, task)`;

and prints, per command, the requests (API and file), the bytes the server answered with and
the wall time at each N, and the
growth of the requests from the smallest N to the largest: 1.00x is a cost independent of
the repository's size. --json-out writes the figures.

    .venv/bin/python tests/benchmark_scale.py --json-out /tmp/scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import BUNDLER, compile_bytecode, machine
from hubserver import HubServer, TokenInfo, client_env
from scalelib import bundles_of, publish_directly, run_specs

TOKEN = "hf_BenchmarkWriteToken0123456789abcdef"
HF = Path(sys.executable).parent / "hf"
LOAD = """
import sys, datasets
datasets.disable_progress_bars()
kwargs = {"name": sys.argv[2]} if len(sys.argv) > 2 else {}
datasets.load_dataset(sys.argv[1], split="train", **kwargs)
"""
FULL_DOWNLOAD_UP_TO = 300
"""A full download fetches every bundle: it is measured where that takes seconds."""


def measure(
    hub: HubServer, repo_id: str, command: list[str], env: dict[str, str]
) -> dict[str, float]:
    hub.reset_requests()
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}: {result.stderr[-800:]}")
    counts, sizes = hub.request_counts(repo_id), hub.response_bytes(repo_id)
    return {
        "api": counts["api"],
        "file": counts["file"],
        "kib": round((sizes["api"] + sizes["file"]) / 1024, 1),
        "seconds": round(seconds, 3),
    }


def requests(measured: dict[str, float]) -> float:
    return measured["api"] + measured["file"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 300, 3_000])
    parser.add_argument("--large", action="store_true", help="also N = 10,000")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    sizes = sorted({*args.sizes, *([10_000] if args.large else [])})

    workdir = Path(tempfile.mkdtemp(prefix="bundler-bench-scale-"))
    hub = HubServer(tokens={TOKEN: TokenInfo(name="bench", role="write", orgs=("bench",))}).start()
    try:
        env = os.environ | client_env(hub, TOKEN, hf_home=str(workdir / "hf-home"))
        compile_bytecode()
        print(f"machine: {machine()}", flush=True)
        figures: dict[str, dict[int, dict[str, float]]] = {}

        def record(name: str, size: int, measured: dict[str, float]) -> None:
            figures.setdefault(name, {})[size] = measured
            print(
                f"  N={size:>6} {name:<22} {measured['api']:>5.0f} api "
                f"{measured['file']:>5.0f} file {measured['kib']:>9.1f} KiB "
                f"{measured['seconds']:>7.2f} s",
                flush=True,
            )

        for size in sizes:
            root = workdir / f"n{size}"
            bundles = bundles_of(root, run_specs(size))
            repo_id = f"bench/scale-{size}"
            publish_directly(hub, repo_id, bundles)
            new = bundles_of(root / "new", run_specs(1, start=size))
            bundler = [str(BUNDLER)]
            record(
                "upload 1 new",
                size,
                measure(hub, repo_id, [*bundler, "upload", str(new), "--repo", repo_id], env),
            )
            record(
                "upload nothing new",
                size,
                measure(hub, repo_id, [*bundler, "upload", str(bundles), "--repo", repo_id], env),
            )
            record(
                "card nothing to do",
                size,
                measure(hub, repo_id, [*bundler, "card", "--repo", repo_id], env),
            )
            one = str(next(iter(sorted(bundles.rglob("*.tar.zst")))).relative_to(bundles))
            record(
                "download --bundle",
                size,
                measure(
                    hub,
                    repo_id,
                    [
                        *bundler,
                        "download",
                        "--repo",
                        repo_id,
                        "--bundle",
                        one.removesuffix(".tar.zst"),
                        "-o",
                        str(root / "one"),
                    ],
                    env,
                ),
            )
            if size <= FULL_DOWNLOAD_UP_TO:
                everything = [*bundler, "download", "--repo", repo_id, "-o", str(root / "all")]
                record("download all", size, measure(hub, repo_id, everything, env))
                hf = [str(HF), "download", repo_id, "--repo-type", "dataset", "--local-dir"]
                hf_env = env | {"HF_HUB_CACHE": str(root / "hf-cache")}
                baseline = measure(hub, repo_id, [*hf, str(root / "hf")], hf_env)
                record("hf download (baseline)", size, baseline)
            cache = {"HF_DATASETS_CACHE": str(root / "ds"), "HF_HUB_CACHE": str(root / "hub")}
            python = [sys.executable, "-c", LOAD, repo_id]
            record("load_dataset(repo)", size, measure(hub, repo_id, python, env | cache))
            shutil.rmtree(root / "ds", ignore_errors=True)
            shutil.rmtree(root / "hub", ignore_errors=True)
            record(
                "load_dataset(task)", size, measure(hub, repo_id, [*python, "task03"], env | cache)
            )
            shutil.rmtree(root, ignore_errors=True)

        print("\nsummary (requests, api + file; growth from the smallest N to the largest):")
        summary = []
        for name, by_size in figures.items():
            measured = sorted(by_size)
            first, last = by_size[measured[0]], by_size[measured[-1]]
            growth = requests(last) / max(1, requests(first))
            cells = "  ".join(
                f"N={n}: {requests(by_size[n]):.0f} req, {by_size[n]['kib']:.0f} KiB, "
                f"{by_size[n]['seconds']:.2f} s"
                for n in measured
            )
            print(f"  {name:<22} {cells}  growth {growth:.2f}x")
            summary.append({"name": name, "by_size": by_size, "growth": round(growth, 2)})
        if args.json_out is not None:
            args.json_out.write_text(
                json.dumps({"machine": machine(), "commands": summary}, indent=2)
            )
        return 0
    finally:
        hub.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
