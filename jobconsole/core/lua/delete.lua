#!lua flags=allow-oom
-- Delete a job that is not running (cancel it first), with its history. A job deleted before it ended ends
-- as 'deleted' for its dependents (lua/_deps.lua): a failure to them.
-- USES: deps
-- KEYS: unique events sets
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] id  ARGV[4] expected state ('' = any but running):
-- a purge of dead letters deletes a job only while it is still dead.
-- Returns 'deleted', 'missing' or 'is:<state>' (running, or not the expected state).
local prefix, maxlen, job_id = ARGV[1], ARGV[2], ARGV[3]
local expected = ARGV[4] or ''
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'state', 'kids')
local state = f[1]
if not state then return 'missing' end
if state == RUNNING or (expected ~= '' and state ~= expected) then return 'is:' .. state end
leave_sets(job_key, job_id)
release_unique(KEYS[1], job_key, job_id)
if f[2] == '1' and not IS_TERMINAL[state] then
  deps_ended(job_key, dep_queue(prefix), job_id, 'deleted', 'null', now_ms(), maxlen)
end
redis.call('DEL', job_key, job_key .. ':attempts', job_key .. ':deps', job_key .. ':ended', job_key .. ':results',
           job_key .. ':children', job_key .. ':relayed')
emit(KEYS[2], maxlen, job_id, 'deleted', 'deleted', {'from', state})
return 'deleted'
