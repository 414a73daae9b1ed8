#!lua flags=allow-oom
-- Give back slots of a concurrency group: the jobs they were taken for ended, or (unused = 1) no job was
-- claimed with them, in which case their starts do not count against the rate limit either.
-- KEYS: slots starts waiting seen
-- ARGV[1] unused ('1' or '0')  ARGV[2...] tokens
-- Returns the queues whose workers came short of slots since the last release (to wake them), once.
group_touch(KEYS[1], KEYS[4], now_ms())
local freed = 0
for i = 2, #ARGV do
  freed = freed + redis.call('ZREM', KEYS[1], ARGV[i])
  if ARGV[1] == '1' then redis.call('ZREM', KEYS[2], ARGV[i]) end
end
if freed == 0 then return {} end
local waiting = redis.call('SMEMBERS', KEYS[3])
if #waiting > 0 then redis.call('DEL', KEYS[3]) end
return waiting
