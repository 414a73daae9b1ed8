#!lua flags=allow-oom
-- Acknowledge finished jobs (success), each only if its lease token is still current.
-- KEYS: active completed unique events stats drain
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] finished-job ttl ms (0 = keep)  ARGV[4] number of jobs
-- then per job: id, token, result (JSON), runtime_ms
-- Returns per job 1 = completed, 2 = already completed by this token (a retried ack), 0 = stale token
-- (the lease was lost; this worker must not overwrite the new owner's result).
-- A job with dependents releases them here (lua/_deps.lua).
-- A first attempt that succeeds (attempt 1, no attempt list yet) is recorded by the job hash's own fields
-- (worker, host, pid, started_at, finished_at, attempts, state completed) rather than a JSON entry in
-- `<job>:attempts`: the readers (core/job.py, attempt_history) give a completed job without a list that one
-- attempt. Every other attempt is closed into the list (close_attempt), so a list once begun holds them all.
local prefix, maxlen, ttl, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
drain_intake_at(6, prefix, maxlen)  -- a handed job's hash
local now = now_ms()
local out = {}
-- One 'completed' event for the jobs of this call (emit_jobs); its `entry` names the closed attempt: the
-- attempt's JSON for a single job whose attempt went into its list, else '1' (the job's history holds it).
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
  local f = redis.call('HMGET', job_key, 'token', 'state', 'task', 'attempts', 'unique_key', 'enqueued_at', 'kids')
  if f[1] ~= token then
    out[#out + 1] = 0
  elseif f[2] ~= RUNNING then
    out[#out + 1] = (f[2] == COMPLETED) and 2 or 0
  else
    local entry = '1'  -- a first attempt: the hash records it
    local listed = f[4] ~= '1' or redis.call('EXISTS', job_key .. ':attempts') == 1
    if listed then entry = close_attempt(job_key, now, 'completed') end
    redis.call('HSET', job_key, 'state', COMPLETED, 'finished_at', now, 'result', result)
    redis.call('ZREM', KEYS[1], job_id)
    redis.call('ZADD', KEYS[2], now, job_id)
    release_unique(KEYS[3], job_key, job_id, f[5] or '')
    if listed then
      finish(job_key, ttl)
    elseif ttl > 0 then
      redis.call('PEXPIRE', job_key, ttl)
    end
    completed[#completed + 1] = job_id
    entries[#entries + 1] = entry
    if f[7] == '1' then  -- its 'completed' goes before the events of the dependents it releases
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
    local eb, te = hist_bucket(now - (tonumber(f[6]) or now)), e2e[task]
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
