"""The pieces of bench/run.

Common helpers: common (paths, sizes, logging), peers (build, peer install, machine and
versions), data (the input bytes), checks (did the right bytes arrive), procs (one run's
processes, timed and reaped), stream (feeder -> tool -> sinks), measure (rows from runs),
table (RESULTS.md and results.csv).
One module per scenario family, each with its `scenarios(ctx)`: pipe, tee, copy, relay,
seed.
"""
