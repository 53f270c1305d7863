-- The store keeps each user's newest memories and episode vectors in memory
-- between turns (persistence/recall_index) and reads only rows newer than
-- the ones it holds. Rows are only ever added at the newest end, except
-- when something is deleted or a memory's lifetime is refreshed: those
-- writes bump the user's epoch here, in the same transaction, and a turn
-- that finds another epoch than the one its copy was read at reads the
-- user's recall rows again. Every node sees the bump (docs/performance.md,
-- "A per-user recall index").
CREATE TABLE recall_epochs (
  user_id TEXT PRIMARY KEY,
  epoch BIGINT NOT NULL
);
