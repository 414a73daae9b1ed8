#!lua flags=allow-oom
-- A worker process's heartbeat (core/worker/liveness.py): its deadline moved to now + its expiry, its last
-- heartbeat in the registry's index. Refused for an id declared gone (lapse.lua): its jobs were taken back,
-- and the worker must go on under a new id, not come back under this one.
-- KEYS: alive gone workers
-- ARGV[1] worker id  ARGV[2] expiry ms
-- Returns 1, or 0 when the id was declared gone.
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
local now = now_ms()
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZADD', KEYS[3], 'GT', now, ARGV[1])
return 1
