#!lua
-- Enqueue one or more jobs into one queue.
-- KEYS: ready scheduled unique events wake seq stats idle paused active intake limit
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] inbox key prefix  ARGV[4] number of jobs
-- ARGV[5] '1' when the one job may take the intake (the client made its id; no unique key, not delayed): a
--   batch of one (Client.enqueue_many); Client.enqueue sends such a job to enqueue_one.lua, which costs less
-- then per job: id, task, priority, delay_ms ('' = none), run_at_ms ('' = none), unique_key ('' = none),
--               n (number of extra field/value pairs), then n pairs stored on the job hash.
-- Fields left unset mean their defaults: attempts 0, version 1, no timeout, dead_letter 'save',
-- ready_at = enqueued_at, run_at = enqueued_at.
-- Such a job, while no worker is registered idle, is only appended to the intake (see drain_intake):
-- every worker is busy and will claim again as soon as it reports, so no wake-up is needed, and the
-- producer waits for one XADD instead of the job hash, event and counters.
-- A job due now, on an unpaused queue with nothing else ready, goes straight to an idle worker when one
-- is registered: it is leased here and pushed to that worker's inbox, which its blocking pop is
-- watching, so pick-up costs no claim round trip. Such a job of the intake kind is a leased intake
-- entry (see drain_intake): the lease is durable in one XADD, and the job hash, events and counters are
-- written by the next script that touches the queue (at the latest the worker's heartbeat or ack), after
-- the worker has started it. An idle worker waits for exactly this script, and each Redis call in it
-- costs more on a vCPU that was asleep than back to back, so it makes seven: no pause check (a
-- pause drops the idle set and a paused queue registers none, so a registration means not paused) and
-- no sequence number (the token is the worker and the job's fresh id, unlike any claim's worker:seq).
-- A job of a concurrency group is never handed to an idle worker (it needs one of the group's slots first:
-- claim.lua holds it for claim_group.lua), nor is any job of a queue at its limit of running jobs.
-- Returns per job {id, status, state}; status is 'created', 'exists' (the id is already known:
-- idempotent) or 'duplicate' (the unique key is held by the live job whose id is returned).
-- The one job's intake entry pairs: its task, priority and hash fields.
local function intake_pairs()
  local entry = {'task', ARGV[7], 'priority', ARGV[8]}
  for f = 13, 12 + 2 * tonumber(ARGV[12]) do entry[#entry + 1] = ARGV[f] end
  return entry
end
-- A queue limit (running jobs at once) leaves room for one more: a hand-off may start it.
local function under_limit()
  local limit = tonumber(redis.call('GET', KEYS[12]) or '')
  return not limit or redis.call('ZCARD', KEYS[10]) < limit
end
if ARGV[5] == '1' then
  local waiting = redis.call('XLEN', KEYS[11])
  local top, now = pop_idle(KEYS[8])
  if top then
    if waiting == 0 and redis.call('ZCARD', KEYS[1]) == 0 and under_limit() then
      hand_off_entry(KEYS[11], ARGV[3], cjson.decode(top[1]), ARGV[6], intake_pairs(), now)
      return {{ARGV[6], 'created', RUNNING}}
    end
    redis.call('ZADD', KEYS[8], top[2], top[1])  -- jobs wait ahead of this one: the full path decides
  elseif waiting < INTAKE_MAX then
    redis.call('XADD', KEYS[11], '*', 'id', ARGV[6], unpack(intake_pairs()))
    return {{ARGV[6], 'created', QUEUED}}
  end
end
local prefix, maxlen, inbox_prefix, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local out = {}
local per_task = {}
local woken = 0
local may_hand_off = true  -- until the idle set is found empty (or the queue paused)
drain_intake(KEYS[11], prefix, KEYS[1], KEYS[6], KEYS[4], KEYS[7], KEYS[10], maxlen)  -- earlier jobs go first
local seq = tonumber(redis.call('INCRBY', KEYS[6], n)) - n  -- one sequence block for the whole batch
-- One EXISTS per 500 ids: fresh ids (the usual case) then need no check of their own.
local any_known = false
do
  local batch_keys, j = {}, 6
  for b = 1, n do
    batch_keys[#batch_keys + 1] = prefix .. ARGV[j]
    j = j + 7 + 2 * tonumber(ARGV[j + 6])
    if #batch_keys == 500 or b == n then
      if redis.call('EXISTS', unpack(batch_keys)) > 0 then any_known = true end
      batch_keys = {}
    end
  end
end
local function in_group(first, nfields)
  for f = first, first + 2 * nfields - 1, 2 do
    if ARGV[f] == 'group' then return ARGV[f + 1] ~= '' end
  end
  return false
end
local seen = {}  -- ids earlier in this batch
local ready_adds = {}  -- score, id pairs for one ZADD per 500 jobs
local i = 6
for _ = 1, n do
  local job_id, task, priority = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local delay_ms, run_at_ms, ukey = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local nfields = tonumber(ARGV[i + 6])
  local fields_start = i + 7
  i = fields_start + 2 * nfields
  local job_key = prefix .. job_id
  local holder = false
  if ukey ~= '' then holder = redis.call('HGET', KEYS[3], ukey) end
  if seen[job_id] or (any_known and redis.call('EXISTS', job_key) == 1) then
    out[#out + 1] = {job_id, 'exists', redis.call('HGET', job_key, 'state')}
  elseif holder then
    out[#out + 1] = {holder, 'duplicate', redis.call('HGET', prefix .. holder, 'state') or ''}
  else
    local run_at = now
    if run_at_ms ~= '' then run_at = tonumber(run_at_ms) end
    if delay_ms ~= '' then run_at = now + tonumber(delay_ms) end
    local state = (run_at > now) and SCHEDULED or QUEUED
    local hset = {'HSET', job_key, 'id', job_id, 'task', task, 'priority', priority, 'enqueued_at', now,
                  'state', state}
    if state == SCHEDULED then hset[#hset + 1] = 'run_at'; hset[#hset + 1] = run_at end
    if ukey ~= '' then hset[#hset + 1] = 'unique_key'; hset[#hset + 1] = ukey end
    for f = fields_start, fields_start + 2 * nfields - 1 do hset[#hset + 1] = ARGV[f] end
    if ukey ~= '' then redis.call('HSET', KEYS[3], ukey, job_id) end
    seen[job_id] = true
    emit(KEYS[4], maxlen, job_id, 'enqueued', state)
    per_task[task] = (per_task[task] or 0) + 1
    seq = seq + 1
    local idle = nil
    if state == QUEUED and may_hand_off and not in_group(fields_start, nfields) then
      -- Cheapest test first: while every worker is busy there is no idle set at all.
      if redis.call('EXISTS', KEYS[8]) == 1 and redis.call('ZCARD', KEYS[1]) == 0
          and redis.call('EXISTS', KEYS[9]) == 0 and under_limit() then
        idle = pop_idle_worker(KEYS[8], now)
      end
      may_hand_off = idle ~= nil
    end
    if not idle then redis.call(unpack(hset)) end
    if idle then
      local worker = idle[1]
      local h = {}
      for f = 3, #hset, 2 do h[hset[f]] = tostring(hset[f + 1]) end
      -- lease() writes the job's hash together with its lease: one HSET.
      local leased = lease(job_key, job_id, h, worker, idle[2], idle[3], now, worker .. ':' .. seq, KEYS[10],
                           KEYS[4], maxlen, hset)
      local inbox = inbox_prefix .. worker
      redis.call('RPUSH', inbox, cjson.encode(leased))
      redis.call('PEXPIRE', inbox, 60000)  -- a worker that died leaves no inbox behind for long
      count(KEYS[7], now, 'started', task, 1)  -- waited 0 ms: nothing to add to wait_ms
      out[#out + 1] = {job_id, 'created', RUNNING}
    else
      if state == SCHEDULED then
        redis.call('ZADD', KEYS[2], run_at, job_id)
      else
        ready_adds[#ready_adds + 1] = ready_score(priority, seq)
        ready_adds[#ready_adds + 1] = job_id
      end
      woken = woken + 1  -- scheduled jobs wake workers too, so they recompute when the next one is due
      out[#out + 1] = {job_id, 'created', state}
    end
  end
end
for a = 1, #ready_adds, 1000 do
  redis.call('ZADD', KEYS[1], unpack(ready_adds, a, math.min(a + 999, #ready_adds)))
end
if woken > 0 then
  local tokens = {}
  for t = 1, math.min(woken, 100) do tokens[t] = '1' end
  if redis.call('LPUSH', KEYS[5], unpack(tokens)) > 1000 then redis.call('LTRIM', KEYS[5], 0, 999) end
end
for task, c in pairs(per_task) do count(KEYS[7], now, 'enqueued', task, c) end
return out
