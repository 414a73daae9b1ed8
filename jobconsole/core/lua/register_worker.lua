#!lua flags=allow-oom
-- Write a worker's entry in the registry: its hash (expiring unless renewed) and its heartbeat in the index.
-- Returns the operator's control of the worker ('quiet', 'stop' or ''; worker_control.lua), so that reading it
-- costs the worker no command of its own.
-- Allowed while Redis is full: one bounded hash per worker, and operators need the list of workers most
-- when Redis is in trouble. Refused for an id declared gone (lapse.lua), whose record it would overwrite.
-- KEYS: worker workers gone
-- ARGV[1] worker id  ARGV[2] ttl s  ARGV[3] heartbeat ms, then field / value pairs
-- Returns the control, or false (nil) when the id was declared gone.
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return false end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'GT', ARGV[3], ARGV[1])
return redis.call('HGET', KEYS[1], 'control') or ''
