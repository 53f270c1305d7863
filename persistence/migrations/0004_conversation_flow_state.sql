-- What a guided workflow (seed 003) remembers of a conversation between
-- turns: the pending intent, the slots filled so far and how many times it
-- asked for missing ones (JSON). Dropped with the conversation or a clear.
CREATE TABLE conversation_flow_state (
  conversation_id TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
  state TEXT NOT NULL,
  updated_at BIGINT NOT NULL
);
