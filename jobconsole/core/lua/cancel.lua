#!lua flags=allow-oom
-- Cancel a job: waiting jobs end at once, and their dependents are told (lua/_deps.lua); a running job gets a
-- cancellation request its worker sees.
-- USES: deps
-- KEYS: unique events sets
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
if state == RUNNING then
  if redis.call('HGET', job_key, 'cancel_requested') == '1' then return 'is:cancelling' end
  if stamp ~= '' then redis.call('HSET', job_key, 'bulk_op', stamp) end
  redis.call('HSET', job_key, 'cancel_requested', 1)
  emit(KEYS[2], maxlen, job_id, 'cancel_requested', RUNNING)
  return 'requested'
end
if not IS_WAITING[state] then return 'is:' .. state end
unready(set_key('ready'), job_key, job_id)  -- a hash and its set may disagree: the ready set always
if STATE_SET[state] ~= 'ready' then redis.call('ZREM', state_key(state), job_id) end
local now = now_ms()
redis.call('ZADD', state_key(CANCELLED), now, job_id)
redis.call('HSET', job_key, 'state', CANCELLED, 'finished_at', now)
if stamp ~= '' then redis.call('HSET', job_key, 'bulk_op', stamp) end
release_unique(KEYS[1], job_key, job_id)
finish(job_key, ttl)
emit(KEYS[2], maxlen, job_id, 'cancelled', CANCELLED)
if f[3] == '1' then deps_ended(job_key, dep_queue(prefix), job_id, CANCELLED, 'null', now, maxlen) end
return 'cancelled'
