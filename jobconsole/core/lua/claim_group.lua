#!lua flags=allow-oom
-- Claim up to N held jobs of one concurrency group, for a worker that holds N of the group's slots
-- (group_acquire.lua, in the group's own slot: the two cannot be one script on a cluster). Jobs are leased
-- as claim.lua leases them, oldest of the highest priority first; the worker gives back the slots it
-- could not use.
-- KEYS: ready active paused events seq stats limit
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] group  ARGV[4] N  ARGV[5] worker id  ARGV[6] host
-- ARGV[7] pid
-- Returns {now_ms, then per job LEASE_WIDTH values, flat (as claim.lua returns them)}; one 'started' event for them.
local prefix, maxlen, group, want = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local worker, host, pid = ARGV[5], ARGV[6], ARGV[7]
local now = now_ms()
local out = {now}
if redis.call('EXISTS', KEYS[3]) == 1 then return out end
local limit = tonumber(redis.call('GET', KEYS[7]) or '')
if limit then want = math.min(want, limit - redis.call('ZCARD', KEYS[2])) end
local held = held_key(KEYS[1], group)
if want > 0 then
  local popped = redis.call('ZPOPMIN', held, want)
  local n = #popped / 2
  local seq = tonumber(redis.call('INCRBY', KEYS[5], n)) - n
  local started = {ids = {}, attempts = {}}  -- one 'started' event for the jobs of this call (emit_jobs)
  local field = math.floor(now / 60000) .. '|'
  for p = 1, #popped, 2 do
    local job_id = popped[p]
    local job_key = prefix .. job_id
    local h = lease_fields(job_key)
    if h then
      seq = seq + 1
      local leased = lease(job_key, job_id, h, worker, host, pid, now, worker .. ':' .. seq, KEYS[2], KEYS[4],
                           maxlen, nil, started)
      for f = 1, LEASE_WIDTH do out[#out + 1] = leased[f] end
      local wait = now - (tonumber(h.ready_at) or tonumber(h.enqueued_at) or now)
      redis.call('HINCRBY', KEYS[6], field .. 'wait_ms|' .. (h.task or ''), wait)
      redis.call('HINCRBY', KEYS[6], field .. 'wait_h:' .. hist_bucket(wait) .. '|' .. (h.task or ''), 1)
    end
  end
  emit_jobs(KEYS[4], maxlen, started.ids, 'started', RUNNING, {'worker', worker}, {attempt = started.attempts})
end
if redis.call('EXISTS', held) == 0 then redis.call('SREM', groups_key(KEYS[1]), group) end
return out
