#!lua flags=allow-oom
-- Requeue (or dead-letter) every job whose lease expired: its worker died, froze or lost Redis.
-- KEYS: active ready dead failed unique events wake seq stats cancelled
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] finished-job ttl ms  ARGV[4] limit
-- ARGV[5] outage ms: how long the recoverer could not reach Redis, or got no CPU, just before this pass
-- (0 = none)
-- Returns {requeued ids..., '|', ended ids...} (ended: dead-lettered, or cancelled when an operator had asked
-- to cancel it: the request outlives its worker); call again while it returns `limit` jobs.
local prefix, maxlen, ttl, limit, outage = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
if outage > 0 then
  -- Redis was frozen, down or unreachable, or the machine starved this process: a live worker could not
  -- renew its leases meanwhile either, and one held up by the same cause may come back a little after us.
  -- So the outage does not count against a lease that ran out during it or runs out within as long again:
  -- it gets the outage's length added (a lapsed one gets back what it had left when the outage began),
  -- never more than one lease from now, instead of its job being run twice. Leases that ran out before the
  -- outage began are not touched: those workers are really gone.
  local began = now - outage
  local at_risk = redis.call('ZRANGE', KEYS[1], began, now + outage, 'BYSCORE', 'WITHSCORES')
  for i = 1, #at_risk, 2 do
    local job_id, deadline = at_risk[i], tonumber(at_risk[i + 1])
    local lease_ms = tonumber(redis.call('HGET', prefix .. job_id, 'lease_ms')) or 30000
    redis.call('ZADD', KEYS[1], math.max(deadline, math.min(deadline + outage, now + lease_ms)), job_id)
  end
end
local requeued, ended = {}, {}
local expired = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
for _, job_id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], job_id)
  local job_key = prefix .. job_id
  local f = redis.call('HMGET', job_key, 'state', 'attempts', 'max_retries', 'dead_letter', 'heartbeat_at', 'task',
                       'cancel_requested', 'kids')
  if f[1] == RUNNING then
    local message = 'lease expired; last heartbeat at ' .. (f[5] or '?') .. ' ms'
    local entry = close_attempt(job_key, now, 'worker_lost', {error_class = 'WorkerLost', message = message})
    redis.call('HSET', job_key, 'token', '', 'last_error',
               cjson.encode({error_class = 'WorkerLost', message = message, at = now, outcome = 'worker_lost'}))
    count(KEYS[9], now, 'lost', f[6] or '')
    if f[7] == '1' then
      -- Asked to stop while its worker was alive: requeuing it would run it again, and the next claim would
      -- clear the request.
      redis.call('ZADD', KEYS[10], now, job_id)
      redis.call('HSET', job_key, 'state', CANCELLED, 'finished_at', now)
      release_unique(KEYS[5], job_key, job_id)
      finish(job_key, ttl)
      emit(KEYS[6], maxlen, job_id, 'cancelled', CANCELLED, {'entry', entry})
      if f[8] == '1' then deps_ended(job_key, dep_queue(prefix), job_id, CANCELLED, 'null', now, maxlen) end
      ended[#ended + 1] = job_id
    elseif tonumber(f[2]) <= tonumber(f[3]) then
      note_retry(KEYS[9], now, f[6] or '', tonumber(f[2]) or 0)  -- a lost attempt is retried too
      make_ready(job_key, job_id, KEYS[2], KEYS[8], KEYS[7], now)
      emit(KEYS[6], maxlen, job_id, 'recovered', QUEUED, {'entry', entry})
      requeued[#requeued + 1] = job_id
    else
      local state = (f[4] == 'discard') and FAILED or DEAD
      redis.call('ZADD', (state == DEAD) and KEYS[3] or KEYS[4], now, job_id)
      if state == DEAD then count(KEYS[9], now, 'dead', f[6] or '') end  -- as fail.lua counts its dead
      redis.call('HSET', job_key, 'state', state, 'finished_at', now)
      release_unique(KEYS[5], job_key, job_id)
      if state ~= DEAD then finish(job_key, ttl) end
      emit(KEYS[6], maxlen, job_id, state, state, {'entry', entry})
      if f[8] == '1' then deps_ended(job_key, dep_queue(prefix), job_id, state, 'null', now, maxlen) end
      ended[#ended + 1] = job_id
    end
  end
end
requeued[#requeued + 1] = '|'
for _, job_id in ipairs(ended) do requeued[#requeued + 1] = job_id end
return requeued
