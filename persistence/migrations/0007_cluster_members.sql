-- Cluster membership (docs/cluster.md, the Orleans approach): each node
-- writes its own row every heartbeat; peers read the table to find nodes
-- that are not in their seed list. status is what the node said of itself
-- (up, or left after a graceful shutdown); whether it is alive is judged by
-- heartbeat_at and by pings. Times are milliseconds since the epoch.
CREATE TABLE cluster_members (
  name TEXT PRIMARY KEY,
  address TEXT NOT NULL,
  roles TEXT NOT NULL DEFAULT '',
  kbs TEXT NOT NULL DEFAULT '',
  started_at BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL,
  status TEXT NOT NULL
);
