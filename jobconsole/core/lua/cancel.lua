#!lua flags=allow-oom
-- Cancel a job: waiting jobs (queued, scheduled, retrying, or waiting for parents) end at once, and their
-- dependents are told (lua/_deps.lua); a running job gets a cancellation request its worker sees.
-- KEYS: ready scheduled cancelled unique events waiting
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] finished-job ttl ms  ARGV[4] id
-- ARGV[5] stamp ('' = none): a bulk operation's id, recorded in the job hash (`bulk_op`) with the cancel; a
-- repeat with the same stamp answers 'already' and changes nothing.
-- Returns 'cancelled', 'requested' (running), 'already', 'missing', or 'is:<state>' when its state cannot
-- be cancelled.
local prefix, maxlen, ttl, job_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local stamp = ARGV[5] or ''
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'state', 'bulk_op', 'kids')
local state = f[1]
if not state then return 'missing' end
if stamp ~= '' and f[2] == stamp then return 'already' end
if state == 'running' then
  if redis.call('HGET', job_key, 'cancel_requested') == '1' then return 'is:cancelling' end
  if stamp ~= '' then redis.call('HSET', job_key, 'bulk_op', stamp) end
  redis.call('HSET', job_key, 'cancel_requested', 1)
  emit(KEYS[5], maxlen, job_id, 'cancel_requested', 'running')
  return 'requested'
end
if state ~= 'queued' and state ~= 'scheduled' and state ~= 'retrying' and state ~= 'waiting' then
  return 'is:' .. state
end
unready(KEYS[1], job_key, job_id)
redis.call('ZREM', KEYS[2], job_id)
redis.call('ZREM', KEYS[6], job_id)
local now = now_ms()
redis.call('ZADD', KEYS[3], now, job_id)
redis.call('HSET', job_key, 'state', 'cancelled', 'finished_at', now)
if stamp ~= '' then redis.call('HSET', job_key, 'bulk_op', stamp) end
release_unique(KEYS[4], job_key, job_id)
finish(job_key, ttl)
emit(KEYS[5], maxlen, job_id, 'cancelled', 'cancelled')
if f[3] == '1' then deps_ended(job_key, dep_queue(prefix), job_id, 'cancelled', 'null', now, maxlen) end
return 'cancelled'
