#!lua flags=allow-oom
-- A worker starting: add its queues to the known queues and its tasks' options to the tasks hash (what the
-- console lists). Allowed while Redis is full: both are small and bounded, and a worker that cannot start
-- then could not drain the backlog that frees memory.
-- KEYS: queues tasks
-- ARGV[1] number of queues, then the queue names, then task name / options JSON pairs
local n = tonumber(ARGV[1])
redis.call('SADD', KEYS[1], unpack(ARGV, 2, n + 1))
if #ARGV > n + 1 then redis.call('HSET', KEYS[2], unpack(ARGV, n + 2)) end
return 1
