-- Shared helpers, prepended to every script by scripts.py.
-- Every time comes from Redis TIME (milliseconds), never from a client clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Ready-set score: lower priority value first, FIFO (per-queue sequence) within a priority.
-- |priority| <= 1000 and seq < 1e12 keep every score an exact integer in a double.
local function ready_score(priority, seq)
  return tonumber(priority) * 1000000000000 + (seq % 1000000000000)
end

-- Append one event to the queue's stream, for the mirror (bounded, approximate trim).
local function emit(events_key, maxlen, job_id, event, state, extra)
  if not extra then  -- the common case (every enqueue) without building a table
    redis.call('XADD', events_key, 'MAXLEN', '~', maxlen, '*', 'job', job_id, 'event', event, 'state', state)
    return
  end
  local args = {'XADD', events_key, 'MAXLEN', '~', maxlen, '*', 'job', job_id, 'event', event, 'state', state}
  for i = 1, #extra do args[#args + 1] = extra[i] end
  redis.call(unpack(args))
end

-- One event for many jobs: a script that moves several jobs through the same transition (an intake drain, a
-- claim, an acknowledgement of a batch) appends one entry for up to EVENT_BATCH of them instead of one each,
-- so Redis writes, and the mirror reads and acknowledges, one entry per batch. Such an entry holds `jobs` (a
-- JSON list of ids) in place of `job`; `per_job` fields are JSON lists in the same order (the batch form of
-- `attempt` is `attempts`); `shared` pairs apply to every job. A single job keeps the one-job form (`job`, and
-- `per_job` values as they are). core/queries/events.py turns a batch entry back into one event per job.
local EVENT_BATCH = 50
local function emit_jobs(events_key, maxlen, jobs, event, state, shared, per_job)
  local n = #jobs
  if n == 0 then return end
  if n == 1 then
    local extra = {}
    for name, values in pairs(per_job or {}) do
      extra[#extra + 1] = name
      extra[#extra + 1] = values[1]
    end
    for i = 1, #(shared or {}) do extra[#extra + 1] = shared[i] end
    emit(events_key, maxlen, jobs[1], event, state, (#extra > 0) and extra or nil)
    return
  end
  for first = 1, n, EVENT_BATCH do
    local last = math.min(first + EVENT_BATCH - 1, n)
    local args = {'XADD', events_key, 'MAXLEN', '~', maxlen, '*', 'jobs', cjson.encode({unpack(jobs, first, last)}),
                  'event', event, 'state', state}
    for i = 1, #(shared or {}) do args[#args + 1] = shared[i] end
    for name, values in pairs(per_job or {}) do
      args[#args + 1] = name .. 's'
      args[#args + 1] = cjson.encode({unpack(values, first, last)})
    end
    redis.call(unpack(args))
  end
end

-- Per-minute counters: one hash per queue, field "<minute>|<metric>|<task>" (core/metrics.py names them).
local function count(stats_key, now, metric, task, by)
  local minute = math.floor(now / 60000)
  redis.call('HINCRBY', stats_key, minute .. '|' .. metric .. '|' .. task, by or 1)
end

-- Latency histograms (core/metrics.py): the bucket of a duration in ms. 0: under 1 ms; i: [2^(i-1), 2^i) ms;
-- HIST_LAST: 2^(HIST_LAST-1) ms and over. frexp gives the binary exponent exactly (no log rounding). A script
-- call adds one HINCRBY per task and bucket it touched, not one per job: claim's waits and complete_jobs' run
-- times are tallied per call (tally), then written with the minute's field head made once.
local function hist_bucket(ms)
  if ms < 1 then return 0 end
  local _, e = math.frexp(ms)
  if e > HIST_LAST then return HIST_LAST end
  return e
end
-- One job's `ms` into its task's histogram (`hist[task][bucket]`, a count) and, given `sums`, its total.
local function tally(hist, task, ms, sums)
  local th = hist[task]
  if not th then
    th = {}
    hist[task] = th
  end
  local b = hist_bucket(ms)
  th[b] = (th[b] or 0) + 1
  if sums then sums[task] = (sums[task] or 0) + ms end
end

-- Note a job's n-th retry in the minute's highest retry number of its task (a maximum, not a sum).
local function note_retry(stats_key, now, task, n)
  local field = math.floor(now / 60000) .. '|retry_max|' .. task
  if n > (tonumber(redis.call('HGET', stats_key, field)) or 0) then redis.call('HSET', stats_key, field, n) end
end

-- Put a job back on the ready set and wake one idle worker. `front`: ahead of every job of its priority, for a
-- job that was taken off the queue in its turn and is given back without having run to an end (its worker died,
-- stopped or never started it), so that it runs again next rather than after the backlog enqueued since; such jobs
-- share sequence 0 and among themselves run oldest id first (the set orders equal scores by member).
local function make_ready(job_key, job_id, ready_key, seq_key, wake_key, now, front)
  local priority = redis.call('HGET', job_key, 'priority') or '0'
  local seq = front and 0 or redis.call('INCR', seq_key)
  redis.call('ZADD', ready_key, ready_score(priority, seq), job_id)
  redis.call('HSET', job_key, 'state', QUEUED, 'ready_at', now)
  redis.call('LPUSH', wake_key, '1')
  redis.call('LTRIM', wake_key, 0, 999)
end

-- Release a unique key only if this job holds it (`ukey`: the job's unique_key, when already read).
local function release_unique(unique_key, job_key, job_id, ukey)
  ukey = ukey or redis.call('HGET', job_key, 'unique_key')
  if ukey and ukey ~= '' and redis.call('HGET', unique_key, ukey) == job_id then
    redis.call('HDEL', unique_key, ukey)
  end
end

-- The attempt history entry of the running attempt, closed now with an outcome. `f`: the job's
-- attempts, worker, host, pid and started_at, when the caller has already read them.
local function close_attempt(job_key, now, outcome, err, f)
  f = f or redis.call('HMGET', job_key, 'attempts', 'worker', 'host', 'pid', 'started_at')
  local entry = {
    attempt = tonumber(f[1]) or 0, worker = f[2] or '', host = f[3] or '', pid = tonumber(f[4]) or 0,
    started_at = tonumber(f[5]) or 0, ended_at = now, outcome = outcome,
  }
  if err then
    for k, v in pairs(err) do entry[k] = v end
  end
  local encoded = cjson.encode(entry)
  redis.call('RPUSH', job_key .. ':attempts', encoded)
  return encoded
end

-- Promote due scheduled jobs (delays and retry backoffs) to the ready set.
local function promote_due(prefix, scheduled_key, ready_key, seq_key, wake_key, events_key, maxlen, now, limit)
  local due = redis.call('ZRANGE', scheduled_key, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  local promoted = {}  -- one 'promoted' event for them (emit_jobs)
  for _, job_id in ipairs(due) do
    redis.call('ZREM', scheduled_key, job_id)
    local job_key = prefix .. job_id
    if redis.call('EXISTS', job_key) == 1 then
      make_ready(job_key, job_id, ready_key, seq_key, wake_key, now)
      promoted[#promoted + 1] = job_id
    end
  end
  emit_jobs(events_key, maxlen, promoted, 'promoted', QUEUED)
  return #due
end

-- Terminal sets keep finished jobs listable until retention trims them.
local function finish(job_key, ttl_ms)
  if tonumber(ttl_ms) > 0 then
    redis.call('PEXPIRE', job_key, ttl_ms)
    redis.call('PEXPIRE', job_key .. ':attempts', ttl_ms)
  end
end

-- Lease a job to a worker: the claim's bookkeeping, shared by claim (a worker asks) and enqueue (the
-- job goes straight to an idle worker). `h` holds the job's LEASE_FIELDS. Returns what the worker needs
-- to run it, in this order (strings, '' when unset): id, token, task, attempt, max_retries, params,
-- lease_ms, timeout_ms, checkpoint, leased_at (Redis ms: when the lease began, so that a worker that reads
-- the reply late, or picks a handed-off job from its inbox, knows how much of the lease is already gone).
local LEASE_FIELDS = {'task', 'attempts', 'max_retries', 'params', 'lease_ms', 'timeout_ms', 'checkpoint',
                      'ready_at', 'enqueued_at', 'group', 'unique_key', 'unique_until'}
-- `hset`, when given, is an HSET of the job's other fields still to be written (a new job): its fields go
-- in the same command, the lease's last so that they win (HSET sets repeated fields in order).
local LEASE_WIDTH = 10  -- values per lease; claim and claim_group return them flat, one run per job
local function leased_reply(job_id, token, h, attempt, now)
  return {job_id, token, h.task or '', tostring(attempt), h.max_retries or '0', h.params or '{}',
          h.lease_ms or '30000', h.timeout_ms or '', h.checkpoint or '', tostring(now)}
end
local function lease_values(attempt, token, worker, host, pid, now)
  return 'attempts', attempt, 'state', RUNNING, 'token', token, 'worker', worker, 'host', host, 'pid', pid,
         'started_at', now, 'heartbeat_at', now, 'cancel_requested', 0
end
-- Hand a due job of the intake kind to the idle worker `idle` (its registration: worker id, host, pid): one
-- leased intake entry (`pairs`, the entry's field/value pairs, then the lease; drain_intake makes it the job's
-- hash) and the lease pushed to the worker's inbox, which its blocking pop is watching (enqueue, enqueue_one).
-- The freshest idle registration popped (ZPOPMAX: the score is the ms it is valid until) and Redis's time now; nil
-- when there is none valid. A lapsed freshest one means every one has lapsed: the set is dropped. The caller hands
-- a job to it (hand_off_entry) or puts it back.
local function pop_idle(idle_key)
  local top = redis.call('ZPOPMAX', idle_key)
  if #top == 0 then return nil end
  local now = now_ms()
  if tonumber(top[2]) < now then
    redis.call('DEL', idle_key)
    return nil
  end
  return top, now
end
local function hand_off_entry(intake_key, inbox_prefix, idle, job_id, pairs, now)
  local worker = idle[1]
  local entry, h = {'XADD', intake_key, '*', 'leased', job_id}, {}
  for f = 1, #pairs - 1, 2 do
    entry[#entry + 1] = pairs[f]
    entry[#entry + 1] = pairs[f + 1]
    h[pairs[f]] = pairs[f + 1]
  end
  local attempt = (tonumber(h.attempts) or 0) + 1
  local token = worker .. ':' .. job_id
  local values = {lease_values(attempt, token, worker, idle[2], idle[3], now)}
  for v = 1, #values do entry[#entry + 1] = values[v] end
  redis.call(unpack(entry))
  local inbox = inbox_prefix .. worker
  redis.call('RPUSH', inbox, cjson.encode(leased_reply(job_id, token, h, attempt, now)))
  redis.call('PEXPIRE', inbox, 60000)  -- a worker that died leaves no inbox behind for long
end
-- `started`, when given ({ids = {}, attempts = {}}), collects the job's 'started' event for the caller to emit
-- with the others of its call (emit_jobs) instead of emitting it here.
local function lease(job_key, job_id, h, worker, host, pid, now, token, active_key, events_key, maxlen, hset, started)
  local attempt = (tonumber(h.attempts) or 0) + 1
  if hset then
    local values, n = {lease_values(attempt, token, worker, host, pid, now)}, #hset
    for f = 1, #values do hset[n + f] = values[f] end
    redis.call(unpack(hset))
  else  -- a claim: no table built per job
    redis.call('HSET', job_key, lease_values(attempt, token, worker, host, pid, now))
  end
  redis.call('ZADD', active_key, now + tonumber(h.lease_ms or 30000), job_id)
  if h.unique_until == 'start' and h.unique_key and h.unique_key ~= '' then
    -- Unique until it starts: the key is free again from the lease on (the queue's `unique` hash, beside
    -- `active` in its slot), if this job still holds it.
    local unique_key = string.sub(active_key, 1, -7) .. 'unique'
    if redis.call('HGET', unique_key, h.unique_key) == job_id then redis.call('HDEL', unique_key, h.unique_key) end
  end
  if started then
    started.ids[#started.ids + 1] = job_id
    started.attempts[#started.attempts + 1] = attempt
  else
    emit(events_key, maxlen, job_id, 'started', RUNNING, {'attempt', attempt, 'worker', worker})
  end
  return leased_reply(job_id, token, h, attempt, now)
end

-- A job's LEASE_FIELDS as a table (fields it does not have are nil), or nil when the job is gone.
local function lease_fields(job_key)
  local values = redis.call('HMGET', job_key, unpack(LEASE_FIELDS))
  if not values[1] then return nil end
  local h = {}
  for f = 1, #LEASE_FIELDS do h[LEASE_FIELDS[f]] = values[f] or nil end
  return h
end

-- Take the most recent still-valid registration of an idle worker, or nil. A registration is the
-- JSON [worker id, host, pid], scored by the Redis time (ms) it is valid until.
local function pop_idle_worker(idle_key, now)
  local top = redis.call('ZPOPMAX', idle_key)
  if #top == 0 then return nil end
  if tonumber(top[2]) < now then
    redis.call('DEL', idle_key)  -- the freshest one has lapsed, so every one has
    return nil
  end
  return cjson.decode(top[1])
end

-- The intake: a single enqueue made while no worker waits for work appends its job to the queue's
-- intake stream (one XADD) instead of writing the job hash, event and stats itself. Whatever next
-- touches the queue (a claim, an enqueue of the full kind, maintenance, an operator's read) turns the
-- entries into jobs here first, in the order they were accepted, so nothing downstream sees a
-- difference. An entry's id is the Redis time of its acceptance: that is the job's enqueued_at.
-- An entry is 'id', id, 'task', task, 'priority', priority, then the job hash's other field pairs.
-- A leased entry is a job an enqueue handed straight to an idle worker (see enqueue.lua): it starts
-- 'leased', id instead, and its pairs end with the lease (lease_values), so it becomes a running job
-- under that lease, in the active set, exactly as if the enqueue had written it. Every script that acts
-- on a running job by id (complete, fail, heartbeat, drop, release, release_orphans, claim's inbox check)
-- drains first, so none of them can miss one.
-- `defer` (claim.lua): a table that gets, per plain entry's job id, the HSET of its job hash instead of running
-- it, so that a claim leasing that job writes its hash once, fields and lease together; the caller runs the
-- HSETs of the others before its script ends (nothing else reads their hashes in between).
local INTAKE_MAX = 1000  -- enqueue_one.lua refuses a job once this many wait; a plain append drains then
local function drain_intake_once(intake_key, prefix, ready_key, seq_key, events_key, stats_key, active_key, maxlen,
                                 defer)
  local entries = redis.call('XRANGE', intake_key, '-', '+', 'COUNT', INTAKE_MAX)
  local n = #entries
  if n == 0 then return 0 end
  local seq = tonumber(redis.call('INCRBY', seq_key, n)) - n
  local adds, counts, enqueued = {}, {}, {}
  for e = 1, n do
    local entry_id, fields = entries[e][1], entries[e][2]
    local at = tonumber(string.match(entry_id, '^%d+'))
    local job_id, task, priority = fields[2], fields[4], fields[6]
    if defer and fields[1] ~= 'leased' then
      defer[job_id] = {'HSET', prefix .. job_id, 'enqueued_at', at, 'state', QUEUED, 'id', job_id, unpack(fields, 3)}
    else
      redis.call('HSET', prefix .. job_id, 'enqueued_at', at, 'state', QUEUED, 'id', job_id, unpack(fields, 3))
    end
    local minute = math.floor(at / 60000)
    if fields[1] == 'leased' then
      -- A handed job's events in their order (its 'started' after its 'enqueued'), those before it first.
      emit_jobs(events_key, maxlen, enqueued, 'enqueued', QUEUED)
      enqueued = {}
      emit(events_key, maxlen, job_id, 'enqueued', QUEUED)
      local h = {}
      for f = 7, #fields - 1, 2 do h[fields[f]] = fields[f + 1] end
      redis.call('ZADD', active_key, tonumber(h.started_at) + tonumber(h.lease_ms or 30000), job_id)
      emit(events_key, maxlen, job_id, 'started', RUNNING, {'attempt', h.attempts, 'worker', h.worker})
      local started = minute .. '|started|' .. task  -- waited 0 ms: nothing to add to wait_ms
      counts[started] = (counts[started] or 0) + 1
    else
      enqueued[#enqueued + 1] = job_id
      seq = seq + 1
      adds[#adds + 1] = ready_score(priority, seq)
      adds[#adds + 1] = job_id
    end
    local field = minute .. '|enqueued|' .. task
    counts[field] = (counts[field] or 0) + 1
  end
  emit_jobs(events_key, maxlen, enqueued, 'enqueued', QUEUED)
  if #adds > 0 then redis.call('ZADD', ready_key, unpack(adds)) end
  -- The drained entries are the oldest ones: cut them off the head (much cheaper than XDEL of each id).
  if redis.call('XLEN', intake_key) == n then
    redis.call('DEL', intake_key)
  else
    local ms, sq = string.match(entries[n][1], '^(%d+)-(%d+)$')
    redis.call('XTRIM', intake_key, 'MINID', ms .. '-' .. (tonumber(sq) + 1))
  end
  for field, c in pairs(counts) do redis.call('HINCRBY', stats_key, field, c) end
  return n
end
-- Every entry, INTAKE_MAX at a time: producers appending by plain XADD (Store.append_intake) drain once they
-- see INTAKE_MAX entries, so the intake can hold a few more, one per producer appending at that moment.
local function drain_intake(intake_key, prefix, ready_key, seq_key, events_key, stats_key, active_key, maxlen, defer)
  local total, n = 0, INTAKE_MAX
  while n == INTAKE_MAX do
    n = drain_intake_once(intake_key, prefix, ready_key, seq_key, events_key, stats_key, active_key, maxlen, defer)
    total = total + n
  end
  return total
end
-- drain_intake with its keys from KEYS[first..first+5]: intake, ready, seq, events, stats, active
-- (QueueKeys.drain_keys), the block a script that acts on a job by id takes last.
local function drain_intake_at(first, prefix, maxlen)
  return drain_intake(KEYS[first], prefix, KEYS[first + 1], KEYS[first + 2], KEYS[first + 3], KEYS[first + 4],
                      KEYS[first + 5], maxlen)
end

-- Concurrency groups (core/groups.py). A job of a group that a claim meets waits in its queue's held set of
-- that group (`<queue tag>:held:<group>`, scored like the ready set, in the queue's slot) until a worker
-- holding one of the group's slots claims it there (claim_group.lua); `<queue tag>:groups` lists the groups
-- with held jobs. Both are built from the ready key, so they share its hash tag.
local PARK_MAX = 1000  -- a claim moves at most this many group jobs aside per call (bounded script time)
local function held_key(ready_key, group)
  return string.sub(ready_key, 1, -6) .. 'held:' .. group
end
local function groups_key(ready_key)
  return string.sub(ready_key, 1, -6) .. 'groups'
end
-- Take a waiting job off the ready set, or off its group's held set (cancel, delete, edit).
local function unready(ready_key, job_key, job_id)
  if redis.call('ZREM', ready_key, job_id) == 1 then return end
  local group = redis.call('HGET', job_key, 'group')
  if group and group ~= '' then
    local held = held_key(ready_key, group)
    if redis.call('ZREM', held, job_id) == 1 and redis.call('EXISTS', held) == 0 then
      redis.call('SREM', groups_key(ready_key), group)
    end
  end
end

-- A concurrency group's scripts first look at when the group was last touched (`seen`). After a silence longer
-- than GROUP_SILENCE_MS (Redis was away: restarted, frozen, unreachable), no holder could renew its slots, so
-- the slots that ran out during it get its length back, as the recoverer spares leases after its own outage;
-- a dead holder's slot still frees up within one lease. A quiet group holds no slots, so nothing is shifted.
local GROUP_SILENCE_MS = 2000
local function group_touch(slots_key, seen_key, now)
  local seen = tonumber(redis.call('GET', seen_key) or '')
  if seen and now - seen > GROUP_SILENCE_MS then
    local lapsed = redis.call('ZRANGE', slots_key, seen, now, 'BYSCORE', 'WITHSCORES')
    for i = 1, #lapsed, 2 do redis.call('ZADD', slots_key, tonumber(lapsed[i + 1]) + (now - seen), lapsed[i]) end
  end
  redis.call('SET', seen_key, now)
end

-- A span of Redis ms in words, for messages an operator reads ("3.2 s", "12 s").
local function seconds_words(ms)
  if ms < 10000 then return string.format('%.1f s', ms / 1000) end
  return string.format('%d s', math.floor(ms / 1000 + 0.5))
end

-- Take a running job away from its worker (recover.lua: its lease ran out; takeback.lua: its worker stopped
-- heartbeating): the attempt closed as `worker_lost` with `message`, the token cleared (so the worker's late
-- heartbeat, ack or failure is refused), then requeued while attempts remain, dead-lettered (or failed) when
-- they are used up, or cancelled when an operator had asked to cancel it. `k`: the queue's active, ready, dead,
-- failed, unique, events, wake, seq, stats and cancelled keys. Returns 'requeued'; 'ended' with the state it ended
-- in and its `kids` flag (lose_job_with_deps, in _deps.lua, releases its dependents); or nil (not running).
local function lose_job(k, prefix, maxlen, ttl, job_id, now, message)
  redis.call('ZREM', k.active, job_id)
  local job_key = prefix .. job_id
  local f = redis.call('HMGET', job_key, 'state', 'attempts', 'max_retries', 'dead_letter', 'task', 'cancel_requested',
                       'kids')
  if f[1] ~= RUNNING then return nil end
  local entry = close_attempt(job_key, now, 'worker_lost', {error_class = 'WorkerLost', message = message})
  redis.call('HSET', job_key, 'token', '', 'last_error',
             cjson.encode({error_class = 'WorkerLost', message = message, at = now, outcome = 'worker_lost'}))
  count(k.stats, now, 'lost', f[5] or '')
  if f[6] == '1' then
    -- Asked to stop while its worker was alive: requeuing it would run it again, and the next claim would
    -- clear the request.
    redis.call('ZADD', k.cancelled, now, job_id)
    redis.call('HSET', job_key, 'state', CANCELLED, 'finished_at', now)
    release_unique(k.unique, job_key, job_id)
    finish(job_key, ttl)
    emit(k.events, maxlen, job_id, 'cancelled', CANCELLED, {'entry', entry})
    return 'ended', CANCELLED, f[7]
  elseif tonumber(f[2]) <= tonumber(f[3]) then
    note_retry(k.stats, now, f[5] or '', tonumber(f[2]) or 0)  -- a lost attempt is retried too
    make_ready(job_key, job_id, k.ready, k.seq, k.wake, now, true)
    emit(k.events, maxlen, job_id, 'recovered', QUEUED, {'entry', entry})
    return 'requeued'
  end
  local state = (f[4] == 'discard') and FAILED or DEAD
  redis.call('ZADD', (state == DEAD) and k.dead or k.failed, now, job_id)
  if state == DEAD then count(k.stats, now, 'dead', f[5] or '') end  -- as fail.lua counts its dead
  redis.call('HSET', job_key, 'state', state, 'finished_at', now)
  release_unique(k.unique, job_key, job_id)
  if state ~= DEAD then finish(job_key, ttl) end
  emit(k.events, maxlen, job_id, state, state, {'entry', entry})
  return 'ended', state, f[7]
end
