#!lua flags=allow-oom
-- Cancel a workflow: every member that has not started ends cancelled (none of them is released afterwards),
-- a running member is asked to stop as cancel.lua asks; dependents outside the workflow (depends_on) are told
-- of the cancelled members (lua/_deps.lua). Repeating it changes nothing more.
-- KEYS: wf_record
-- USES: deps
-- ARGV[1] events maxlen  ARGV[2] finished-job ttl ms  ARGV[3] '' (the whole workflow, in one slot), or on a
-- Cluster for a workflow spanning slots: 'mark' (only the record's cancelled_at, in the home queue's slot), then
-- 'part' with ARGV[4...] the ids of its members in one queue (KEYS: that queue's record key, never written; a
-- message to another slot then waits 5 s for the maintenance relayer, so that the canceller, which relays them
-- once every part is cancelled, does not release a `run` dependent a later part is about to cancel).
-- Returns {cancelled, asked to stop}, or {-1, 0} when the workflow is unknown.
local maxlen, ttl, mode = ARGV[1], ARGV[2], ARGV[3]
local now = now_ms()
local record = {}
if mode == 'part' then
  local base = string.match(KEYS[1], '^(.*)wf:')
  for a = 4, #ARGV do
    record[#record + 1] = 'step:'
    record[#record + 1] = string.match(base, '{q:(.-)}') .. '|' .. ARGV[a]
  end
  dep_due_ms = 5000
else
  if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
  redis.call('HSETNX', KEYS[1], 'cancelled_at', now)
  if mode == 'mark' then return {0, 0} end
  record = redis.call('HGETALL', KEYS[1])
end
local ended = {}
local asked, cancelled = 0, 0
-- First every member not started ends, so that no member's end releases another one.
for f = 1, #record, 2 do
  if string.sub(record[f], 1, 5) == 'step:' then
    local job_key, queue, job_id = dep_job(record[f + 1])
    local base = dep_base(queue)
    local h = redis.call('HMGET', job_key, 'state', 'cancel_requested', 'kids')
    if IS_WAITING[h[1]] then  -- not started: out of its set (the ready one through unready: a group's held set too)
      unready(base .. 'ready', job_key, job_id)
      if STATE_SET[h[1]] ~= 'ready' then redis.call('ZREM', base .. STATE_SET[h[1]], job_id) end
      redis.call('ZADD', base .. STATE_SET[CANCELLED], now, job_id)
      redis.call('HSET', job_key, 'state', CANCELLED, 'finished_at', now)
      finish(job_key, ttl)
      emit(base .. 'events', maxlen, job_id, 'cancelled', CANCELLED, {'workflow', 'cancelled'})
      cancelled = cancelled + 1
      if h[3] == '1' then ended[#ended + 1] = {job_key, queue, job_id} end
    elseif h[1] == RUNNING and h[2] ~= '1' then
      redis.call('HSET', job_key, 'cancel_requested', 1)
      emit(base .. 'events', maxlen, job_id, 'cancel_requested', RUNNING)
      asked = asked + 1
    end
  end
end
for _, e in ipairs(ended) do deps_ended(e[1], e[2], e[3], CANCELLED, 'null', now, maxlen) end
return {cancelled, asked}
