#!lua flags=allow-oom
-- Record a failed (or interrupted) attempt; retry it later, dead-letter it, or end it.
-- KEYS: active scheduled dead failed cancelled unique events stats drain
-- USES: deps
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] finished-job ttl ms  ARGV[4] id  ARGV[5] token
-- ARGV[6] outcome ('failed', 'timeout', 'cancelled', 'shutdown')  ARGV[7] retry wanted (1/0)
-- ARGV[8] retry delay ms  ARGV[9] error as JSON object {error_class, message, traceback, top_frame}
-- ARGV[10] runtime_ms
-- Returns {code, state}: code 1 = recorded, 0 = stale token; state is the job's new state.
local prefix, maxlen, ttl, job_id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local outcome, retry, delay, err = ARGV[6], ARGV[7] == '1', tonumber(ARGV[8]), cjson.decode(ARGV[9])
drain_intake_at(9, prefix, maxlen)  -- a handed job's hash
local job_key = prefix .. job_id
local f = redis.call('HMGET', job_key, 'token', 'state', 'attempts', 'max_retries', 'dead_letter', 'task',
                     'enqueued_at', 'kids')
if f[1] ~= token or f[2] ~= RUNNING then return {0, f[2] or ''} end
local now = now_ms()
local task = f[6] or ''
local entry = close_attempt(job_key, now, outcome, err)
redis.call('ZREM', KEYS[1], job_id)
redis.call('HSET', job_key, 'last_error', cjson.encode({error_class = err.error_class, message = err.message,
           at = now, outcome = outcome}))
local ran = tonumber(ARGV[10]) or 0
count(KEYS[8], now, 'failed', task)
count(KEYS[8], now, 'runtime_ms', task, ran)
count(KEYS[8], now, 'fail_h:' .. hist_bucket(ran), task)
count(KEYS[8], now, 'e2e_fail_h:' .. hist_bucket(now - (tonumber(f[7]) or now)), task)
local state
if outcome == 'cancelled' then
  state = CANCELLED
  redis.call('ZADD', KEYS[5], now, job_id)
elseif retry and tonumber(f[3]) <= tonumber(f[4]) then
  state = RETRYING
  redis.call('ZADD', KEYS[2], now + delay, job_id)
  redis.call('HSET', job_key, 'state', state, 'run_at', now + delay)
  emit(KEYS[7], maxlen, job_id, 'retrying', state, {'entry', entry})
  count(KEYS[8], now, 'retried', task)
  note_retry(KEYS[8], now, task, tonumber(f[3]) or 0)
  return {1, state}
elseif f[5] == 'discard' then
  state = FAILED
  redis.call('ZADD', KEYS[4], now, job_id)
else
  state = DEAD
  redis.call('ZADD', KEYS[3], now, job_id)
  count(KEYS[8], now, 'dead', task)
end
redis.call('HSET', job_key, 'state', state, 'finished_at', now)
release_unique(KEYS[6], job_key, job_id)
if state ~= DEAD then finish(job_key, ttl) end
emit(KEYS[7], maxlen, job_id, state, state, {'entry', entry})
if f[8] == '1' then deps_ended(job_key, dep_queue(prefix), job_id, state, 'null', now, maxlen) end
return {1, state}
