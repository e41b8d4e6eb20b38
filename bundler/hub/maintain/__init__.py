"""The maintainers' commands: what changes a leaderboard's rules and board on their behalf.

`board_start` is `bundler init` (a repository given its empty board), `card_refresh` is
`bundler card` (the tables and card made true again), `task_define` is `bundler tasks define`
(one task's definition, checked against the task's bundles), `signers_change` is `bundler
signers add/remove/retire` and `signers_require` is `bundler signers require`. Each reads the
branch (bundler.hub.leaderboard.branch) and commits its change with the tables and card it
makes stale, in one commit naming its parent. They stand on the values and derivations of
`tasks` and `leaderboard`, which never stand on them; only the command line imports them.
"""
