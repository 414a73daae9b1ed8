#!lua
-- Put back jobs waiting for other jobs that Redis lost (a rollback), with their edges and their workflow's record,
-- from what the database mirror kept (jobconsole/mirror/restore.py, core/restoring.py). All of one call or none.
-- KEYS: wf_record
-- USES: deps
-- ARGV[1] workflow id ('' = none: depends_on jobs)  ARGV[2] name  ARGV[3] events maxlen  ARGV[4] home queue
-- ARGV[5] the record's remaining life in ms (0: not put back)  ARGV[6] created_at ms  ARGV[7] cancelled_at ms
-- ('' none)  ARGV[8] size  ARGV[9] m, then m pairs: step name, its job's ref (the record's members)
-- then n, and per job, parents before their dependents: queue, id, task, priority, run_at_ms ('' none), step,
--   pass, splice_at, when, release_delay ('' each when not set), number of parents, then per parent: its ref,
--   policy, its step name, the state it ended in if Redis does not hold it ('' when it must: then 'dropped'),
--   its result JSON; then nf and nf field/value pairs stored on the job hash (queue, params, max_retries...).
-- then k, and k pairs (ref, step) of jobs of the workflow put back as plain jobs (enqueue): their hash gets its
--   workflow and step again.
-- A job Redis holds already (still there, or put back by an earlier call) is left as it is: a restore repeated
-- after a crash writes nothing twice. A parent that ended counts at once through dep_edge_ended, which releases
-- (or cancels) the job exactly once (its HSETNX); a parent still pending gets the job in its children.
-- Returns per job its state now ('' when it was there already).
local wf_id, name, maxlen, home = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local keep, created, cancelled, size = tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[8]
local now = now_ms()
local i = 9
local m = tonumber(ARGV[i])
local record_first = i + 1
i = i + 1 + 2 * m
local n = tonumber(ARGV[i])
i = i + 1
local jobs = {}
for _ = 1, n do
  local j = {queue = ARGV[i], id = ARGV[i + 1], task = ARGV[i + 2], priority = ARGV[i + 3], run_at = ARGV[i + 4],
             step = ARGV[i + 5], pass = ARGV[i + 6], splice = ARGV[i + 7], when = ARGV[i + 8], delay = ARGV[i + 9],
             parents = {}}
  local np = tonumber(ARGV[i + 10])
  i = i + 11
  for p = 1, np do
    j.parents[p] = {ref = ARGV[i], policy = ARGV[i + 1], step = ARGV[i + 2], ended = ARGV[i + 3],
                    result = ARGV[i + 4]}
    i = i + 5
  end
  local nf = tonumber(ARGV[i])
  j.fields = {i + 1, i + 2 * nf}
  i = i + 1 + 2 * nf
  j.ref = j.queue .. '|' .. j.id
  j.key = dep_base(j.queue) .. 'job:' .. j.id
  jobs[#jobs + 1] = j
end
local k = tonumber(ARGV[i])
local plain_first = i + 1
-- Every queue involved drains its intake first: a parent put back by enqueue may still be an intake entry.
do
  local drained = {}
  local function drain(queue)
    if drained[queue] then return end
    drained[queue] = true
    local base = dep_base(queue)
    drain_intake(base .. 'intake', base .. 'job:', base .. 'ready', base .. 'seq', base .. 'events', base .. 'stats',
                 base .. 'active', maxlen)
  end
  for _, j in ipairs(jobs) do
    drain(j.queue)
    for _, p in ipairs(j.parents) do drain(string.match(p.ref, '^([^|]+)|')) end
  end
  for a = plain_first, plain_first + 2 * k - 1, 2 do drain(string.match(ARGV[a], '^([^|]+)|')) end
end
if wf_id ~= '' and keep > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'id', wf_id, 'name', name, 'queue', home, 'created_at', created, 'size', size)
  if cancelled ~= '' then redis.call('HSET', KEYS[1], 'cancelled_at', cancelled) end
  local record = {'HSET', KEYS[1]}
  for a = record_first, record_first + 2 * m - 1, 2 do  -- in slices: unpack has a limit
    record[#record + 1] = 'step:' .. ARGV[a]
    record[#record + 1] = ARGV[a + 1]
    if #record >= 2002 or a + 1 == record_first + 2 * m - 1 then
      redis.call(unpack(record))
      record = {'HSET', KEYS[1]}
    end
  end
  redis.call('PEXPIRE', KEYS[1], keep)
end
if wf_id ~= '' then
  for a = plain_first, plain_first + 2 * k - 1, 2 do
    local key = dep_job(ARGV[a])
    if redis.call('HEXISTS', key, 'state') == 1 and redis.call('HEXISTS', key, 'workflow') == 0 then
      redis.call('HSET', key, 'workflow', wf_id, 'workflow_queue', home, 'step', ARGV[a + 1])
    end
  end
end
local out = {}
local extra = {'workflow', wf_id}
for _, j in ipairs(jobs) do
  if redis.call('EXISTS', j.key) == 1 then
    out[#out + 1] = ''
  else
    local base = dep_base(j.queue)
    local hset = {'HSET', j.key, 'id', j.id, 'task', j.task, 'priority', j.priority, 'enqueued_at', now,
                  'state', WAITING, 'deps_n', #j.parents}
    local function put(field, value)
      if value ~= '' then hset[#hset + 1] = field; hset[#hset + 1] = value end
    end
    if wf_id ~= '' then put('workflow', wf_id); put('workflow_queue', home) end
    put('step', j.step)
    put('run_at', j.run_at)
    put('pass', j.pass)
    put('splice_at', j.splice)
    put('when', j.when)
    put('release_delay', j.delay)
    for f = j.fields[1], j.fields[2] do hset[#hset + 1] = ARGV[f] end
    redis.call(unpack(hset))
    emit(base .. 'events', maxlen, j.id, 'enqueued', WAITING, extra)
    count(base .. 'stats', now, 'enqueued', j.task, 1)
    redis.call('ZADD', base .. 'waiting', now, j.id)
    local deps = {'HSET', j.key .. ':deps'}
    for index, p in ipairs(j.parents) do
      deps[#deps + 1] = p.ref
      deps[#deps + 1] = p.policy .. '|' .. index .. '|' .. p.step
      if #deps >= 2002 then
        redis.call(unpack(deps))
        deps = {'HSET', j.key .. ':deps'}
      end
    end
    if #deps > 2 then redis.call(unpack(deps)) end
    local ended = {}
    for _, p in ipairs(j.parents) do
      local parent_key = dep_job(p.ref)
      local ph = redis.call('HMGET', parent_key, 'state', 'result', 'kids')
      if ph[1] then
        redis.call('SADD', parent_key .. ':children', j.ref)
        if ph[3] ~= '1' then redis.call('HSET', parent_key, 'kids', '1') end
        if DEP_ENDED[ph[1]] then ended[#ended + 1] = {p.ref, ph[1], ph[2] or 'null'} end
      else  -- gone from Redis: as the database saw it end, else lost for good
        local state = (p.ended ~= '') and p.ended or DROPPED
        ended[#ended + 1] = {p.ref, state, (state == COMPLETED and p.result ~= '') and p.result or 'null'}
      end
    end
    for _, e in ipairs(ended) do dep_edge_ended(j.key, j.ref, e[1], e[2], e[3], now, maxlen) end
    out[#out + 1] = redis.call('HGET', j.key, 'state')
  end
end
return out
