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
  for p = 1, #popped, 2 do
    local job_id = popped[p]
    local job_key = prefix .. job_id
    if redis.call('EXISTS', job_key) == 1 then
      local attempt = redis.call('HINCRBY', job_key, 'attempts', 1)
      local token = worker .. ':' .. redis.call('INCR', KEYS[7])
      local f = redis.call('HMGET', job_key, 'lease_ms', 'ready_at', 'task', 'enqueued_at')
      redis.call('HSET', job_key, 'state', 'running', 'token', token, 'worker', worker, 'host', host,
                 'pid', pid, 'started_at', now, 'heartbeat_at', now, 'cancel_requested', 0)
      redis.call('ZADD', KEYS[3], now + tonumber(f[1] or 30000), job_id)
      emit(KEYS[5], maxlen, job_id, 'started', 'running', {'attempt', attempt, 'worker', worker})
      count(KEYS[8], now, 'started', f[3] or '')
      count(KEYS[8], now, 'wait_ms', f[3] or '', now - (tonumber(f[2]) or tonumber(f[4]) or now))
      out[#out + 1] = redis.call('HGETALL', job_key)
    end
  end
end
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[6]) end
local nxt = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #nxt > 0 then out[2] = tonumber(nxt[2]) end
return out
