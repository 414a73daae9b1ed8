#!lua
-- Create a workflow: jobs and the edges between them, all or nothing (core/workflows.py, lua/_deps.lua).
-- Also a plain enqueue with depends_on (one job, parents outside; no workflow record).
-- KEYS: wf_record
-- USES: deps
-- ARGV[1] workflow id ('' = none: a depends_on enqueue)  ARGV[2] name  ARGV[3] events maxlen
-- ARGV[4] home queue (where the record lives)  ARGV[5] keep ms (the record's expiry)  ARGV[6] number of jobs
-- ARGV[7] '' (the whole workflow, one Redis or one slot) or 'part' (Cluster: this queue's part of a workflow that
--   spans slots, workflow_parts.lua: no record; the roots are held waiting until the workflow opens; parents in
--   other queues are its members, named after the jobs: their number and refs, then the number and
--   (parent id here, child ref there) pairs of the links from this queue's jobs to other queues)
-- then per job, parents before their dependents: queue, id, task, priority, delay_ms ('' none), run_at_ms
--   ('' none), step name, pass ('' | 'dict' | 'one' | 'list'), splice_at ('' none), when ('' | 'failure'),
--   number of parents, then per
--   parent: its ref ("<queue>|<id>"), policy ('cancel' | 'run'), its step name ('' outside the workflow);
--   then n (number of extra field/value pairs) and n pairs stored on the job hash.
-- Checks first, writes after: a job id already taken, or a parent outside the workflow that does not exist,
-- refuses the whole call and nothing is written. A root (no parents) is queued (or scheduled); a dependent waits
-- ('waiting') until its parents end; a parent outside that already ended counts at once. A dependent's
-- delay counts from its release.
-- Returns {'created', state per job...}, {'exists'} (the workflow id is known: a repeated call), or
-- {'taken', id} / {'missing', parent ref, job id}; a part placed already answers {'placed'}.
local wf_id, name, maxlen, home, keep, n = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local part = ARGV[7] == 'part'
if wf_id ~= '' and not part and redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local jobs, mine, remote = {}, {}, {}
local i = 8
for _ = 1, n do
  local j = {queue = ARGV[i], id = ARGV[i + 1], task = ARGV[i + 2], priority = ARGV[i + 3], delay = ARGV[i + 4],
             run_at = ARGV[i + 5], step = ARGV[i + 6], pass = ARGV[i + 7], splice = ARGV[i + 8], when = ARGV[i + 9],
             parents = {}}
  local np = tonumber(ARGV[i + 10])
  i = i + 11
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
local links_at = i
if part then
  if redis.call('HGET', jobs[1].key, 'workflow') == wf_id then return {'placed'} end  -- a repeated call
  for r = i + 1, i + tonumber(ARGV[i]) do
    remote[ARGV[r]] = true
    mine[ARGV[r]] = true
  end
  links_at = i + 1 + tonumber(ARGV[i])
end
-- Every queue involved drains its intake first: a parent outside may still be an intake entry, and jobs
-- accepted before these go ahead of them (FIFO).
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
    for _, p in ipairs(j.parents) do
      if not remote[p[1]] then drain(string.match(p[1], '^([^|]+)|')) end
    end
  end
end
-- Checks: one EXISTS per 500 new ids (a taken one is then looked for), every parent outside the workflow.
for first = 1, #jobs, 500 do
  local batch = {}
  for k = first, math.min(first + 499, #jobs) do batch[#batch + 1] = jobs[k].key end
  if redis.call('EXISTS', unpack(batch)) > 0 then
    for k = first, math.min(first + 499, #jobs) do
      if redis.call('EXISTS', jobs[k].key) == 1 then return {'taken', jobs[k].id} end
    end
  end
end
for _, j in ipairs(jobs) do
  for _, p in ipairs(j.parents) do
    if not mine[p[1]] and not redis.call('HGET', (dep_job(p[1])), 'state') then return {'missing', p[1], j.id} end
  end
end
local now = now_ms()
local out = {'created'}
local woken, ready, counts, has_kids = {}, {}, {}, {}
for _, j in ipairs(jobs) do  -- a parent in this call gets its kids flag with its own hash
  for _, p in ipairs(j.parents) do
    if mine[p[1]] then has_kids[p[1]] = true end
  end
end
local state_of = {}  -- a job of this call by ref: its state as written
local extra = {'workflow', wf_id}
for _, j in ipairs(jobs) do
  local base = dep_base(j.queue)
  local state = WAITING
  local run_at = nil
  if j.run_at ~= '' then run_at = tonumber(j.run_at) end
  local held = part and #j.parents == 0  -- a root of a part: released when the workflow opens
  if #j.parents == 0 and not held then
    if j.delay ~= '' then run_at = now + tonumber(j.delay) end
    state = (run_at and run_at > now) and SCHEDULED or QUEUED
  end
  local hset = {'HSET', j.key, 'id', j.id, 'task', j.task, 'priority', j.priority, 'enqueued_at', now, 'state', state}
  local function put(field, value) hset[#hset + 1] = field; hset[#hset + 1] = value end
  if wf_id ~= '' then put('workflow', wf_id); put('workflow_queue', home) end
  if j.step ~= '' then put('step', j.step) end
  if has_kids[j.ref] then put('kids', '1') end
  if run_at then put('run_at', run_at) end
  if held then
    put('held', '1')
    if j.delay ~= '' then put('release_delay', j.delay) end
  end
  if #j.parents > 0 then
    put('deps_n', #j.parents)
    if j.delay ~= '' then put('release_delay', j.delay) end
    if j.pass ~= '' then put('pass', j.pass) end
    if j.splice ~= '' then put('splice_at', j.splice) end
    if j.when ~= '' then put('when', j.when) end
  end
  for f = j.fields[1], j.fields[2] do hset[#hset + 1] = ARGV[f] end
  redis.call(unpack(hset))
  emit(base .. 'events', maxlen, j.id, 'enqueued', state, extra)
  local field = j.queue .. '|' .. j.task
  counts[field] = (counts[field] or 0) + 1
  if state == QUEUED then
    ready[j.queue] = ready[j.queue] or {}
    local r = ready[j.queue]
    r[#r + 1] = {j.priority, j.id}
    woken[j.queue] = true
  elseif state == SCHEDULED then
    redis.call('ZADD', base .. 'scheduled', run_at, j.id)
    woken[j.queue] = true
  else
    redis.call('ZADD', base .. 'waiting', now, j.id)
    local deps = {'HSET', j.key .. ':deps'}
    local ended = {}  -- parents that ended already (outside the workflow, or cancelled by an earlier one)
    for index, p in ipairs(j.parents) do
      local parent_key = dep_job(p[1])
      deps[#deps + 1] = p[1]
      deps[#deps + 1] = p[2] .. '|' .. index .. '|' .. p[3]
      if #deps >= 2002 then  -- in slices: unpack has a limit
        redis.call(unpack(deps))
        deps = {'HSET', j.key .. ':deps'}
      end
      if not remote[p[1]] then  -- a parent in another queue gets its link from its own part
        redis.call('SADD', parent_key .. ':children', j.ref)
        if not has_kids[p[1]] then
          redis.call('HSET', parent_key, 'kids', '1')
          has_kids[p[1]] = true
        end
        local known = state_of[p[1]]
        if not known or DEP_ENDED[known] then ended[#ended + 1] = p[1] end
      end
    end
    if #deps > 2 then redis.call(unpack(deps)) end
    for _, ref in ipairs(ended) do  -- every one recorded, also after one cancelled it (a resubmit undoes that)
      local ph = redis.call('HMGET', (dep_job(ref)), 'state', 'result')
      if DEP_ENDED[ph[1]] then dep_edge_ended(j.key, j.ref, ref, ph[1], ph[2] or 'null', now, maxlen) end
    end
    if #ended > 0 then state = redis.call('HGET', j.key, 'state') end
  end
  state_of[j.ref] = state
  out[#out + 1] = state
end
if part then  -- links to children in other queues: what reaches them goes through the outbox (lua/_deps.lua)
  for r = links_at + 1, links_at + 2 * tonumber(ARGV[links_at]), 2 do
    local parent_key = dep_base(jobs[1].queue) .. 'job:' .. ARGV[r]
    redis.call('SADD', parent_key .. ':children', '>' .. ARGV[r + 1])
    redis.call('HSET', parent_key, 'kids', '1')
  end
end
for queue, jobs_ready in pairs(ready) do
  local base = dep_base(queue)
  local last = redis.call('INCRBY', base .. 'seq', #jobs_ready)
  local zadd = {'ZADD', base .. 'ready'}
  for k, r in ipairs(jobs_ready) do
    zadd[#zadd + 1] = ready_score(r[1], last - #jobs_ready + k)
    zadd[#zadd + 1] = r[2]
    if #zadd >= 2002 or k == #jobs_ready then
      redis.call(unpack(zadd))
      zadd = {'ZADD', base .. 'ready'}
    end
  end
end
for field, c in pairs(counts) do
  local queue, task = string.match(field, '^([^|]+)|(.*)$')
  count(dep_base(queue) .. 'stats', now, 'enqueued', task, c)
end
for queue in pairs(woken) do
  redis.call('LPUSH', dep_base(queue) .. 'wake', '1')
  redis.call('LTRIM', dep_base(queue) .. 'wake', 0, 999)
end
if wf_id ~= '' and not part then
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
