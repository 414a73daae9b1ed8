-- Requeue (or dead-letter) every job whose lease expired: its worker died, froze or lost Redis.
-- KEYS[1] active  KEYS[2] ready  KEYS[3] dead  KEYS[4] failed  KEYS[5] unique  KEYS[6] events  KEYS[7] wake
-- KEYS[8] seq  KEYS[9] stats
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] finished-job ttl ms  ARGV[4] limit
-- ARGV[5] outage ms: how long the recoverer could not reach Redis just before this pass (0 = none)
-- Returns {requeued ids..., '|', dead-lettered ids...}; call again while it returns `limit` jobs.
local prefix, maxlen, ttl, limit, outage = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_ms()
if outage > 0 then
  -- Redis was frozen, down or unreachable: a lease that ran out meanwhile may belong to a live worker that
  -- could not renew it either. Each such lease gets back what it had left when the outage began, instead
  -- of its job being run twice. Bounded by one lease; leases that ran out before the outage are not touched.
  local began = now - outage
  local lapsed = redis.call('ZRANGE', KEYS[1], began, now, 'BYSCORE', 'WITHSCORES')
  for i = 1, #lapsed, 2 do
    redis.call('ZADD', KEYS[1], now + tonumber(lapsed[i + 1]) - began, lapsed[i])
  end
end
local requeued, ended = {}, {}
local expired = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
for _, job_id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], job_id)
  local job_key = prefix .. job_id
  local f = redis.call('HMGET', job_key, 'state', 'attempts', 'max_retries', 'dead_letter', 'heartbeat_at', 'task')
  if f[1] == 'running' then
    local message = 'lease expired; last heartbeat at ' .. (f[5] or '?') .. ' ms'
    local entry = close_attempt(job_key, now, 'worker_lost', {error_class = 'WorkerLost', message = message})
    redis.call('HSET', job_key, 'token', '', 'last_error',
               cjson.encode({error_class = 'WorkerLost', message = message, at = now, outcome = 'worker_lost'}))
    count(KEYS[9], now, 'lost', f[6] or '')
    if tonumber(f[2]) <= tonumber(f[3]) then
      make_ready(job_key, job_id, KEYS[2], KEYS[8], KEYS[7], now)
      emit(KEYS[6], maxlen, job_id, 'recovered', 'queued', {'entry', entry})
      requeued[#requeued + 1] = job_id
    else
      local state = (f[4] == 'discard') and 'failed' or 'dead'
      redis.call('ZADD', (state == 'dead') and KEYS[3] or KEYS[4], now, job_id)
      redis.call('HSET', job_key, 'state', state, 'finished_at', now)
      release_unique(KEYS[5], job_key, job_id)
      if state ~= 'dead' then finish(job_key, ttl) end
      emit(KEYS[6], maxlen, job_id, state, state, {'entry', entry})
      ended[#ended + 1] = job_id
    end
  end
end
requeued[#requeued + 1] = '|'
for _, job_id in ipairs(ended) do requeued[#requeued + 1] = job_id end
return requeued
