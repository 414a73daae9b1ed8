#!lua flags=allow-oom
-- Create the database mirror's consumer group on a queue's events stream (and the stream, if missing), starting
-- after entry ARGV[2]; with ARGV[3] = '1' drop an existing group first (a resync starts the group afresh).
-- Allowed while Redis is full: a mirror that starts or resyncs then must still be able to read.
-- KEYS: events
-- ARGV[1] group  ARGV[2] start id  ARGV[3] '1' = recreate
-- Returns 1 if it created the group, 0 if the group was there already (and was kept).
if ARGV[3] == '1' then redis.pcall('XGROUP', 'DESTROY', KEYS[1], ARGV[1]) end
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2], 'MKSTREAM')
if type(created) == 'table' and created.err then
  if string.find(created.err, 'BUSYGROUP', 1, true) then return 0 end
  return redis.error_reply(created.err)
end
return 1
