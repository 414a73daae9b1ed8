#!lua flags=allow-oom
-- Give a running job back without using up an attempt: 'requeue' puts it on the ready set (worker shutting
-- down, on_shutdown=requeue); 'drop' sets it aside as dropped (its task is not registered on the worker).
-- KEYS: active ready dropped unique events wake seq drain
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] id  ARGV[4] token  ARGV[5] reason
-- ARGV[6] 'requeue' or 'drop'
-- Returns 1 = done, 0 = stale token.
local prefix, maxlen, job_id, token, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
drain_intake_at(8, prefix, maxlen)  -- a handed job's hash
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'token', 'state', 'kids')
if f[1] ~= token or f[2] ~= RUNNING then return 0 end
local now = now_ms()
local drop = ARGV[6] == 'drop'
local entry = close_attempt(job_key, now, drop and 'dropped' or 'requeued', {message = reason})
redis.call('HINCRBY', job_key, 'attempts', -1)
redis.call('ZREM', KEYS[1], job_id)
if drop then
  redis.call('ZADD', KEYS[3], now, job_id)
  redis.call('HSET', job_key, 'state', DROPPED, 'finished_at', now, 'reason', reason)
  release_unique(KEYS[4], job_key, job_id)
  emit(KEYS[5], maxlen, job_id, 'dropped', DROPPED, {'entry', entry})
  if f[3] == '1' then deps_ended(job_key, dep_queue(prefix), job_id, DROPPED, 'null', now, maxlen) end
else
  make_ready(job_key, job_id, KEYS[2], KEYS[7], KEYS[6], now, true)
  emit(KEYS[5], maxlen, job_id, 'requeued', QUEUED, {'entry', entry})
end
return 1
