#!lua flags=allow-oom
-- Owner-checked lock: 'acquire' (also renews our own), 'release'.
-- KEYS: lock
-- ARGV[1] op  ARGV[2] owner token  ARGV[3] ttl ms
-- Returns 1 if we hold (or released) the lock, 0 otherwise.
local holder = redis.call('GET', KEYS[1])
if ARGV[1] == 'release' then
  if holder == ARGV[2] then redis.call('DEL', KEYS[1]) return 1 end
  return 0
end
if holder == false or holder == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
