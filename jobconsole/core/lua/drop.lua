#!lua flags=allow-oom
-- Set aside a claimed job this worker cannot run (its task is not registered here). Not an attempt.
-- KEYS[1] active  KEYS[2] dropped  KEYS[3] unique  KEYS[4] events  KEYS[5..10] the drain block
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] id  ARGV[4] token  ARGV[5] reason
-- Returns 1 = dropped, 0 = stale token.
local prefix, maxlen, job_id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
drain_intake_at(5, prefix, maxlen)  -- a handed job's hash
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'token', 'state')
if f[1] ~= token or f[2] ~= 'running' then return 0 end
local now = now_ms()
local entry = close_attempt(job_key, now, 'dropped', {message = ARGV[5]})
redis.call('HINCRBY', job_key, 'attempts', -1)
redis.call('ZREM', KEYS[1], job_id)
redis.call('ZADD', KEYS[2], now, job_id)
redis.call('HSET', job_key, 'state', 'dropped', 'finished_at', now, 'reason', ARGV[5])
release_unique(KEYS[3], job_key, job_id)
emit(KEYS[4], maxlen, job_id, 'dropped', 'dropped', {'entry', entry})
return 1
