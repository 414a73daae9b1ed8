#!lua flags=allow-oom
-- Run a delayed or retrying job now, or bring back an ended one (dead, failed, dropped, cancelled: the states
-- the table calls resubmittable); history is kept. A workflow member brought back continues its workflow: its
-- dependents wait for it again (deps_back, lua/_deps.lua). A job waiting for its parents is not requeueable.
-- USES: deps
-- KEYS: unique events wake seq sets
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] id  ARGV[4] reset attempts (1/0)
-- ARGV[5] stamp ('' = none): a bulk operation's id, recorded in the job hash (`bulk_op`) with the requeue; a
-- repeat with the same stamp answers 'already' and changes nothing.
-- Returns 'queued', 'already', 'missing', 'duplicate' (its unique key is held by another live job),
-- or 'is:<state>' when its state cannot be requeued (running, completed, queued, ...: IS_REQUEUEABLE).
local prefix, maxlen, job_id = ARGV[1], ARGV[2], ARGV[3]
local stamp = ARGV[5] or ''
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'state', 'unique_key', 'bulk_op')
local state = f[1]
if not state then return 'missing' end
if stamp ~= '' and f[3] == stamp then return 'already' end
if not IS_REQUEUEABLE[state] then return 'is:' .. state end
local ukey = f[2]
if ukey and ukey ~= '' then
  local holder = redis.call('HGET', KEYS[1], ukey)
  if holder and holder ~= job_id then return 'duplicate' end
  redis.call('HSET', KEYS[1], ukey, job_id)
end
leave_sets(job_key, job_id)
redis.call('PERSIST', job_key)
redis.call('PERSIST', job_key .. ':attempts')
if ARGV[4] == '1' then redis.call('HSET', job_key, 'attempts', 0) end
if stamp ~= '' then redis.call('HSET', job_key, 'bulk_op', stamp) end
redis.call('HSET', job_key, 'cancel_requested', 0, 'finished_at', '')
local now = now_ms()
deps_back(job_key, dep_queue(prefix), job_id, state, now, maxlen)
make_ready(job_key, job_id, set_key('ready'), KEYS[4], KEYS[3], now)
emit(KEYS[2], maxlen, job_id, 'requeued', QUEUED, {'from', state, 'reset', ARGV[4]})
return QUEUED
