-- Enqueue one or more jobs into one queue.
-- KEYS[1] ready  KEYS[2] scheduled  KEYS[3] unique  KEYS[4] events  KEYS[5] wake  KEYS[6] seq  KEYS[7] stats
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] number of jobs
-- then per job: id, task, priority, delay_ms ('' = none), run_at_ms ('' = none), unique_key ('' = none),
--               n (number of extra field/value pairs), then n pairs stored on the job hash.
-- Fields left unset mean their defaults: attempts 0, version 1, no timeout, dead_letter 'save',
-- ready_at = enqueued_at, run_at = enqueued_at.
-- Returns per job {id, status, state}; status is 'created', 'exists' (the id is already known:
-- idempotent) or 'duplicate' (the unique key is held by the live job whose id is returned).
local prefix, maxlen, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local out = {}
local per_task = {}
local woken = 0
local seq = tonumber(redis.call('INCRBY', KEYS[6], n)) - n  -- one sequence block for the whole batch
local i = 4
for _ = 1, n do
  local job_id, task, priority = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local delay_ms, run_at_ms, ukey = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local nfields = tonumber(ARGV[i + 6])
  local fields_start = i + 7
  i = fields_start + 2 * nfields
  local job_key = prefix .. job_id
  local holder = false
  if ukey ~= '' then holder = redis.call('HGET', KEYS[3], ukey) end
  if redis.call('EXISTS', job_key) == 1 then
    out[#out + 1] = {job_id, 'exists', redis.call('HGET', job_key, 'state')}
  elseif holder then
    out[#out + 1] = {holder, 'duplicate', redis.call('HGET', prefix .. holder, 'state') or ''}
  else
    local run_at = now
    if run_at_ms ~= '' then run_at = tonumber(run_at_ms) end
    if delay_ms ~= '' then run_at = now + tonumber(delay_ms) end
    local state = (run_at > now) and 'scheduled' or 'queued'
    local hset = {'HSET', job_key, 'id', job_id, 'task', task, 'priority', priority, 'enqueued_at', now,
                  'state', state}
    if state == 'scheduled' then hset[#hset + 1] = 'run_at'; hset[#hset + 1] = run_at end
    if ukey ~= '' then hset[#hset + 1] = 'unique_key'; hset[#hset + 1] = ukey end
    for f = fields_start, fields_start + 2 * nfields - 1 do hset[#hset + 1] = ARGV[f] end
    redis.call(unpack(hset))
    if state == 'scheduled' then
      redis.call('ZADD', KEYS[2], run_at, job_id)
    else
      seq = seq + 1
      redis.call('ZADD', KEYS[1], ready_score(priority, seq), job_id)
    end
    woken = woken + 1  -- scheduled jobs wake workers too, so they recompute when the next one is due
    if ukey ~= '' then redis.call('HSET', KEYS[3], ukey, job_id) end
    emit(KEYS[4], maxlen, job_id, 'enqueued', state)
    per_task[task] = (per_task[task] or 0) + 1
    out[#out + 1] = {job_id, 'created', state}
  end
end
if woken > 0 then
  local tokens = {}
  for t = 1, math.min(woken, 100) do tokens[t] = '1' end
  redis.call('LPUSH', KEYS[5], unpack(tokens))
  redis.call('LTRIM', KEYS[5], 0, 999)
end
for task, c in pairs(per_task) do count(KEYS[7], now, 'enqueued', task, c) end
return out
