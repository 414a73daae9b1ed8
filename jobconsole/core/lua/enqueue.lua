-- Enqueue one or more jobs into one queue.
-- KEYS[1] ready  KEYS[2] scheduled  KEYS[3] unique  KEYS[4] events  KEYS[5] wake  KEYS[6] seq  KEYS[7] stats
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] number of jobs
-- then per job: id, priority, delay_ms ('' = none), run_at_ms ('' = none), unique_key ('' = none),
--               n (number of extra field/value pairs), then n pairs stored on the job hash.
-- Returns per job {id, status, state}; status is 'created', 'exists' (the id is already known:
-- idempotent) or 'duplicate' (the unique key is held by the live job whose id is returned).
local prefix, maxlen, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local out = {}
local i = 4
for _ = 1, n do
  local job_id, priority, delay_ms, run_at_ms, ukey = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local nfields = tonumber(ARGV[i + 5])
  local fields_start = i + 6
  i = fields_start + 2 * nfields
  local job_key = prefix .. job_id
  local holder = false
  if ukey ~= '' then holder = redis.call('HGET', KEYS[3], ukey) end
  if redis.call('EXISTS', job_key) == 1 then
    out[#out + 1] = {job_id, 'exists', redis.call('HGET', job_key, 'state')}
  elseif holder then
    out[#out + 1] = {holder, 'duplicate', redis.call('HGET', prefix .. holder, 'state') or ''}
  else
    local hset = {'HSET', job_key, 'id', job_id, 'priority', priority, 'attempts', 0, 'enqueued_at', now,
                  'unique_key', ukey}
    for f = fields_start, fields_start + 2 * nfields - 1 do hset[#hset + 1] = ARGV[f] end
    redis.call(unpack(hset))
    local run_at = now
    if run_at_ms ~= '' then run_at = tonumber(run_at_ms) end
    if delay_ms ~= '' then run_at = now + tonumber(delay_ms) end
    local state
    if run_at > now then
      state = 'scheduled'
      redis.call('ZADD', KEYS[2], run_at, job_id)
      redis.call('HSET', job_key, 'state', state, 'run_at', run_at)
      -- Wake idle workers so they recompute when the next scheduled job is due.
      redis.call('LPUSH', KEYS[5], '1')
      redis.call('LTRIM', KEYS[5], 0, 999)
    else
      state = 'queued'
      redis.call('HSET', job_key, 'run_at', now)
      make_ready(job_key, job_id, KEYS[1], KEYS[6], KEYS[5], now)
    end
    if ukey ~= '' then redis.call('HSET', KEYS[3], ukey, job_id) end
    local task = redis.call('HGET', job_key, 'task') or ''
    emit(KEYS[4], maxlen, job_id, 'enqueued', state)
    count(KEYS[7], now, 'enqueued', task)
    out[#out + 1] = {job_id, 'created', state}
  end
end
return out
