"""The console's time series: the per-minute counters and queue depths kept in the database for longer than
Redis keeps them, and the read API the pages chart.

- `windows.py`: the resolutions (1 minute, 10 minutes, 1 hour) and how a range picks one.
- `rollup.py`: the leader's chore copying closed minutes from Redis and summing them into coarser buckets, and
  the retention of every resolution.
- `sampling.py`: the leader's chore sampling every queue's depth.
- `series.py`: what pages read: counts, latency percentiles, task summaries, depths, throughput.
"""
