#!lua flags=allow-oom
-- Retention: forget finished jobs older than a cutoff from one terminal set.
-- KEYS: finished events
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] age ms  ARGV[4] limit
-- Returns the number of jobs removed.
local prefix, maxlen = ARGV[1], ARGV[2]
local cutoff = now_ms() - tonumber(ARGV[3])
local old = redis.call('ZRANGE', KEYS[1], '-inf', cutoff, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[4]))
for _, job_id in ipairs(old) do
  redis.call('ZREM', KEYS[1], job_id)
  local job_key = prefix .. job_id
  redis.call('DEL', job_key, job_key .. ':attempts', job_key .. ':deps', job_key .. ':ended', job_key .. ':results',
             job_key .. ':children', job_key .. ':relayed')  -- a workflow member's edges (lua/_deps.lua) go with it
  emit(KEYS[2], maxlen, job_id, 'expired', 'expired')
end
return #old
