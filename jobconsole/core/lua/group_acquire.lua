#!lua flags=allow-oom
-- Take up to N slots of a concurrency group, each a lease: a slot whose deadline passed is free again (its
-- holder died), so a killed worker never leaks one. The group's limits: `connections` slots held at once
-- (0: no cap) and `requests` starts per `period_ms` (0: no rate limit), from its conf hash.
-- KEYS: conf slots starts waiting seq seen
-- ARGV[1] N  ARGV[2] holder (worker id)  ARGV[3] lease ms  ARGV[4] queue that waits when short
-- Returns {now_ms, retry_at_ms, token...}: retry_at_ms (-1: none) is when a slot or a start frees up for a
-- holder that got fewer than N: the earliest slot deadline, or the end of the rate window's oldest start.
-- A holder that gets fewer than N records its queue in `waiting`: a release wakes those queues.
local want, holder, lease_ms, queue = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
group_touch(KEYS[2], KEYS[6], now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local conf = redis.call('HMGET', KEYS[1], 'connections', 'requests', 'period_ms')
local connections, requests, period = tonumber(conf[1]) or 0, tonumber(conf[2]) or 0, tonumber(conf[3]) or 0
local free = want
if connections > 0 then free = math.min(free, connections - redis.call('ZCARD', KEYS[2])) end
local rate_limited = false
if requests > 0 and period > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - period)
  local allowed = requests - redis.call('ZCARD', KEYS[3])
  if allowed < free then
    free = allowed
    rate_limited = true
  end
end
local out = {now, -1}
if free > 0 then
  local seq = tonumber(redis.call('INCRBY', KEYS[5], free)) - free
  for n = 1, free do
    local token = holder .. ':' .. (seq + n)
    redis.call('ZADD', KEYS[2], now + lease_ms, token)
    if requests > 0 and period > 0 then redis.call('ZADD', KEYS[3], now, token) end
    out[#out + 1] = token
  end
end
if free < want then
  redis.call('SADD', KEYS[4], queue)
  local first
  if rate_limited then
    first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    if #first > 0 then out[2] = tonumber(first[2]) + period end
  else
    first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    if #first > 0 then out[2] = tonumber(first[2]) end
  end
end
return out
