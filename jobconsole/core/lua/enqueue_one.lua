#!lua
-- Enqueue one job of the intake kind (the client made its id; no unique key, not delayed, in no concurrency
-- group) while the client's last enqueue on the queue met a worker waiting idle (otherwise Client.enqueue appends
-- the entry by a plain XADD: Store.append_intake), kept apart from enqueue.lua so that it costs Redis little. Its few
-- keys and arguments, each of which Redis parses and Lua copies on every call, and no shared helper it does
-- not run, make it about half of enqueue.lua's cost for the same work (bench/redis_cost.py).
-- KEYS: intake idle ready active limit
-- ARGV[1] job id  ARGV[2] inbox key prefix  then the intake entry's pairs: 'task', task, 'priority', priority,
-- then the job hash's other field pairs.
-- While no worker is registered idle, the job is one intake entry ('id', id, then those pairs: see
-- drain_intake). A job due now, on a queue with nothing else waiting, goes straight to an idle worker when one
-- is registered, as in enqueue.lua: a leased intake entry (its pairs then the lease), and the lease pushed to
-- that worker's inbox. No pause check (a pause drops the idle set and a paused queue registers
-- none) and no sequence number (the token is the worker and the job's fresh id).
-- Returns 1 (queued), 2 (handed to an idle worker: running), or 0 when it wrote nothing and the caller sends
-- the job to enqueue.lua instead: the intake is full (INTAKE_MAX), or an idle worker is registered while
-- jobs wait ahead of this one or the queue is at its limit of running jobs. A resent id is never seen here
-- (the client makes a fresh one), so the job is always 'created'.
local waiting = redis.call('XLEN', KEYS[1])
local top, now = pop_idle(KEYS[2])
if top then
  local limit = tonumber(redis.call('GET', KEYS[5]) or '')
  if waiting > 0 or redis.call('ZCARD', KEYS[3]) > 0 or (limit and redis.call('ZCARD', KEYS[4]) >= limit) then
    redis.call('ZADD', KEYS[2], top[2], top[1])  -- jobs wait ahead of this one: enqueue.lua decides
    return 0
  end
  hand_off_entry(KEYS[1], ARGV[2], cjson.decode(top[1]), ARGV[1], {unpack(ARGV, 3)}, now)
  return 2
end
if waiting >= INTAKE_MAX then return 0 end  -- enqueue.lua drains the intake, then adds this job
redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], unpack(ARGV, 3))
return 1
