#!lua flags=allow-oom
-- The mirror leader's epoch counter (mirror_read.lua counts it up with every read): with no argument, count it
-- up once and return it (a resync's snapshot); with one, set it to that value (after a rewind the leader moves
-- it past the epoch the database recorded). Allowed while Redis is full, like every step of the mirror.
-- KEYS: epoch
-- ARGV[1] (optional) the value to set
if ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1])
  return tonumber(ARGV[1])
end
return redis.call('INCR', KEYS[1])
