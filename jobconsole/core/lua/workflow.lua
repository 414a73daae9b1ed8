#!lua
-- Create a workflow: jobs and the edges between them, all or nothing (core/workflows.py, lua/_deps.lua).
-- Also a plain enqueue with depends_on (one job, parents outside; no workflow record).
-- KEYS: wf_record
-- USES: deps
-- ARGV[1] workflow id ('' = none: a depends_on enqueue)  ARGV[2] name  ARGV[3] events maxlen
-- ARGV[4] home queue (where the record lives)  ARGV[5] keep ms (the record's expiry)  ARGV[6] number of jobs
-- then per job, parents before their dependents: queue, id, task, priority, delay_ms ('' none), run_at_ms
--   ('' none), step name, pass ('' | 'dict' | 'one' | 'list'), splice_at ('' none), number of parents, then per
--   parent: its ref ("<queue>|<id>"), policy ('cancel' | 'run'), its step name ('' outside the workflow);
--   then n (number of extra field/value pairs) and n pairs stored on the job hash.
-- Checks first, writes after: a job id already taken, or a parent outside the workflow that does not exist,
-- refuses the whole call and nothing is written. A root (no parents) is queued (or scheduled); a dependent waits
-- ('waiting') until its parents end; a parent outside that already ended counts at once. A dependent's
-- delay counts from its release.
-- Returns {'created', state per job...}, {'exists'} (the workflow id is known: a repeated call), or
-- {'taken', id} / {'missing', parent ref, job id}.
local wf_id, name, maxlen, home, keep, n = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
if wf_id ~= '' and redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local jobs, mine = {}, {}
local i = 7
for _ = 1, n do
  local j = {queue = ARGV[i], id = ARGV[i + 1], task = ARGV[i + 2], priority = ARGV[i + 3], delay = ARGV[i + 4],
             run_at = ARGV[i + 5], step = ARGV[i + 6], pass = ARGV[i + 7], splice = ARGV[i + 8], parents = {}}
  local np = tonumber(ARGV[i + 9])
  i = i + 10
  for p = 1, np do
    j.parents[p] = {ARGV[i], ARGV[i + 1], ARGV[i + 2]}
    i = i + 3
  end
  local nf = tonumber(ARGV[i])
  j.fields = {i + 1, i + 2 * nf}
  i = i + 1 + 2 * nf
  j.ref = j.queue .. '|' .. j.id
  j.key = dep_base(j.queue) .. 'job:' .. j.id
  jobs[#jobs + 1] = j
  mine[j.ref] = true
end
for _, j in ipairs(jobs) do
  if redis.call('EXISTS', j.key) == 1 then return {'taken', j.id} end
  for _, p in ipairs(j.parents) do
    if not mine[p[1]] and not redis.call('HGET', (dep_job(p[1])), 'state') then return {'missing', p[1], j.id} end
  end
end
local now = now_ms()
local out = {'created'}
local woken = {}
for _, j in ipairs(jobs) do
  local base = dep_base(j.queue)
  local state = 'waiting'
  local run_at = nil
  if j.run_at ~= '' then run_at = tonumber(j.run_at) end
  if #j.parents == 0 then
    if j.delay ~= '' then run_at = now + tonumber(j.delay) end
    state = (run_at and run_at > now) and 'scheduled' or 'queued'
  end
  local hset = {'HSET', j.key, 'id', j.id, 'task', j.task, 'priority', j.priority, 'enqueued_at', now, 'state', state}
  local function put(field, value) hset[#hset + 1] = field; hset[#hset + 1] = value end
  if wf_id ~= '' then put('workflow', wf_id); put('workflow_queue', home) end
  if j.step ~= '' then put('step', j.step) end
  if run_at then put('run_at', run_at) end
  if #j.parents > 0 then
    put('deps_n', #j.parents)
    if j.delay ~= '' then put('release_delay', j.delay) end
    if j.pass ~= '' then put('pass', j.pass) end
    if j.splice ~= '' then put('splice_at', j.splice) end
  end
  for f = j.fields[1], j.fields[2] do hset[#hset + 1] = ARGV[f] end
  redis.call(unpack(hset))
  emit(base .. 'events', maxlen, j.id, 'enqueued', state, {'workflow', wf_id})
  count(base .. 'stats', now, 'enqueued', j.task)
  if state == 'queued' then
    local seq = redis.call('INCR', base .. 'seq')
    redis.call('ZADD', base .. 'ready', ready_score(j.priority, seq), j.id)
    woken[j.queue] = true
  elseif state == 'scheduled' then
    redis.call('ZADD', base .. 'scheduled', run_at, j.id)
    woken[j.queue] = true
  else
    redis.call('ZADD', base .. 'waiting', now, j.id)
    for index, p in ipairs(j.parents) do
      local parent_key = dep_job(p[1])
      redis.call('HSET', j.key .. ':deps', p[1], p[2] .. '|' .. index .. '|' .. p[3])
      redis.call('SADD', parent_key .. ':children', j.ref)
      redis.call('HSET', parent_key, 'kids', '1')
    end
    -- Parents that ended already (outside the workflow, or cancelled by an earlier one) count at once.
    for _, p in ipairs(j.parents) do
      local ph = redis.call('HMGET', (dep_job(p[1])), 'state', 'result')
      if DEP_ENDED[ph[1]] then
        if dep_edge_ended(j.key, j.ref, p[1], ph[1], ph[2] or 'null', now, maxlen) then break end
      end
    end
  end
  out[#out + 1] = redis.call('HGET', j.key, 'state')
end
for queue in pairs(woken) do
  redis.call('LPUSH', dep_base(queue) .. 'wake', '1')
  redis.call('LTRIM', dep_base(queue) .. 'wake', 0, 999)
end
if wf_id ~= '' then
  redis.call('HSET', KEYS[1], 'id', wf_id, 'name', name, 'queue', home, 'created_at', now, 'size', n)
  local record = {'HSET', KEYS[1]}
  for k, j in ipairs(jobs) do  -- in slices: unpack has a limit
    record[#record + 1] = 'step:' .. j.step
    record[#record + 1] = j.ref
    if #record >= 2002 or k == #jobs then
      redis.call(unpack(record))
      record = {'HSET', KEYS[1]}
    end
  end
  if keep > 0 then redis.call('PEXPIRE', KEYS[1], keep) end
end
return out
