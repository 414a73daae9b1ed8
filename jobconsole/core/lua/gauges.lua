#!lua flags=no-writes,allow-oom
-- A queue's gauges for the console's health panel and the depth samples: read only, O(log n), no job scanned.
-- no-writes: Redis runs it while it refuses writes (full, unable to persist, a replica, too few replicas).
-- KEYS: ready scheduled active dead paused intake
-- ARGV[1] job key prefix  ARGV[2] grace ms: a running job counts as overdue once its lease deadline is that far
-- behind (the recoverer requeues expired leases within a second or so, so a grace keeps that out)
-- Returns {now_ms, paused (1/0), queued, scheduled, running, dead, oldest waiting since (Redis ms, -1: none),
-- overdue running jobs}. Queued includes the intake's entries (jobs accepted, not yet made into hashes) and
-- the jobs held for a concurrency group's slot (each group's oldest counts for the oldest waiting job).
-- The oldest waiting job: the ready set is ordered by priority, then FIFO, so the head of each priority class
-- is that class's oldest; the script looks at the heads of the first 16 classes (one ZRANGE each) and at the
-- intake's first entry (its id is its acceptance time).
local prefix, grace = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local oldest = -1
local first_entry = redis.call('XRANGE', KEYS[6], '-', '+', 'COUNT', 1)
if #first_entry > 0 then oldest = tonumber(string.match(first_entry[1][1], '^%d+')) end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local classes = 0
while #head > 0 and classes < 16 do
  local since = redis.call('HMGET', prefix .. head[1], 'ready_at', 'enqueued_at')
  since = tonumber(since[1]) or tonumber(since[2])
  if since and (oldest < 0 or since < oldest) then oldest = since end
  -- Scores are priority * 10^12 + seq (ready_score): the next class starts at the next multiple of 10^12.
  local class = math.floor(tonumber(head[2]) / 1000000000000)
  head = redis.call('ZRANGE', KEYS[1], (class + 1) * 1000000000000, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  classes = classes + 1
end
local held = 0
for _, group in ipairs(redis.call('SMEMBERS', groups_key(KEYS[1]))) do
  local key = held_key(KEYS[1], group)
  held = held + redis.call('ZCARD', key)
  local first = redis.call('ZRANGE', key, 0, 0)
  if #first > 0 then
    local since = redis.call('HMGET', prefix .. first[1], 'ready_at', 'enqueued_at')
    since = tonumber(since[1]) or tonumber(since[2])
    if since and (oldest < 0 or since < oldest) then oldest = since end
  end
end
return {
  now, redis.call('EXISTS', KEYS[5]), redis.call('ZCARD', KEYS[1]) + redis.call('XLEN', KEYS[6]) + held,
  redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[4]), oldest,
  redis.call('ZCOUNT', KEYS[3], '-inf', now - grace),
}
