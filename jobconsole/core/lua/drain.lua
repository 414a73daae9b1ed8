#!lua flags=allow-oom
-- Turn the queue's intake entries into jobs now (for a reader or operator action; see drain_intake).
-- KEYS: drain
-- ARGV[1] job key prefix  ARGV[2] events maxlen
-- Returns the number of jobs made.
return drain_intake_at(1, ARGV[1], ARGV[2])
