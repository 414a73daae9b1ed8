#!lua flags=allow-oom
-- The database mirror's read, in one atomic step: bump Redis's epoch (the database records it; a Redis that
-- comes back behind it lost writes), describe each event stream (for the gap check), and read the next events
-- of the mirror's consumer group. A script rather than MULTI: Redis refuses every command queued in a MULTI
-- while it is full, and the mirror has to keep up while the workers drain a full Redis.
-- KEYS: epoch events...
-- ARGV[1] group  ARGV[2] consumer  ARGV[3] count  ARGV[4] '0' (entries read before, not acked) or '>' (new)
-- Returns {epoch, {each stream's XINFO STREAM reply, or 0 if the stream is missing}, the XREADGROUP reply (nil
-- when there is nothing to read, 0 when a stream or the group is missing)}.
local epoch = redis.call('INCR', KEYS[1])
local infos = {}
local read = {'XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS'}
for i = 2, #KEYS do
  local info = redis.pcall('XINFO', 'STREAM', KEYS[i])
  infos[i - 1] = info.err and 0 or info
  read[#read + 1] = KEYS[i]
end
for _ = 2, #KEYS do read[#read + 1] = ARGV[4] end
local entries = redis.pcall(unpack(read))
if type(entries) == 'table' and entries.err then entries = 0 end
return {epoch, infos, entries}
