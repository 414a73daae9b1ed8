-- Move due scheduled jobs to the ready set (the maintenance loop's half of promotion; claim does it too).
-- KEYS[1] scheduled  KEYS[2] ready  KEYS[3] seq  KEYS[4] wake  KEYS[5] events
-- ARGV[1] job key prefix  ARGV[2] events maxlen  ARGV[3] limit
-- Returns the number promoted.
return promote_due(ARGV[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[2], now_ms(), tonumber(ARGV[3]))
