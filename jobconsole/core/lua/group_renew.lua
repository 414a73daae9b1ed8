#!lua flags=allow-oom
-- Extend the leases of slots their holder still uses (with its jobs' heartbeats). A slot already expired and
-- taken back is not revived: the answer counts the slots renewed.
-- KEYS: slots seen
-- ARGV[1] lease ms  ARGV[2...] tokens
local now = now_ms()
group_touch(KEYS[1], KEYS[2], now)
local deadline = now + tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) >= now then
    redis.call('ZADD', KEYS[1], 'XX', deadline, ARGV[i])
    renewed = renewed + 1
  end
end
return renewed
