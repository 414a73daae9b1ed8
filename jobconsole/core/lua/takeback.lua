#!lua flags=allow-oom
-- Take back every running job of one queue leased to a worker that stopped heartbeating (core/lapse.py): the
-- same treatment as a lease that ran out (recover.lua), at once, whatever the lease. Only jobs whose lease holder
-- is that worker; their token is cleared, so the worker, if it was only paused, cannot renew or acknowledge them
-- when it comes back. Its idle registration and inbox go too, so no enqueue hands it another job.
-- KEYS: active ready dead failed unique events wake seq stats cancelled idle inbox drain
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] finished-job ttl ms  ARGV[4] worker id
-- ARGV[5] Redis ms of its last heartbeat (0: unknown)
-- Returns {requeued ids..., '|', ended ids...}.
local prefix, maxlen, ttl, worker, beat = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
drain_intake_at(13, prefix, maxlen)  -- a job handed to it may still be an intake entry
local now = now_ms()
for _, member in ipairs(redis.call('ZRANGE', KEYS[11], 0, -1)) do
  local ok, reg = pcall(cjson.decode, member)
  if ok and type(reg) == 'table' and reg[1] == worker then redis.call('ZREM', KEYS[11], member) end
end
redis.call('DEL', KEYS[12])
local message = 'worker ' .. worker .. ' stopped heartbeating; last heartbeat '
  .. (beat > 0 and (seconds_words(now - beat) .. ' before recovery') or 'unknown')
local k = {active = KEYS[1], ready = KEYS[2], dead = KEYS[3], failed = KEYS[4], unique = KEYS[5], events = KEYS[6],
           wake = KEYS[7], seq = KEYS[8], stats = KEYS[9], cancelled = KEYS[10]}
local requeued, ended = {}, {}
-- Every running job of the queue is looked at (one HGET each), as release_orphans does: a worker's jobs have
-- no index of their own, which keeps claims and acks, the hot path, free of one more write per job.
for _, job_id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if redis.call('HGET', prefix .. job_id, 'worker') == worker then
    local done = lose_job_with_deps(k, prefix, maxlen, ttl, job_id, now, message)
    if done == 'requeued' then
      requeued[#requeued + 1] = job_id
    elseif done == 'ended' then
      ended[#ended + 1] = job_id
    end
  end
end
requeued[#requeued + 1] = '|'
for _, job_id in ipairs(ended) do requeued[#requeued + 1] = job_id end
return requeued
