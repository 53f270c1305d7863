-- KB content shared through the store (docs/cluster.md): every ingest
-- bumps its KB's version and stamps the documents it wrote with it, so a
-- node brings its local index up to date by reading the documents of
-- versions it has not seen. config holds the KB's settings (JSON).
ALTER TABLE knowledge_bases ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN body TEXT NOT NULL DEFAULT '';
CREATE INDEX documents_by_version ON documents (kb, version);
