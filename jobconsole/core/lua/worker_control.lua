#!lua flags=allow-oom
-- An operator's control of one worker, written into the worker's own registry hash (so it lives and expires
-- with the worker's entry); the worker reads it back with each registry renewal (register_worker.lua).
-- Allowed while Redis is full: quieting or stopping workers is what an operator may need most then.
-- KEYS: worker
-- ARGV[1] 'quiet' (take no new jobs, finish the running ones), 'stop' (shut down gracefully, as SIGTERM) or
--         'resume' (lift a quiet; a stop is never lifted)
-- Returns 'done', 'already' (it was so, or is stopping already) or 'missing' (no live worker by that id).
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'gone' then return 'missing' end
local current = redis.call('HGET', KEYS[1], 'control') or ''
local wanted = ARGV[1]
if current == 'stop' or state == 'stopping' then return 'already' end
if wanted == 'resume' then
  if current == '' then return 'already' end
  redis.call('HDEL', KEYS[1], 'control')
  return 'done'
end
if current == wanted then return 'already' end
redis.call('HSET', KEYS[1], 'control', wanted)
return 'done'
