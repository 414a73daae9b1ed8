#!lua flags=allow-oom
-- Give a running job back without using up an attempt (worker shutting down, on_shutdown=requeue).
-- KEYS[1] active  KEYS[2] ready  KEYS[3] events  KEYS[4] wake  KEYS[5] seq  KEYS[6..11] the drain block
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] id  ARGV[4] token  ARGV[5] reason
-- Returns 1 = requeued, 0 = stale token.
local prefix, maxlen, job_id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
drain_intake_at(6, prefix, maxlen)  -- a handed job's hash
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'token', 'state')
if f[1] ~= token or f[2] ~= 'running' then return 0 end
local now = now_ms()
local entry = close_attempt(job_key, now, 'requeued', {message = ARGV[5]})
redis.call('HINCRBY', job_key, 'attempts', -1)
redis.call('ZREM', KEYS[1], job_id)
make_ready(job_key, job_id, KEYS[2], KEYS[5], KEYS[4], now)
emit(KEYS[3], maxlen, job_id, 'requeued', 'queued', {'entry', entry})
return 1
