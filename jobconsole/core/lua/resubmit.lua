#!lua flags=allow-oom
-- Resubmit many dead jobs at once (a chunk of a bulk operation): what edit.lua does for one with resubmit = 1,
-- in fewer steps per job. Each job only while it is still dead, with the attempt count the operator saw
-- (compare-and-set), and once per stamp: the stamp (the bulk operation's id) is recorded in the job hash
-- (`bulk_op`) in the step that resubmits it, and a job that carries it already answers 'already'. History is
-- kept; attempts are reset if asked. A job with a run-at in the future waits in the scheduled set until then.
-- KEYS: ready scheduled dead unique events wake seq
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] stamp  ARGV[4] reset attempts (1/0)  ARGV[5] number of jobs
-- then per job: id, expected attempts ('' = any), run_at ms ('' = now)
-- Returns per job: 'queued' or 'scheduled' (resubmitted), 'already', 'missing', 'duplicate' (its unique key is
-- held by another live job), or 'conflict:<state>' (no longer dead, or dead again with another attempt count).
local prefix, maxlen, stamp, reset, n = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local now = now_ms()
local out = {}
local ready = {}  -- {priority, job id} of the jobs going to the ready set, given their places in line at the end
local wake = 0
for j = 0, n - 1 do
  local job_id, expected, run_at = ARGV[6 + 3 * j], ARGV[7 + 3 * j], ARGV[8 + 3 * j]
  local job_key = prefix .. job_id
  local f = redis.call('HMGET', job_key, 'state', 'attempts', 'unique_key', 'bulk_op', 'priority')
  local state, status = f[1], nil
  if not state then
    status = 'missing'
  elseif stamp ~= '' and f[4] == stamp then
    status = 'already'
  elseif state ~= DEAD or (expected ~= '' and (f[2] or '0') ~= expected) then
    status = 'conflict:' .. state
  else
    local ukey = f[3]
    if ukey and ukey ~= '' then
      local holder = redis.call('HGET', KEYS[4], ukey)
      if holder and holder ~= job_id then status = 'duplicate' else redis.call('HSET', KEYS[4], ukey, job_id) end
    end
  end
  if not status then
    redis.call('ZREM', KEYS[3], job_id)
    redis.call('PERSIST', job_key)
    redis.call('PERSIST', job_key .. ':attempts')
    local at = tonumber(run_at)
    local extra = {'from', DEAD, 'reset', reset, 'bulk', stamp}
    if at and at > now then
      redis.call('ZADD', KEYS[2], at, job_id)
      status = SCHEDULED
      redis.call('HSET', job_key, 'state', status, 'run_at', at, 'bulk_op', stamp, 'cancel_requested', 0,
                 'finished_at', '')
    else
      status = QUEUED
      ready[#ready + 1] = {f[5] or '0', job_id}
      redis.call('HSET', job_key, 'state', status, 'ready_at', now, 'bulk_op', stamp, 'cancel_requested', 0,
                 'finished_at', '')
    end
    if reset == '1' then redis.call('HSET', job_key, 'attempts', 0) end
    deps_back(job_key, dep_queue(prefix), job_id, 'dead', now, maxlen)  -- its workflow continues
    emit(KEYS[5], maxlen, job_id, 'requeued', status, extra)
    wake = wake + 1
  end
  out[#out + 1] = status
end
if #ready > 0 then
  -- FIFO places for the whole batch in one step, in the batch's order (make_ready takes them one at a time).
  local last = redis.call('INCRBY', KEYS[7], #ready)
  local zadd = {'ZADD', KEYS[1]}
  for i, r in ipairs(ready) do
    zadd[#zadd + 1] = ready_score(r[1], last - #ready + i)
    zadd[#zadd + 1] = r[2]
  end
  redis.call(unpack(zadd))
end
if wake > 0 then
  -- One token per resubmitted job wakes as many idle workers (capped, as make_ready caps them), and an idle
  -- worker recomputes when the next scheduled job is due.
  local tokens = {'LPUSH', KEYS[6]}
  for _ = 1, math.min(wake, 1000) do tokens[#tokens + 1] = '1' end
  redis.call(unpack(tokens))
  redis.call('LTRIM', KEYS[6], 0, 999)
end
return out
