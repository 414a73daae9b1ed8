-- Jobs that wait for other jobs (core/workflows.py, docs/workflows.md), prepended after _lib.lua to the
-- scripts whose header says "-- USES: deps". A job's edges live beside its hash, in its own queue's slot:
--   <job>:deps      HASH parent ref -> "<policy>|<index>|<parent's step name>" (its parents; kept)
--   <job>:ended     HASH parent ref -> the state that parent ended in; HSETNX, so each edge is released once
--   <job>:results   HASH parent's index -> its piece of the job's params (only for a job passed its parents'
--                   results): its result JSON (null if it did not complete), after `"<step>":` in 'dict' mode
--   <job>:children  SET of its dependents' refs
-- A ref is "<queue>|<job id>". Job hash fields: deps_n (number of parents), kids ('1': it has dependents),
-- pass and splice_at (where the parents' results go in its params), release_delay (ms from its release),
-- cancelled_by (the parent ref whose failure cancelled it), when ('failure': released by its first parent that
-- does not complete, cancelled once all completed: a batch's death callback). The script that ends a job (complete, fail,
-- cancel, recover, release's drop, delete, replace's cancel, a workflow's cancel) releases its dependents in the
-- same call: nothing can end between a parent's end and its dependents' release, and a repeated end (a stale
-- token is refused before; an edge already ended answers 0 to HSETNX) releases nothing twice.
-- Keys of another queue are built from KEY_ROOT: one Redis runs them atomically. On a Cluster a workflow
-- spanning queues (slots) is placed per queue (workflow_parts.lua), and a child in another queue is stored in its
-- parent's `children` as ">" .. ref: what reaches it goes through the parent queue's outbox instead, applied in
-- the child's slot by deps_relay.lua (docs/architecture.md, "Crossing slots"):
--   <queue>:deps_out    HASH "<child ref> <parent ref>" -> "<ended|revive>|<state>|<seq>|<result>": the latest
--                       message per edge (a newer one replaces it; seq from the queue's `seq`)
--   <queue>:deps_due    ZSET the same fields -> ms when the relayer takes them (again)
--   <queue>:deps_acked  SET fields applied once; applied a second time after a grace, then dropped
--   <job>:relayed       HASH parent ref -> the seq last applied to this child: an older message is refused
local DEP_ENDED = {[COMPLETED] = true, [DEAD] = true, [FAILED] = true, [CANCELLED] = true, [DROPPED] = true}
local DEP_AUX = {':deps', ':ended', ':results', ':children', ':relayed'}
-- How long a message to another slot waits before the relayer may take it: by then the parent's end that wrote
-- it is on the parent primary's replica, so a failover that loses that end cannot have released the child.
local dep_due_ms = 200

local function dep_base(queue)
  return KEY_ROOT .. '{q:' .. queue .. '}:'
end

-- The job key, queue and id of a ref.
local function dep_job(ref)
  local q, id = string.match(ref, '^([^|]+)|(.+)$')
  return dep_base(q) .. 'job:' .. id, q, id
end

-- The queue a job-key prefix ("<root>{q:<queue>}:job:") belongs to.
local function dep_queue(prefix)
  return string.match(prefix, '{q:(.-)}')
end

local function dep_policy(job_key, parent_ref)
  return string.match(redis.call('HGET', job_key .. ':deps', parent_ref) or 'cancel', '^[^|]*')
end

-- The first parent that ended other than completed under the "cancel" policy, or nil.
local function dep_blocker(job_key)
  local ended = redis.call('HGETALL', job_key .. ':ended')
  for i = 1, #ended, 2 do
    if ended[i + 1] ~= COMPLETED and dep_policy(job_key, ended[i]) ~= 'run' then return ended[i] end
  end
  return nil
end

local function dep_persist(job_key)
  redis.call('PERSIST', job_key)
  redis.call('PERSIST', job_key .. ':attempts')
  for _, s in ipairs(DEP_AUX) do redis.call('PERSIST', job_key .. s) end
end

-- The piece a parent gives a dependent passed results: its result, keyed by the parent's index in the job's
-- parents (their order), with `"<step>":` ahead of it in 'dict' mode. Written as each link ends, so the release
-- of a fan-in's callback only reads them in order.
local function dep_piece(job_key, parent_ref, mode, result)
  local _, index, step = string.match(redis.call('HGET', job_key .. ':deps', parent_ref) or '', '^([^|]*)|([^|]*)|(.*)$')
  if not index then return end
  if mode == 'dict' then
    if step == '' then step = string.match(parent_ref, '|(.+)$') end
    result = cjson.encode(step) .. ':' .. result
  end
  redis.call('HSET', job_key .. ':results', index, result)
end

-- Put the parents' results into the job's params where the client left a `null` for them (splice_at: the bytes
-- before it). pass: 'dict' ({step: result}), 'one' (the one parent's result; a list for several), 'list'.
-- A parent that did not complete gives null. Done once: splice_at goes with it.
local function dep_splice(job_key)
  local h = redis.call('HMGET', job_key, 'pass', 'splice_at', 'params', 'deps_n')
  local mode, at, params, n = h[1], tonumber(h[2] or ''), h[3], tonumber(h[4] or '0')
  if not mode or mode == '' or not at or not params then return end
  local parts, missing = {}, false
  if mode == 'dict' and redis.call('HLEN', job_key .. ':results') >= n then
    parts = redis.call('HVALS', job_key .. ':results')  -- an object's keys need no order: one call
    n = 0
  end
  for first = 1, n, 1000 do  -- in order, HMGET in slices (unpack has a limit)
    local fields = {}
    for i = first, math.min(first + 999, n) do fields[#fields + 1] = i end
    local got = redis.call('HMGET', job_key .. ':results', unpack(fields))
    for k = 1, #fields do
      parts[#parts + 1] = got[k] or false
      missing = missing or not got[k]
    end
  end
  if missing then  -- requeued before every parent ended (an operator's choice): null for the others
    local deps = redis.call('HGETALL', job_key .. ':deps')
    for i = 1, #deps, 2 do
      local _, index, step = string.match(deps[i + 1], '^([^|]*)|([^|]*)|(.*)$')
      index = tonumber(index)
      if index and not parts[index] then
        if step == '' then step = string.match(deps[i], '|(.+)$') end
        parts[index] = (mode == 'dict') and (cjson.encode(step) .. ':null') or 'null'
      end
    end
  end
  local value
  if mode == 'dict' then
    value = '{' .. table.concat(parts, ',') .. '}'
  elseif mode == 'one' and #parts == 1 then
    value = parts[1]
  else
    value = '[' .. table.concat(parts, ',') .. ']'
  end
  redis.call('HSET', job_key, 'params', string.sub(params, 1, at) .. value .. string.sub(params, at + 5))
  redis.call('HDEL', job_key, 'splice_at')
end

-- Every parent ended and none stops it: waiting -> queued, or scheduled when it has a release_delay or a run_at
-- still ahead.
local function dep_release(job_key, queue, job_id, now, maxlen)
  local base = dep_base(queue)
  dep_splice(job_key)
  redis.call('ZREM', base .. 'waiting', job_id)
  local h = redis.call('HMGET', job_key, 'release_delay', 'run_at')
  local at = tonumber(h[2] or '')
  if tonumber(h[1] or '') then at = now + tonumber(h[1]) end
  if at and at > now then
    redis.call('ZADD', base .. 'scheduled', at, job_id)
    redis.call('HSET', job_key, 'state', SCHEDULED, 'run_at', at)
    redis.call('LPUSH', base .. 'wake', '1')  -- idle workers recompute when the next job is due
    redis.call('LTRIM', base .. 'wake', 0, 999)
    emit(base .. 'events', maxlen, job_id, 'released', SCHEDULED)
  else
    make_ready(job_key, job_id, base .. 'ready', base .. 'seq', base .. 'wake', now)
    emit(base .. 'events', maxlen, job_id, 'released', QUEUED)
  end
end

-- A waiting job cancelled because parent `by` failed (kept without expiry, so a resubmitted parent can bring it
-- back; retention trims it like any cancelled job).
local function dep_cancel(job_key, queue, job_id, by, now, maxlen)
  local base = dep_base(queue)
  redis.call('ZREM', base .. 'waiting', job_id)
  redis.call('ZADD', base .. 'cancelled', now, job_id)
  redis.call('HSET', job_key, 'state', CANCELLED, 'finished_at', now, 'cancelled_by', by)
  emit(base .. 'events', maxlen, job_id, 'cancelled', CANCELLED, {'by', by})
end

-- The edge from a parent to one dependent ended (state: the parent's end state, result its result JSON).
-- Returns true when that cancelled the dependent (its own dependents are then told in turn).
local function dep_edge_ended(child_key, child_ref, parent_ref, state, result, now, maxlen)
  local h = redis.call('HMGET', child_key, 'state', 'deps_n', 'pass', 'when')
  if not h[1] then return false end  -- deleted, or gone by retention: nothing to write for it
  if redis.call('HSETNX', child_key .. ':ended', parent_ref, state) == 0 then return false end
  if h[3] and h[3] ~= '' then dep_piece(child_key, parent_ref, h[3], (state == COMPLETED) and result or 'null') end
  if h[1] ~= WAITING then return false end
  local _, cq, cid = dep_job(child_ref)
  if h[4] == 'failure' then
    if state ~= COMPLETED then
      dep_release(child_key, cq, cid, now, maxlen)
    elseif redis.call('HLEN', child_key .. ':ended') >= tonumber(h[2] or '0') then
      dep_cancel(child_key, cq, cid, '', now, maxlen)  -- every parent completed: nothing to report
      return true
    end
    return false
  end
  if state ~= COMPLETED and dep_policy(child_key, parent_ref) ~= 'run' then
    dep_cancel(child_key, cq, cid, parent_ref, now, maxlen)
    return true
  end
  if redis.call('HLEN', child_key .. ':ended') >= tonumber(h[2] or '0') then
    dep_release(child_key, cq, cid, now, maxlen)
  end
  return false
end

-- A message from a parent to its child in another slot (Cluster only): the latest per edge, in the parent
-- queue's outbox, relayed by deps_relay.lua; `seq` orders them, so an older one read late is refused there.
local function dep_outbox(parent_ref, child_ref, kind, state, result, now)
  local base = dep_base(string.match(parent_ref, '^([^|]+)|'))
  local field = child_ref .. ' ' .. parent_ref
  local seq = redis.call('INCR', base .. 'seq')
  redis.call('HSET', base .. 'deps_out', field, kind .. '|' .. state .. '|' .. seq .. '|' .. result)
  redis.call('ZADD', base .. 'deps_due', now + dep_due_ms, field)
  redis.call('SREM', base .. 'deps_acked', field)
end

-- A job ended (completed, dead, failed, cancelled, dropped, deleted): release its dependents, transitively for
-- the ones its failure cancels. Call it only for a job whose hash says kids = '1'.
local function deps_ended(job_key, queue, job_id, state, result, now, maxlen)
  local work = {{job_key, queue .. '|' .. job_id, state, result}}
  local w = 1
  while w <= #work do
    local item = work[w]
    w = w + 1
    for _, child_ref in ipairs(redis.call('SMEMBERS', item[1] .. ':children')) do
      if string.byte(child_ref) == 62 then  -- '>': in another slot
        dep_outbox(item[2], string.sub(child_ref, 2), 'ended', item[3], item[4], now)
      else
        local child_key = dep_job(child_ref)
        if dep_edge_ended(child_key, child_ref, item[2], item[3], item[4], now, maxlen) then
          work[#work + 1] = {child_key, child_ref, CANCELLED, 'null'}
        end
      end
    end
  end
end

-- lose_job (_lib.lua, which cannot see this file) for recover.lua and takeback.lua: a lost job that ended there
-- (dead-lettered, failed, cancelled) releases its dependents in the same call, as every other end does.
local function lose_job_with_deps(k, prefix, maxlen, ttl, job_id, now, message)
  local done, state, kids = lose_job(k, prefix, maxlen, ttl, job_id, now, message)
  if done == 'ended' and kids == '1' then
    deps_ended(prefix .. job_id, dep_queue(prefix), job_id, state, 'null', now, maxlen)
  end
  return done
end

-- The edge from a parent that runs again to one dependent is open again; true when that brought the dependent
-- back from cancelled to waiting (its own dependents are then told in turn).
local function dep_edge_revived(child_key, child_ref, parent_ref, now, maxlen)
  if redis.call('HDEL', child_key .. ':ended', parent_ref) == 0 then return false end
  local index = string.match(redis.call('HGET', child_key .. ':deps', parent_ref) or '', '^[^|]*|([^|]*)|')
  if index then redis.call('HDEL', child_key .. ':results', index) end
  local h = redis.call('HMGET', child_key, 'state', 'cancelled_by')
  if h[1] ~= CANCELLED or h[2] ~= parent_ref then return false end
  local other = dep_blocker(child_key)
  if other then
    redis.call('HSET', child_key, 'cancelled_by', other)
    return false
  end
  local _, cq, cid = dep_job(child_ref)
  local base = dep_base(cq)
  redis.call('ZREM', base .. 'cancelled', cid)
  redis.call('ZADD', base .. 'waiting', now, cid)
  dep_persist(child_key)
  redis.call('HSET', child_key, 'state', WAITING, 'finished_at', '')
  redis.call('HDEL', child_key, 'cancelled_by')
  emit(base .. 'events', maxlen, cid, 'waiting', WAITING, {'from', CANCELLED, 'by', parent_ref})
  return true
end

-- A job that had ended other than completed runs again (requeue, resubmit, edit-and-resubmit): its dependents
-- wait for it again, and the ones its failure had cancelled go back to waiting (transitively), unless another
-- failed parent still holds them cancelled. Dependents that already ran keep what they saw.
local function deps_revive(job_key, queue, job_id, now, maxlen)
  local work = {{job_key, queue .. '|' .. job_id}}
  local w = 1
  while w <= #work do
    local parent_key, parent_ref = work[w][1], work[w][2]
    w = w + 1
    for _, child_ref in ipairs(redis.call('SMEMBERS', parent_key .. ':children')) do
      if string.byte(child_ref) == 62 then  -- '>': in another slot
        dep_outbox(parent_ref, string.sub(child_ref, 2), 'revive', '', '', now)
      else
        local child_key = dep_job(child_ref)
        if dep_edge_revived(child_key, child_ref, parent_ref, now, maxlen) then work[#work + 1] = {child_key, child_ref} end
      end
    end
  end
end

-- What a script that brings a finished job back runs (requeue, edit, resubmit): its dependents wait for it again,
-- and a job cancelled before its parents' results were put in its params gets them now (null where missing).
local function deps_back(job_key, queue, job_id, from_state, now, maxlen)
  local h = redis.call('HMGET', job_key, 'kids', 'splice_at')
  if h[2] then dep_splice(job_key) end
  if h[1] == '1' and from_state ~= COMPLETED then deps_revive(job_key, queue, job_id, now, maxlen) end
  if h[1] == '1' or h[2] then dep_persist(job_key) end
end

-- A message from another slot's outbox applied here, in the child's slot (deps_relay.lua): as the parent's own
-- script would have done it on one Redis. Each edge's HSETNX/HDEL makes a repeat harmless; `relayed` refuses a
-- message older than one applied already (a relayer that read it before the parent ran again). False: refused.
local function deps_apply(child_ref, parent_ref, message, now, maxlen)
  local kind, state, seq, result = string.match(message, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
  local child_key, cq, cid = dep_job(child_ref)
  if redis.call('EXISTS', child_key) == 0 then return true end  -- deleted, or gone by retention
  local last = tonumber(redis.call('HGET', child_key .. ':relayed', parent_ref) or '')
  seq = tonumber(seq)
  if last and last > seq then return false end
  redis.call('HSET', child_key .. ':relayed', parent_ref, seq)
  if kind == 'ended' then
    -- A newer end of an edge that ended before: the parent ran again, and its revive was replaced in the outbox
    -- before it was relayed (one message per edge): revive it first, as the parent's own scripts did.
    if last and last < seq and redis.call('HEXISTS', child_key .. ':ended', parent_ref) == 1 then
      if dep_edge_revived(child_key, child_ref, parent_ref, now, maxlen) then deps_revive(child_key, cq, cid, now, maxlen) end
    end
    if dep_edge_ended(child_key, child_ref, parent_ref, state, result, now, maxlen) then
      deps_ended(child_key, cq, cid, CANCELLED, 'null', now, maxlen)
    end
  elseif dep_edge_revived(child_key, child_ref, parent_ref, now, maxlen) then
    deps_revive(child_key, cq, cid, now, maxlen)
  end
  return true
end

-- Acknowledge finished jobs (success), each only if its lease token is still current: complete.lua's work, and
-- claim.lua's for the acks a worker sends with its next claim (one script call per round trip, not two).
-- `args` from `first` on hold per job: id, token, result (JSON), runtime_ms. Returns per job 1 = completed,
-- 2 = already completed by this token (a retried ack), 0 = stale token (the lease was lost; this worker must not
-- overwrite the new owner's result). A job with dependents releases them here.
-- A first attempt that succeeds (attempt 1, no attempt list yet) is recorded by the job hash's own fields
-- (worker, host, pid, started_at, finished_at, attempts, state completed) rather than a JSON entry in
-- `<job>:attempts`: the readers (core/job.py, attempt_history) give a completed job without a list that one
-- attempt. Every other attempt is closed into the list (close_attempt), so a list once begun holds them all.
local function complete_jobs(active_key, completed_key, unique_key, events_key, stats_key, prefix, maxlen, ttl, now,
                             args, first, n)
  local out = {}
  -- One 'completed' event for the jobs of this call (emit_jobs); its `entry` names the closed attempt: the
  -- attempt's JSON for a single job whose attempt went into its list, else '1' (the job's history holds it).
  local completed, entries = {}, {}
  local function emit_completed()
    if #completed == 1 then
      emit(events_key, maxlen, completed[1], 'completed', COMPLETED, {'entry', entries[1]})
    elseif #completed > 1 then
      emit_jobs(events_key, maxlen, completed, 'completed', COMPLETED, {'entry', '1'})
    end
    completed, entries = {}, {}
  end
  local runtime, hist, e2e = {}, {}, {}  -- per task: ms run, jobs by run-time bucket, by end-to-end bucket
  for j = 0, n - 1 do
    local at = first + 4 * j
    local job_id, token, result, ms = args[at], args[at + 1], args[at + 2], args[at + 3]
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
      redis.call('ZREM', active_key, job_id)
      redis.call('ZADD', completed_key, now, job_id)
      release_unique(unique_key, job_key, job_id, f[5] or '')
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
      tally(hist, task, tonumber(ms) or 0, runtime)
      tally(e2e, task, now - (tonumber(f[6]) or now))
      out[#out + 1] = 1
    end
  end
  emit_completed()
  -- The run-time histogram counts the jobs completed too: readers add it to 'completed' (core/metrics.py).
  local minute = math.floor(now / 60000) .. '|'
  for task, th in pairs(hist) do
    redis.call('HINCRBY', stats_key, minute .. 'runtime_ms|' .. task, runtime[task])
    for b, c in pairs(th) do redis.call('HINCRBY', stats_key, minute .. 'done_h:' .. b .. '|' .. task, c) end
    for b, c in pairs(e2e[task]) do redis.call('HINCRBY', stats_key, minute .. 'e2e_done_h:' .. b .. '|' .. task, c) end
  end
  return out
end
