#!lua flags=allow-oom
-- The maintenance leader's tick of a concurrency group: keeps `seen` fresh while Redis is up, so that only a
-- real outage looks like a silence to the group's scripts (group_touch in _lib.lua).
-- KEYS: slots seen
group_touch(KEYS[1], KEYS[2], now_ms())
return 1
