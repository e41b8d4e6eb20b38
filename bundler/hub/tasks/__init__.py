"""The leaderboard's tasks: what the maintainers define of each, and the dataset each runs on.

`definitions` reads and checks the maintainers' `leaderboard/tasks.json` (values: each task's
dataset, split, ranking metric and accepted revisions), `define` is `bundler tasks define`
(a maintainer's commit of one definition, with the tables and card ranked by it), and
`split_size` asks the Hub how many rows a task's dataset split has (`collect --resolve-rows`,
review's `dataset_rows` check). `definitions` and `split_size` stand on the Hub client and the
repository's paths; `define`, a command, also on the leaderboard whose tables it rewrites.
"""
