"""The leaderboard's tasks: what the maintainers define of each, and the dataset each runs on.

`definitions` reads and checks the maintainers' `leaderboard/tasks.json` (values: each task's
dataset, split, ranking metric and accepted revisions), `signers` reads who may sign the
bundles, and `split_size` asks the Hub how many rows a task's dataset split has (`collect
--resolve-rows`, review's `dataset_rows` check). They stand on the Hub client and the
repository's paths; the maintainers' commits that change them live in bundler.hub.maintain.
"""
