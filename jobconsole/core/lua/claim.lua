-- Claim up to N ready jobs under a lease, after promoting due scheduled jobs.
-- KEYS[1] ready  KEYS[2] scheduled  KEYS[3] active  KEYS[4] paused  KEYS[5] events  KEYS[6] wake
-- KEYS[7] seq  KEYS[8] stats
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] count  ARGV[4] worker id  ARGV[5] host  ARGV[6] pid
-- Returns {now_ms, next_due_ms (-1 when nothing is scheduled), job...}; each job is its hash as a flat
-- field/value array, including its new lease 'token'.
local prefix, maxlen, want = ARGV[1], ARGV[2], tonumber(ARGV[3])
local worker, host, pid = ARGV[4], ARGV[5], ARGV[6]
local now = now_ms()
local out = {now, -1}
promote_due(prefix, KEYS[2], KEYS[1], KEYS[7], KEYS[6], KEYS[5], maxlen, now, 1000)
if redis.call('EXISTS', KEYS[4]) == 0 and want > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], want)
  local n = #popped / 2
  if n > 0 then
    -- One block of the queue's sequence numbers makes every lease token unique.
    local seq = tonumber(redis.call('INCRBY', KEYS[7], n)) - n
    local started, waited = {}, {}
    for p = 1, #popped, 2 do
      local job_id = popped[p]
      local job_key = prefix .. job_id
      local flat = redis.call('HGETALL', job_key)
      if #flat > 0 then
        local h = {}
        for f = 1, #flat, 2 do h[flat[f]] = flat[f + 1] end
        seq = seq + 1
        local attempt = (tonumber(h.attempts) or 0) + 1
        local token = worker .. ':' .. seq
        local updates = {attempts = attempt, state = 'running', token = token, worker = worker, host = host,
                         pid = pid, started_at = now, heartbeat_at = now, cancel_requested = 0}
        local hset = {'HSET', job_key}
        for field, value in pairs(updates) do
          hset[#hset + 1] = field
          hset[#hset + 1] = value
          if h[field] == nil then flat[#flat + 1] = field; flat[#flat + 1] = value end
        end
        for f = 1, #flat, 2 do  -- the reply carries the updated values
          local value = updates[flat[f]]
          if value ~= nil then flat[f + 1] = value end
        end
        redis.call(unpack(hset))
        redis.call('ZADD', KEYS[3], now + tonumber(h.lease_ms or 30000), job_id)
        emit(KEYS[5], maxlen, job_id, 'started', 'running', {'attempt', attempt, 'worker', worker})
        local task = h.task or ''
        started[task] = (started[task] or 0) + 1
        waited[task] = (waited[task] or 0) + now - (tonumber(h.ready_at) or tonumber(h.enqueued_at) or now)
        out[#out + 1] = flat
      end
    end
    for task, c in pairs(started) do
      count(KEYS[8], now, 'started', task, c)
      count(KEYS[8], now, 'wait_ms', task, waited[task])
    end
  end
end
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[6]) end
local nxt = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #nxt > 0 then out[2] = tonumber(nxt[2]) end
return out
