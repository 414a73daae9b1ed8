#!lua flags=allow-oom
-- Cluster only: messages from parents to children in another slot (lua/_deps.lua's outbox), moved in three steps
-- (core/workflows.py relay): read the due ones in the parent's slot, apply them in the child's slot, acknowledge
-- them in the parent's slot. Each step is atomic; a relayer killed between them leaves the message in the outbox,
-- and the next one applies it again (refused or a no-op: each edge ends once). An acknowledged message is applied
-- once more after `grace` (a child's primary that failed over may have lost the first), then dropped.
-- USES: deps
-- KEYS: deps_out deps_due deps_acked
-- ARGV[1] operation:
--   due <ahead ms> <limit>              (parent's slot) fields and messages due by now + ahead -> {field, message, ...}
--   apply <events maxlen> <field> <message> ...   (child's slot; KEYS: that queue's)  -> how many were applied
--                                                 (the others were older than one applied: acknowledged alike)
--   ack <grace ms> <field> <message> ...          (parent's slot) a message still the latest is marked applied,
--                                                 or dropped if it was already            -> number dropped
local op = ARGV[1]
local now = now_ms()
if op == 'due' then
  local fields = redis.call('ZRANGE', KEYS[2], '-inf', now + tonumber(ARGV[2]), 'BYSCORE', 'LIMIT', 0,
                            tonumber(ARGV[3]))
  local out = {}
  for _, field in ipairs(fields) do
    local message = redis.call('HGET', KEYS[1], field)
    if message then
      out[#out + 1] = field
      out[#out + 1] = message
    else
      redis.call('ZREM', KEYS[2], field)
    end
  end
  return out
end
if op == 'apply' then
  local applied = 0
  for a = 3, #ARGV, 2 do
    local child_ref, parent_ref = string.match(ARGV[a], '^(%S+) (%S+)$')
    if deps_apply(child_ref, parent_ref, ARGV[a + 1], now, ARGV[2]) then applied = applied + 1 end
  end
  return applied
end
if op == 'ack' then
  local grace, dropped = tonumber(ARGV[2]), 0
  for a = 3, #ARGV, 2 do
    if redis.call('HGET', KEYS[1], ARGV[a]) == ARGV[a + 1] then  -- not replaced by a newer message meanwhile
      if redis.call('SISMEMBER', KEYS[3], ARGV[a]) == 1 then
        redis.call('HDEL', KEYS[1], ARGV[a])
        redis.call('ZREM', KEYS[2], ARGV[a])
        redis.call('SREM', KEYS[3], ARGV[a])
        dropped = dropped + 1
      else
        redis.call('SADD', KEYS[3], ARGV[a])
        redis.call('ZADD', KEYS[2], now + grace, ARGV[a])
      end
    end
  end
  return dropped
end
return redis.error_reply('unknown operation ' .. tostring(op))
