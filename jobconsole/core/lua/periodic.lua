#!lua flags=allow-oom
-- Periodic jobs' slot bookkeeping (core/periodic.py), a compare-and-set per schedule.
-- KEYS: handled pending last
-- ARGV[1] op  ARGV[2] schedule name, then per op (pending: '<job id>|<slot ms>|<claimed at ms>'):
--   'advance': ARGV[3] expected handled ms ('' = none yet)  ARGV[4] new handled ms  ARGV[5] job id ('' = none)
--     ARGV[6] the slot the job is for (ms).
--     Moves the schedule's handled mark from the expected value to the new one, only if it still holds the
--     expected value (another scheduler did not move it first) and the new one is not in the future by
--     Redis's clock (never early). With a job id, records it as pending (its enqueue not yet confirmed)
--     and as the last fired. Returns 'ok', 'stale' (the mark moved: read it again) or 'early'.
--   'confirm': ARGV[3] job id. The job's enqueue went through: its pending record goes. Returns 1 or 0.
--   'forget': the schedule is gone: its records go. Returns 1.
local op, name = ARGV[1], ARGV[2]
if op == 'confirm' then
  local pending = redis.call('HGET', KEYS[2], name)
  if pending and string.sub(pending, 1, #ARGV[3] + 1) == ARGV[3] .. '|' then
    redis.call('HDEL', KEYS[2], name)
    return 1
  end
  return 0
end
if op == 'forget' then
  redis.call('HDEL', KEYS[1], name)
  redis.call('HDEL', KEYS[2], name)
  redis.call('HDEL', KEYS[3], name)
  return 1
end
local now = now_ms()
if tonumber(ARGV[4]) > now then return 'early' end
local handled = redis.call('HGET', KEYS[1], name) or ''
if handled ~= ARGV[3] then return 'stale' end
redis.call('HSET', KEYS[1], name, ARGV[4])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[2], name, ARGV[5] .. '|' .. ARGV[6] .. '|' .. now)
  redis.call('HSET', KEYS[3], name, ARGV[6] .. '|' .. ARGV[5] .. '|' .. now)
end
return 'ok'
