-- API keys (docs/security.md): only the SHA-256 of a key is stored, never
-- the key. scopes and kbs are comma-separated lists (kbs '' = every KB);
-- rate is requests per second (0 = no limit), burst the bucket's size;
-- revoked_at NULL = active. Names stay unique after revocation, so a name
-- in a log always means one key.
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  hash TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL DEFAULT '',
  user_prefix TEXT NOT NULL DEFAULT '',
  scopes TEXT NOT NULL DEFAULT '',
  kbs TEXT NOT NULL DEFAULT '',
  rate DOUBLE PRECISION NOT NULL DEFAULT 0,
  burst BIGINT NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);
