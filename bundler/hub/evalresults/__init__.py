"""Scores on the models' own Hub pages: `bundler eval-results`.

The Hub shows a model's evaluation results from the `.eval_results/*.yaml` files of its
repository, and gathers them on the benchmark dataset's leaderboard when that dataset's
`eval.yaml` names the task (hub-docs `docs/hub/eval-results.md`). Someone who does not own the
model proposes them as a pull request, which its owner merges or closes.

`benchmark` reads a benchmark dataset's `eval.yaml` (pure), `plan` decides from values alone
which board entries become which entries of which file (pure: what to propose, what is already
there, why an entry is left out), and `propose` does the reading and the pull requests.
"""
