#!lua flags=allow-oom
-- Turn the queue's intake entries into jobs now (for a reader or operator action; see drain_intake).
-- KEYS[1] intake  KEYS[2] ready  KEYS[3] seq  KEYS[4] events  KEYS[5] stats  KEYS[6] active
-- ARGV[1] job key prefix  ARGV[2] events maxlen
-- Returns the number of jobs made.
return drain_intake(KEYS[1], ARGV[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[2])
