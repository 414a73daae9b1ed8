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
local k = {active = KEYS[1], ready = KEYS[2], dead = KEYS[3], failed = KEYS[4], unique = KEYS[5], events = KEYS[6],
           wake = KEYS[7], seq = KEYS[8], stats = KEYS[9], cancelled = KEYS[10]}
local requeued, ended = {}, {}
local expired = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
for _, job_id in ipairs(expired) do
  local beat = tonumber(redis.call('HGET', prefix .. job_id, 'heartbeat_at'))
  local message = 'lease expired; last heartbeat ' .. (beat and (seconds_words(now - beat) .. ' before recovery') or 'unknown')
  local done = lose_job_with_deps(k, prefix, maxlen, ttl, job_id, now, message)
  if done == 'requeued' then
    requeued[#requeued + 1] = job_id
  elseif done == 'ended' then
    ended[#ended + 1] = job_id
  end
end
requeued[#requeued + 1] = '|'
for _, job_id in ipairs(ended) do requeued[#requeued + 1] = job_id end
return requeued
