#!lua flags=allow-oom
-- Acknowledge finished jobs (success), each only if its lease token is still current (complete_jobs in
-- lua/_deps.lua; a worker's acks for the queue it claims from next go with that claim instead, claim.lua).
-- KEYS: active completed unique events stats drain
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] finished-job ttl ms (0 = keep)  ARGV[4] number of jobs
-- then per job: id, token, result (JSON), runtime_ms
-- Returns per job 1 = completed, 2 = already completed by this token (a retried ack), 0 = stale token.
local prefix, maxlen = ARGV[1], ARGV[2]
drain_intake_at(6, prefix, maxlen)  -- a handed job's hash
return complete_jobs(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], prefix, maxlen, tonumber(ARGV[3]), now_ms(), ARGV, 5,
                     tonumber(ARGV[4]))
