-- One row per (user, memory text): restating a fact refreshes its lifetime
-- instead of storing it twice.
CREATE UNIQUE INDEX memories_user_content ON memories (user_id, content);
