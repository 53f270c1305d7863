-- Recall first reads only the keys of a user's newest episodes (id,
-- conversation, seq; memory/long_term, recent_episode_keys) and takes their
-- vectors from memory. With the keys in the index that query never touches
-- the table, whose rows (text plus a ~2 KB embedding) hold one or two
-- episodes per page: under concurrent writes a SQLite reader's page cache
-- is dropped at every commit, so the table lookups were ~200 scattered
-- pages read again per turn, the index is a few contiguous ones
-- (docs/performance.md, "Episode keys from the index").
CREATE INDEX episodes_recent_keys ON episodes (user_id, created_at DESC, id, conversation_id, seq);
DROP INDEX episodes_by_user_time;
