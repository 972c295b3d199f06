package redisbackend

import "github.com/redis/go-redis/v9"

// Reply codes of writeScript (first element of its array reply).
const (
	replyOK            = 1
	replyNotFound      = 2
	replyAlreadyExists = 3
	replyConflict      = 4
)

// Operations of writeScript (ARGV[1]).
const (
	opCreate = "c"
	opUpdate = "u"
	opDelete = "d"
)

// writeScript performs one create, update or delete of one type atomically.
//
//	KEYS: rev, objs, log (one hash tag, so one cluster slot)
//	ARGV: op ("c"|"u"|"d"), key ("<ns>/<name>"), payload (protobuf without resource_version and
//	      uid; unused for "d"), uid (create: the object's uid; update/delete: the uid
//	      precondition or ""), rv (the resourceVersion precondition or "")
//
// Stored values are "<rev>|<len(uid)>|<uid><payload>". Replies:
//
//	{1, rev, "<unix µs>"[, prev]}            committed; prev is the old stored value
//	{2}                                      update/delete of a missing key
//	{3}                                      create of a live key
//	{4, field, expected, actual, "<rev>"}    precondition failed; rev is the type's current one
//
// XADD is the first command that writes: it is the only one that can fail on well-formed keys
// (an ID not above the stream's top item), and a failing script keeps the effects of the commands
// it ran before the error.
var writeScript = redis.NewScript(`
local op = ARGV[1]
local key = ARGV[2]
local old = redis.call('HGET', KEYS[2], key)
local oldrev, olduid, uidpart
if old then
  local p1 = string.find(old, '|', 1, true)
  local p2 = string.find(old, '|', p1 + 1, true)
  local n = tonumber(string.sub(old, p1 + 1, p2 - 1))
  oldrev = string.sub(old, 1, p1 - 1)
  olduid = string.sub(old, p2 + 1, p2 + n)
  uidpart = string.sub(old, p1 + 1, p2 + n)
end
if op == 'c' then
  if old then
    return {3}
  end
  uidpart = string.len(ARGV[4]) .. '|' .. ARGV[4]
else
  if not old then
    return {2}
  end
  if ARGV[4] ~= '' and ARGV[4] ~= olduid then
    return {4, 'uid', ARGV[4], olduid, redis.call('GET', KEYS[1]) or '0'}
  end
  if ARGV[5] ~= '' and ARGV[5] ~= oldrev then
    return {4, 'resourceVersion', ARGV[5], oldrev, redis.call('GET', KEYS[1]) or '0'}
  end
end
local rev = (tonumber(redis.call('GET', KEYS[1])) or 0) + 1
local revs = string.format('%d', rev)
local t = redis.call('TIME')
local ts = t[1] .. string.format('%06d', tonumber(t[2]))
if op == 'd' then
  redis.call('XADD', KEYS[3], revs .. '-0', 't', 'd', 'k', key, 'p', old, 'ts', ts)
  redis.call('HDEL', KEYS[2], key)
else
  local new = revs .. '|' .. uidpart .. ARGV[3]
  if old then
    redis.call('XADD', KEYS[3], revs .. '-0', 't', 'm', 'k', key, 'o', new, 'p', old, 'ts', ts)
  else
    redis.call('XADD', KEYS[3], revs .. '-0', 't', 'a', 'k', key, 'o', new, 'ts', ts)
  end
  redis.call('HSET', KEYS[2], key, new)
end
redis.call('SET', KEYS[1], revs)
if old then
  return {1, rev, ts, old}
end
return {1, rev, ts}
`)

// compactScript raises the compacted revision of a type and trims its log.
//
//	KEYS: rev, compacted, log
//	ARGV: the requested revision
//
// It returns max(stored compacted, min(requested, current)) and trims every log entry at or
// below it (XTRIM MINID is exact: it never keeps an older entry, nor drops a newer one).
var compactScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1])) or 0
local old = tonumber(redis.call('GET', KEYS[2])) or 0
local want = tonumber(ARGV[1])
if want > cur then
  want = cur
end
if want <= old then
  return old
end
redis.call('SET', KEYS[2], string.format('%d', want))
redis.call('XTRIM', KEYS[3], 'MINID', string.format('%d-0', want + 1))
return want
`)
