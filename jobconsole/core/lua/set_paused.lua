#!lua flags=allow-oom
-- Pause or resume a queue (workers claim nothing from a paused queue).
-- KEYS: paused events wake idle
-- A pause drops the idle registrations (a paused queue's claims register none), so an enqueue that finds
-- a registered idle worker knows the queue is not paused without looking.
-- ARGV[1] events maxlen  ARGV[2] 1 = pause, 0 = resume
-- Returns 1 if the state changed, 0 if it already was so.
local changed
if ARGV[2] == '1' then
  changed = redis.call('SET', KEYS[1], now_ms(), 'NX') and 1 or 0
  redis.call('DEL', KEYS[4])
else
  changed = redis.call('DEL', KEYS[1])
  redis.call('LPUSH', KEYS[3], '1')
  redis.call('LTRIM', KEYS[3], 0, 999)
end
if changed == 1 then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'job', '', 'event',
             (ARGV[2] == '1') and 'paused' or 'resumed', 'state', '')
end
return changed
