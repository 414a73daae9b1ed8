#!lua flags=allow-oom
-- Edit a job as an operator saw it (compare-and-set on its state and attempt count):
-- * a waiting job (IS_WAITING: queued, scheduled, retrying, ...): new priority, run-at and/or parameters, applied
--   in place; a run-at in the future makes a ready job scheduled, a past one makes it ready now (a job waiting
--   for other jobs keeps waiting: its run-at applies once they release it);
-- * an ended job (IS_RESUBMITTABLE: dead, failed, dropped, cancelled) with resubmit = 1: new parameters and/or
--   priority,
--   then requeued in the same step (history kept; attempts reset if asked); with a run-at in the future it
--   waits in the scheduled set until then (a bulk resubmit spread over a time window).
-- A stamp (a bulk operation's id) makes the edit idempotent: it is recorded in the job hash (`bulk_op`) by the
-- step that applies the edit, and a repeat of the same stamped edit answers 'already' and changes nothing.
-- USES: deps
-- KEYS: unique events wake seq sets
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] id  ARGV[4] expected state
-- ARGV[5] expected attempts ('' = any)  ARGV[6] priority ('' = unchanged)  ARGV[7] run_at ms ('' = unchanged)
-- ARGV[8] params JSON ('' = unchanged)  ARGV[9] resubmit (1/0)  ARGV[10] reset attempts (1/0)
-- ARGV[11] stamp ('' = none)
-- Returns {status, state}: status 'edited' or 'resubmitted' with the new state; 'already' (this stamp was
-- applied before); 'missing'; 'conflict' with the job's current state (it moved on since the operator
-- looked); 'duplicate' (resubmitting would take a unique key another live job holds).
local prefix, maxlen, job_id, expected = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local priority, run_at, params = ARGV[6], ARGV[7], ARGV[8]
local resubmit = ARGV[9] == '1'
local stamp = ARGV[11] or ''
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'state', 'attempts', 'unique_key', 'bulk_op')
local state = f[1]
if not state then return {'missing', ''} end
if stamp ~= '' and f[4] == stamp then return {'already', state} end
if state ~= expected or (ARGV[5] ~= '' and (f[2] or '0') ~= ARGV[5]) then return {'conflict', state} end
if (resubmit and not IS_RESUBMITTABLE[state]) or (not resubmit and not IS_WAITING[state]) then
  return {'conflict', state}
end
local ready, scheduled = set_key('ready'), set_key('scheduled')
local now = now_ms()
local changed = {}
if resubmit then
  local ukey = f[3]
  if ukey and ukey ~= '' then
    local holder = redis.call('HGET', KEYS[1], ukey)
    if holder and holder ~= job_id then return {'duplicate', state} end
    redis.call('HSET', KEYS[1], ukey, job_id)
  end
end
if stamp ~= '' then redis.call('HSET', job_key, 'bulk_op', stamp) end
if params ~= '' then
  redis.call('HSET', job_key, 'params', params)
  redis.call('HDEL', job_key, 'splice_at')  -- the operator's params stand as given: no parents' results go in
  changed[#changed + 1] = 'params'
end
if priority ~= '' then redis.call('HSET', job_key, 'priority', priority) changed[#changed + 1] = 'priority' end
if resubmit then
  leave_sets(job_key, job_id)
  redis.call('PERSIST', job_key)
  redis.call('PERSIST', job_key .. ':attempts')
  if ARGV[10] == '1' then redis.call('HSET', job_key, 'attempts', 0) end
  redis.call('HSET', job_key, 'cancel_requested', 0, 'finished_at', '')
  deps_back(job_key, dep_queue(prefix), job_id, state, now, maxlen)  -- its workflow continues
  local extra = {'from', state, 'reset', ARGV[10], 'edited', table.concat(changed, ',')}
  local at = tonumber(run_at)
  if at and at > now then
    redis.call('ZADD', scheduled, at, job_id)
    redis.call('HSET', job_key, 'state', SCHEDULED, 'run_at', at)
    redis.call('LPUSH', KEYS[3], '1')  -- idle workers recompute when the next job is due
    redis.call('LTRIM', KEYS[3], 0, 999)
    emit(KEYS[2], maxlen, job_id, 'requeued', SCHEDULED, extra)
    return {'resubmitted', SCHEDULED}
  end
  make_ready(job_key, job_id, ready, KEYS[4], KEYS[3], now)
  emit(KEYS[2], maxlen, job_id, 'requeued', QUEUED, extra)
  return {'resubmitted', QUEUED}
end
local new_state = state
local own = STATE_SET[state]
if run_at ~= '' then
  changed[#changed + 1] = 'run_at'
  local at = tonumber(run_at)
  if own ~= 'ready' and own ~= 'scheduled' then
    redis.call('HSET', job_key, 'run_at', at)  -- it waits for other jobs; the run-at counts once they release it
  elseif at > now then
    unready(ready, job_key, job_id)
    redis.call('ZADD', scheduled, at, job_id)
    if state == QUEUED then new_state = SCHEDULED end
    redis.call('HSET', job_key, 'state', new_state, 'run_at', at)
    redis.call('LPUSH', KEYS[3], '1')  -- idle workers recompute when the next job is due
    redis.call('LTRIM', KEYS[3], 0, 999)
  elseif state ~= QUEUED then
    redis.call('ZREM', scheduled, job_id)
    redis.call('HSET', job_key, 'run_at', now)
    make_ready(job_key, job_id, ready, KEYS[4], KEYS[3], now)
    new_state = QUEUED
  end
end
if new_state == QUEUED and priority ~= '' then
  -- Re-score in the ready set, keeping the job's place in line among its new priority's jobs.
  local waiting_in = ready
  local score = redis.call('ZSCORE', waiting_in, job_id)
  local group = redis.call('HGET', job_key, 'group')
  if not score and group and group ~= '' then  -- held for a slot of its concurrency group
    waiting_in = held_key(ready, group)
    score = redis.call('ZSCORE', waiting_in, job_id)
  end
  if score then
    redis.call('ZADD', waiting_in, ready_score(priority, tonumber(score) % 1000000000000), job_id)
  end
end
emit(KEYS[2], maxlen, job_id, 'edited', new_state, {'fields', table.concat(changed, ',')})
return {'edited', new_state}
