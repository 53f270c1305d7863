-- A turn's two messages are unique by (request, role) within their
-- conversation. That index was keyed (conversation_id, request_id, role):
-- every insert landed in its conversation's part of it, so a group commit
-- of turns from many conversations rewrote a leaf per conversation, about
-- a third of the WAL written per turn at 64 streams, with
-- messages_by_request (request_id) beside it. Keyed (request_id, role,
-- conversation_id) it enforces the same uniqueness, answers the look-ups
-- by request id alone (re-attaching to a turn) as well as with its
-- conversation (a retried request), and, as server-made request ids sort
-- by time, grows at its right end (docs/performance.md, "One index by
-- request id, in time order"). A constraint of the table itself, so the
-- table is made again.
CREATE TABLE messages_v12 (
  id TEXT PRIMARY KEY,
  conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  seq BIGINT NOT NULL,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  citations TEXT NOT NULL DEFAULT '[]',
  debug TEXT,
  completed INTEGER NOT NULL DEFAULT 1,
  request_id TEXT,
  created_at BIGINT NOT NULL,
  UNIQUE (conversation_id, seq),
  UNIQUE (request_id, role, conversation_id)
);
INSERT INTO messages_v12 (id, conversation_id, seq, role, content, citations, debug, completed,
                          request_id, created_at)
  SELECT id, conversation_id, seq, role, content, citations, debug, completed, request_id,
         created_at
  FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v12 RENAME TO messages;
