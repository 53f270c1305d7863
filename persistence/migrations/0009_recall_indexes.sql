-- Recall reads a bounded, index-ordered slice of a user's history per turn
-- (docs/performance.md, "Flat with history"): the newest episodes and
-- memories by (user_id, created_at DESC, id), the order the queries ask
-- for, so neither is sorted nor scanned whole however long the history.
-- Episodes keep their recall embedding (base64 float32, memory/long_term)
-- in the existing `embedding` column, written when they are stored.
CREATE INDEX episodes_by_user_time ON episodes (user_id, created_at DESC, id);
DROP INDEX episodes_by_user;
CREATE INDEX memories_by_user_time ON memories (user_id, created_at DESC, id);
DROP INDEX memories_by_user;
