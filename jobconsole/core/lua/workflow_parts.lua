#!lua flags=allow-oom
-- A workflow spanning slots on a Cluster, created in steps that each stay in one slot (core/workflows.py,
-- docs/architecture.md "Crossing slots"): its record first, in its home queue's slot, marked `creating`; each
-- queue's part placed by workflow.lua ('part': the roots held waiting, nothing claimable); then the record
-- committed (placing -> open) and each queue's held roots released; then the mark dropped. A creation whose
-- creator vanished is found in `wf_creating` past its deadline and rolled back while it is `placing`, finished
-- once it is `open`: nothing of it runs before every part is in, and every part runs once it is open.
-- USES: deps
-- KEYS: wf_record wf_creating
-- ARGV[1] operation, then its own arguments. In the home queue's slot (wf_record: the record):
--   begin <id> <name> <home> <keep ms> <deadline ms> <step name> <ref> ...  -> 'begun', 'exists', or
--         {'resume', step name, ref, ...} (a creation of this id not done yet: a repeated call finishes it)
--   commit <id>   placing -> open                                         -> 'open' | 'aborting' | 'gone' | 'done'
--   abort <id>    placing -> aborting (a creation past rescue)            -> 'aborting' | 'open' | 'gone' | 'done'
--   done <id>     open: the mark dropped; aborting: the record deleted    -> 'done'
-- In a member queue's slot (wf_record: that queue's key of the record, never written):
--   open <id> <events maxlen> <job id> ...     the held roots released   -> their states, in order ('' not held)
--   unplace <id> <events maxlen> <job id> ...  a part taken out again    -> number deleted
local op, wf_id = ARGV[1], ARGV[2]
local now = now_ms()
if op == 'begin' then
  local creating = redis.call('HGET', KEYS[1], 'creating')
  if creating == 'placing' or creating == 'open' then
    local out, record = {'resume'}, redis.call('HGETALL', KEYS[1])
    for f = 1, #record, 2 do
      if string.sub(record[f], 1, 5) == 'step:' then
        out[#out + 1] = string.sub(record[f], 6)
        out[#out + 1] = record[f + 1]
      end
    end
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), wf_id)  -- its new creator's deadline
    return out
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
  local name, home, keep, deadline = ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
  redis.call('HSET', KEYS[1], 'id', wf_id, 'name', name, 'queue', home, 'created_at', now,
             'size', (#ARGV - 6) / 2, 'creating', 'placing')
  local record = {'HSET', KEYS[1]}
  for f = 7, #ARGV, 2 do  -- in slices: unpack has a limit
    record[#record + 1] = 'step:' .. ARGV[f]
    record[#record + 1] = ARGV[f + 1]
    if #record >= 2002 or f + 1 >= #ARGV then
      redis.call(unpack(record))
      record = {'HSET', KEYS[1]}
    end
  end
  if keep > 0 then redis.call('PEXPIRE', KEYS[1], keep) end
  redis.call('ZADD', KEYS[2], now + deadline, wf_id)
  return 'begun'
end
if op == 'commit' or op == 'abort' or op == 'done' then
  local creating = redis.call('HGET', KEYS[1], 'creating')
  if not creating then
    if op ~= 'done' then return redis.call('EXISTS', KEYS[1]) == 1 and 'done' or 'gone' end
    redis.call('ZREM', KEYS[2], wf_id)
    return 'done'
  end
  if op == 'commit' and creating == 'placing' then creating = 'open' end
  if op == 'abort' and creating == 'placing' then creating = 'aborting' end
  if op == 'done' then
    if creating == 'aborting' then redis.call('DEL', KEYS[1]) else redis.call('HDEL', KEYS[1], 'creating') end
    redis.call('ZREM', KEYS[2], wf_id)
    return 'done'
  end
  redis.call('HSET', KEYS[1], 'creating', creating)
  return creating
end
local maxlen = ARGV[3]
local queue = string.match(KEYS[1], '{q:(.-)}')
local base = dep_base(queue)
if op == 'open' then
  local out = {}
  for a = 4, #ARGV do
    local job_key = base .. 'job:' .. ARGV[a]
    local h = redis.call('HMGET', job_key, 'held', 'workflow', 'state')
    if h[1] == '1' and h[2] == wf_id and h[3] == WAITING then
      redis.call('HDEL', job_key, 'held')
      dep_release(job_key, queue, ARGV[a], now, maxlen)
      out[#out + 1] = redis.call('HGET', job_key, 'state')
    else
      out[#out + 1] = ''
    end
  end
  return out
end
if op == 'unplace' then  -- nothing of a part ran: every member is still waiting (its roots held)
  local deleted = 0
  for a = 4, #ARGV do
    local job_id = ARGV[a]
    local job_key = base .. 'job:' .. job_id
    local h = redis.call('HMGET', job_key, 'workflow', 'state')
    if h[1] == wf_id and h[2] == WAITING then
      redis.call('ZREM', base .. 'waiting', job_id)
      redis.call('DEL', job_key, job_key .. ':attempts', job_key .. ':deps', job_key .. ':ended',
                 job_key .. ':results', job_key .. ':children', job_key .. ':relayed')
      emit(base .. 'events', maxlen, job_id, 'deleted', 'deleted', {'from', WAITING, 'workflow', 'rolled back'})
      deleted = deleted + 1
    end
  end
  return deleted
end
return redis.error_reply('unknown operation ' .. tostring(op))
