#!lua flags=allow-oom
-- Claim up to N ready jobs under a lease, after promoting due scheduled jobs.
-- KEYS: ready scheduled active paused events wake seq stats intake idle inbox limit completed unique
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] count  ARGV[4] worker id  ARGV[5] host  ARGV[6] pid
-- ARGV[7] the worker's idle registration  ARGV[8] ms it stays valid (0: do not register)
-- ARGV[9] finished-job ttl ms  ARGV[10] number of acks, then per ack: id, token, result (JSON), runtime_ms
-- The worker's acks of this queue's finished jobs come with its next claim and are applied first, as
-- complete.lua would (complete_jobs): one script call a round trip, where a job that keeps up took two.
-- Jobs a fast enqueue left in the intake become ready jobs first (drain_intake), in the ready set as always, but
-- their hashes are written only after the claim has popped: one it leases has its hash written once, its fields
-- and lease in one HSET (no HSET, then HMGET, then lease HSET); the others' are written before the script ends.
-- Jobs an enqueue handed straight to this worker (its inbox) come first and do not count against N.
-- When the ready set runs dry before N, the worker is registered as idle, so that the next enqueue can
-- lease its job to this worker directly (no claim round trip) and push it to the worker's inbox.
-- A job of a concurrency group is not leased here: it moves to its group's held set (held_key), where a
-- worker holding one of the group's slots claims it (claim_group.lua); the claim goes on popping, so jobs
-- waiting for a slot never hold up the others. A queue limit (`limit`: running jobs of the queue at once,
-- across workers) caps N, and a worker is never registered idle on a limited queue at its limit.
-- Returns {now_ms, next_due_ms (-1 when nothing is scheduled), groups with held jobs, the acks' answers (as
-- complete.lua's), then per job LEASE_WIDTH values, flat: id, token, task, attempt, max_retries, params,
-- lease_ms, timeout_ms, checkpoint, leased_at (what leased_reply() holds; core/results.py decode_leases). A flat
-- reply builds no table per job, in Lua nor in the reply's conversion; the leasing is lease()'s inline, with the
-- job's fields in locals and one ZADD of `active`.
local prefix, maxlen, want = ARGV[1], ARGV[2], tonumber(ARGV[3])
local worker, host, pid = ARGV[4], ARGV[5], ARGV[6]
local idle_key, inbox_key, member, idle_ms = KEYS[10], KEYS[11], ARGV[7], tonumber(ARGV[8] or 0)
local now = now_ms()
local out = {now, -1, {}, {}}
-- First, so that a job handed to this worker's inbox as a leased intake entry has its hash to check (and to
-- acknowledge).
local deferred = {}  -- job id -> the HSET of the job hash of a plain intake entry, not yet run
drain_intake(KEYS[9], prefix, KEYS[1], KEYS[7], KEYS[5], KEYS[8], KEYS[3], maxlen, deferred)
local acks = tonumber(ARGV[10] or 0)
if acks > 0 then
  -- Deferred hashes are queued jobs'; an acked job ran, so its hash has been written.
  out[4] = complete_jobs(KEYS[3], KEYS[13], KEYS[14], KEYS[5], KEYS[8], prefix, maxlen, tonumber(ARGV[9]), now, ARGV,
                         11, acks)
