-- Re-attaching to a turn by its request id alone (GET
-- /api/v1/chat/stream/{request_id}) finds its stored answer through this
-- index instead of a scan of every message.
CREATE INDEX messages_by_request ON messages (request_id);
