#!lua flags=allow-oom
-- Acknowledge finished jobs (success), each only if its lease token is still current.
-- KEYS: active completed unique events stats drain
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] finished-job ttl ms (0 = keep)  ARGV[4] number of jobs
-- then per job: id, token, result (JSON), runtime_ms
-- Returns per job 1 = completed, 2 = already completed by this token (a retried ack), 0 = stale token
-- (the lease was lost; this worker must not overwrite the new owner's result).
-- A job with dependents releases them here (lua/_deps.lua).
local prefix, maxlen, ttl, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
drain_intake_at(6, prefix, maxlen)  -- a handed job's hash
local now = now_ms()
local out = {}
-- One 'completed' event for the jobs of this call (emit_jobs); its `entry` names the closed attempt (the
-- attempt's JSON for a single job, '1' in a batch entry: the job's attempt list holds it).
local completed, entries = {}, {}
local function emit_completed()
  if #completed == 1 then
    emit(KEYS[4], maxlen, completed[1], 'completed', COMPLETED, {'entry', entries[1]})
  else
    emit_jobs(KEYS[4], maxlen, completed, 'completed', COMPLETED, {'entry', '1'})
  end
  completed, entries = {}, {}
end
local runtime, hist, e2e = {}, {}, {}  -- per task: ms run, jobs by run-time bucket, by end-to-end bucket
for j = 0, n - 1 do
  local job_id, token, result, ms = ARGV[5 + 4 * j], ARGV[6 + 4 * j], ARGV[7 + 4 * j], ARGV[8 + 4 * j]
  local job_key = prefix .. job_id
  local f = redis.call('HMGET', job_key, 'token', 'state', 'task', 'attempts', 'worker', 'host', 'pid',
                       'started_at', 'unique_key', 'enqueued_at', 'kids')
  if f[1] ~= token then
    out[#out + 1] = 0
  elseif f[2] ~= RUNNING then
    out[#out + 1] = (f[2] == COMPLETED) and 2 or 0
  else
    local entry = close_attempt(job_key, now, 'completed', nil, {f[4], f[5], f[6], f[7], f[8]})
    redis.call('HSET', job_key, 'state', COMPLETED, 'finished_at', now, 'result', result)
    redis.call('ZREM', KEYS[1], job_id)
    redis.call('ZADD', KEYS[2], now, job_id)
    release_unique(KEYS[3], job_key, job_id, f[9] or '')
    finish(job_key, ttl)
    completed[#completed + 1] = job_id
    entries[#entries + 1] = entry
    if f[11] == '1' then  -- its 'completed' goes before the events of the dependents it releases
      emit_completed()
      deps_ended(job_key, dep_queue(prefix), job_id, COMPLETED, result, now, maxlen)
    end
    local task = f[3] or ''
    local ran = tonumber(ms) or 0
    local b, th = 0, hist[task]
    if ran >= 1 then  -- hist_bucket, inline
      local _, e = math.frexp(ran)
      b = (e > HIST_LAST) and HIST_LAST or e
    end
    if not th then
      th = {}
      hist[task] = th
    end
    th[b] = (th[b] or 0) + 1
    runtime[task] = (runtime[task] or 0) + ran
    local eb, te = hist_bucket(now - (tonumber(f[10]) or now)), e2e[task]
    if not te then
      te = {}
      e2e[task] = te
    end
    te[eb] = (te[eb] or 0) + 1
    out[#out + 1] = 1
  end
end
emit_completed()
-- The run-time histogram counts the jobs completed too: readers add it to 'completed' (core/metrics.py).
local minute = math.floor(now / 60000) .. '|'
for task, th in pairs(hist) do
  redis.call('HINCRBY', KEYS[5], minute .. 'runtime_ms|' .. task, runtime[task])
  for b, c in pairs(th) do redis.call('HINCRBY', KEYS[5], minute .. 'done_h:' .. b .. '|' .. task, c) end
  for b, c in pairs(e2e[task]) do redis.call('HINCRBY', KEYS[5], minute .. 'e2e_done_h:' .. b .. '|' .. task, c) end
end
return out