end
if idle_key then
  redis.call('ZREM', idle_key, member)
  -- Registrations of workers killed while idle would otherwise linger until an enqueue pops them, and while
  -- any is there a single enqueue cannot take the intake.
  redis.call('ZREMRANGEBYSCORE', idle_key, '-inf', now)
  local handed = redis.call('LRANGE', inbox_key, 0, -1)
  if #handed > 0 then
    redis.call('DEL', inbox_key)
    for _, payload in ipairs(handed) do
      local leased = cjson.decode(payload)  -- as lease() returned it: id, token, ...
      local current = redis.call('HMGET', prefix .. leased[1], 'token', 'state')
      if current[1] == leased[2] and current[2] == RUNNING then
        for f = 1, LEASE_WIDTH do out[#out + 1] = leased[f] end
      end
    end
  end
end
-- The earliest scheduled job first: when it is not due yet (the common case) nothing is promoted, and it is the
-- next due time the reply names (one ZRANGE instead of promote_due's and a second one at the end).
local earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #earliest > 0 and tonumber(earliest[2]) <= now then
  promote_due(prefix, KEYS[2], KEYS[1], KEYS[7], KEYS[6], KEYS[5], maxlen, now, 1000)
  earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
end
if #earliest > 0 then out[2] = tonumber(earliest[2]) end
local paused = redis.call('EXISTS', KEYS[4]) == 1
local limit = tonumber(redis.call('GET', KEYS[12]) or '')
if limit then want = math.min(want, limit - redis.call('ZCARD', KEYS[3])) end
local claimed, parked = 0, 0
local dry = false  -- a ZPOPMIN below found the ready set emptied (fewer jobs than asked)
local ids, attempts = {}, {}  -- one 'started' event for the jobs of this claim (emit_jobs)
local deadlines = {}  -- the active set's ZADD pairs (deadline, id): one ZADD for the claim
local waited, hist = {}, {}  -- per task: ms waited, jobs by wait bucket
local slots = nil  -- LEASE_FIELDS' positions by name, for the intake's jobs
if next(deferred) then
  slots = {}
  for f = 1, #LEASE_FIELDS do slots[LEASE_FIELDS[f]] = f end
end
while not paused and claimed < want and parked < PARK_MAX do
  local asked = want - claimed
  local popped = redis.call('ZPOPMIN', KEYS[1], asked)
  local n = #popped / 2
  dry = n < asked
  if n == 0 then break end
  -- One block of the queue's sequence numbers makes every lease token unique.
  local seq = tonumber(redis.call('INCRBY', KEYS[7], n)) - n
  for p = 1, #popped, 2 do
    local job_id = popped[p]
    local job_key = prefix .. job_id
    local hset = deferred[job_id]
    -- The job's LEASE_FIELDS as locals (false or nil when unset): no table per job.
    local task, tries, max_retries, params, lease_ms, timeout_ms, checkpoint, ready_at, enqueued_at, group, ukey, until_
    if hset then  -- an intake entry's: its pairs picked by name into one presized array, not a table by name
      local v = {false, false, false, false, false, false, false, false, false, false, false, false}
      for f = 3, #hset, 2 do
        local slot = slots[hset[f]]
        if slot then v[slot] = hset[f + 1] end
      end
      task, tries, max_retries, params, lease_ms, timeout_ms, checkpoint, ready_at, enqueued_at, group, ukey, until_ =
        unpack(v)
    else
      task, tries, max_retries, params, lease_ms, timeout_ms, checkpoint, ready_at, enqueued_at, group, ukey, until_ =
        unpack(redis.call('HMGET', job_key, 'task', 'attempts', 'max_retries', 'params', 'lease_ms', 'timeout_ms',
                          'checkpoint', 'ready_at', 'enqueued_at', 'group', 'unique_key', 'unique_until'))
    end
    if not task then  -- gone (deleted while queued): nothing to lease
    elseif group and group ~= '' then
      redis.call('ZADD', held_key(KEYS[1], group), popped[p + 1], job_id)
      redis.call('SADD', groups_key(KEYS[1]), group)
      parked = parked + 1
    else
      -- lease() inline (it builds a reply table per job; this claim's reply is flat).
      seq = seq + 1
      local token = worker .. ':' .. seq
      local attempt = (tonumber(tries) or 0) + 1
      if hset then
        deferred[job_id] = nil  -- written here, fields and lease in one HSET
        local values, m = {lease_values(attempt, token, worker, host, pid, now)}, #hset
        for f = 1, #values do hset[m + f] = values[f] end
        redis.call(unpack(hset))
      else
        redis.call('HSET', job_key, lease_values(attempt, token, worker, host, pid, now))
      end
      lease_ms = lease_ms or '30000'
      deadlines[#deadlines + 1] = now + tonumber(lease_ms)
      deadlines[#deadlines + 1] = job_id
      if until_ == 'start' and ukey and ukey ~= '' then
        -- Unique until it starts: the key is free again from the lease on, if this job still holds it.
        local unique_key = string.sub(KEYS[3], 1, -7) .. 'unique'
        if redis.call('HGET', unique_key, ukey) == job_id then redis.call('HDEL', unique_key, ukey) end
      end
      claimed = claimed + 1
      ids[claimed], attempts[claimed] = job_id, attempt
      -- The lease, flat in the reply (LEASE_WIDTH values, as leased_reply orders them).
      local o = #out
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = job_id, token, task, attempt, max_retries or '0'
      out[o + 6], out[o + 7], out[o + 8], out[o + 9], out[o + 10] = params or '{}', lease_ms, timeout_ms or '',
                                                                    checkpoint or '', now
      task = task or ''
      tally(hist, task, now - (tonumber(ready_at) or tonumber(enqueued_at) or now), waited)
    end
  end
  if n < asked then break end  -- the ready set ran dry: no need to ask again
end
for a = 1, #deadlines, 1000 do
  redis.call('ZADD', KEYS[3], unpack(deadlines, a, math.min(a + 999, #deadlines)))
end
for _, hset in pairs(deferred) do redis.call(unpack(hset)) end  -- the intake's jobs not leased here
emit_jobs(KEYS[5], maxlen, ids, 'started', RUNNING, {'worker', worker}, {attempt = attempts})
if claimed > 0 then
  -- The wait histogram counts the jobs started too: readers add it to 'started' (core/metrics.py).
  local minute = math.floor(now / 60000) .. '|'
  for task, th in pairs(hist) do
    redis.call('HINCRBY', KEYS[8], minute .. 'wait_ms|' .. task, waited[task])
    for b, c in pairs(th) do redis.call('HINCRBY', KEYS[8], minute .. 'wait_h:' .. b .. '|' .. task, c) end
  end
end
if dry or redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[6])
  if idle_key and idle_ms > 0 and not paused and claimed < want and want > 0 then
    redis.call('ZADD', idle_key, now + idle_ms, member)
  end
end
out[3] = redis.call('SMEMBERS', groups_key(KEYS[1]))
return out
