-- Which version of each knowledge base's entity graph the entities and
-- relations tables hold (a signature of the rows), so a restart or an
-- unchanged re-ingest does not rewrite them.
CREATE TABLE kb_graph_state (
  kb TEXT PRIMARY KEY,
  signature TEXT NOT NULL,
  entities BIGINT NOT NULL,
  relations BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
