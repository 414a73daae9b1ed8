#!lua flags=allow-oom
-- A task that finished by asking to run again later with new state (Runqueue's `replace`): the same job, its
-- attempt closed as 'replaced', new params and priority when given, its attempt count reset to 0, then
-- scheduled at its new run-at (or ready now). Token-checked like complete: a stale lease changes nothing.
-- Its unique key stays held (the job lives on). An operator's cancel request made while it ran wins: the job
-- ends cancelled instead of running again (else a job that replaces itself could never be stopped).
-- KEYS: active ready scheduled events wake seq cancelled unique drain
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] id  ARGV[4] token  ARGV[5] params JSON ('' = keep)
-- ARGV[6] priority ('' = keep)  ARGV[7] delay ms ('' = none)  ARGV[8] run_at ms ('' = none)  ARGV[9] result JSON
-- ARGV[10] finished-job ttl ms (for a cancelled one)
-- Returns 1 = replaced, 2 = cancelled as asked, 0 = stale token.
local prefix, maxlen, job_id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local params, priority, delay_ms, run_at_ms = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
drain_intake_at(9, prefix, maxlen)  -- a handed job's hash
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'token', 'state', 'cancel_requested', 'kids')
if f[1] ~= token or f[2] ~= RUNNING then return 0 end
local now = now_ms()
if f[3] == '1' then
  local entry = close_attempt(job_key, now, 'cancelled', {message = 'cancelled by an operator; not run again'})
  redis.call('ZREM', KEYS[1], job_id)
  redis.call('ZADD', KEYS[7], now, job_id)
  redis.call('HSET', job_key, 'state', CANCELLED, 'finished_at', now)
  release_unique(KEYS[8], job_key, job_id)
  finish(job_key, ARGV[10])
  emit(KEYS[4], maxlen, job_id, 'cancelled', CANCELLED, {'entry', entry})
  if f[4] == '1' then deps_ended(job_key, dep_queue(prefix), job_id, CANCELLED, 'null', now, maxlen) end
  return 2
end
local entry = close_attempt(job_key, now, 'replaced', {result = ARGV[9]})
redis.call('ZREM', KEYS[1], job_id)
redis.call('HSET', job_key, 'attempts', 0, 'cancel_requested', 0, 'result', ARGV[9])
redis.call('HDEL', job_key, 'progress', 'checkpoint', 'last_error')  -- a new run with a new state
if params ~= '' then redis.call('HSET', job_key, 'params', params) end
if priority ~= '' then redis.call('HSET', job_key, 'priority', priority) end
local run_at = now
if delay_ms ~= '' then run_at = now + tonumber(delay_ms) end
if run_at_ms ~= '' then run_at = tonumber(run_at_ms) end
local state = QUEUED
if run_at > now then
  state = SCHEDULED
  redis.call('HSET', job_key, 'state', state, 'run_at', run_at)
  redis.call('ZADD', KEYS[3], run_at, job_id)
  redis.call('LPUSH', KEYS[5], '1')  -- idle workers recompute when the next job is due
  redis.call('LTRIM', KEYS[5], 0, 999)
else
  redis.call('HSET', job_key, 'run_at', now)
  make_ready(job_key, job_id, KEYS[2], KEYS[6], KEYS[5], now)
end
emit(KEYS[4], maxlen, job_id, 'replaced', state, {'entry', entry})
return 1
