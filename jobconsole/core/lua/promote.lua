#!lua flags=allow-oom
-- The maintenance loop's pass over a queue: turn intake entries into jobs (a queue nobody claims from,
-- e.g. a paused one, still shows them to readers and the mirror), then move due scheduled jobs to the
-- ready set (claim does both too).
-- KEYS: scheduled ready seq wake events intake stats active
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] limit
-- Returns the number promoted.
drain_intake(KEYS[6], ARGV[1], KEYS[2], KEYS[3], KEYS[5], KEYS[7], KEYS[8], ARGV[2])
return promote_due(ARGV[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[2], now_ms(), tonumber(ARGV[3]))
