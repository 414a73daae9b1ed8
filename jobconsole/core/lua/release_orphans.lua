#!lua flags=allow-oom
-- Give back jobs leased to this worker that it does not know it holds: a claim whose reply was lost
-- (connection cut after Redis ran it), or jobs an enqueue handed to its inbox that it never popped
-- (it was stopping). They never started, so no attempt is used up. Also drops the worker's idle
-- registration, so no enqueue hands it another job until its next claim.
-- KEYS: active ready events wake seq idle inbox drain
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] worker id  ARGV[4] its idle registration
-- then the ids the worker does hold
-- Returns the ids given back.
local prefix, maxlen, worker = ARGV[1], ARGV[2], ARGV[3]
drain_intake_at(8, prefix, maxlen)  -- handed jobs' hashes
redis.call('ZREM', KEYS[6], ARGV[4])
redis.call('DEL', KEYS[7])
local held = {}
for a = 5, #ARGV do held[ARGV[a]] = true end
local now = now_ms()
local released = {}
for _, job_id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if not held[job_id] then
    local job_key = prefix .. job_id
    local f = redis.call('HMGET', job_key, 'worker', 'state')
    if f[1] == worker and f[2] == RUNNING then
      local entry = close_attempt(job_key, now, 'requeued', {message = 'lease granted but never received; never started'})
      redis.call('HINCRBY', job_key, 'attempts', -1)
      redis.call('HSET', job_key, 'token', '')
      redis.call('ZREM', KEYS[1], job_id)
      make_ready(job_key, job_id, KEYS[2], KEYS[5], KEYS[4], now, true)
      emit(KEYS[3], maxlen, job_id, 'requeued', QUEUED, {'entry', entry})
      released[#released + 1] = job_id
    end
  end
end
return released
