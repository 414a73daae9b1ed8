#!lua flags=allow-oom
-- Delete the job holding a unique key, if it has not started (Runqueue's "delete the reminder before it
-- runs"): looked up and deleted in one step, so a job that starts meanwhile is never deleted.
-- USES: deps
-- KEYS: unique events sets
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] unique key
-- Returns {status, id}: 'deleted' (a waiting job), 'missing' (no live job holds the key; id ''), or
-- 'is:<state>' (it runs: cancel it instead).
local prefix, maxlen, ukey = ARGV[1], ARGV[2], ARGV[3]
local job_id = redis.call('HGET', KEYS[1], ukey)
if not job_id then return {'missing', ''} end
local job_key = prefix .. job_id
local state = redis.call('HGET', job_key, 'state')
if not state then
  redis.call('HDEL', KEYS[1], ukey)  -- a holder gone without freeing it (written by other hands)
  return {'missing', ''}
end
if not IS_WAITING[state] then return {'is:' .. state, job_id} end
unready(set_key('ready'), job_key, job_id)
if STATE_SET[state] ~= 'ready' then redis.call('ZREM', state_key(state), job_id) end
redis.call('HDEL', KEYS[1], ukey)
if redis.call('HGET', job_key, 'kids') == '1' then
  deps_ended(job_key, dep_queue(prefix), job_id, 'deleted', 'null', now_ms(), maxlen)  -- it never ran
end
redis.call('DEL', job_key, job_key .. ':attempts', job_key .. ':children')
emit(KEYS[2], maxlen, job_id, 'deleted', 'deleted', {'from', state, 'unique_key', ukey})
return {'deleted', job_id}
