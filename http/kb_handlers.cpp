// /api/v1/kbs: the served knowledge bases (list, create, info), document
// ingestion (JSON or NDJSON), hit testing (search) and the retrieval
// pipeline a KB runs. Every route answers 404 on a node without the KB API
// and for an unknown KB.
#include <caf/actor_system.hpp>

#include "http/auth.hpp"
#include "http/caf_asio.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "pipeline/graph.hpp"
#include "protocol/kb_json.hpp"
#include "retrieval/kb_info_json.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/kb_store.hpp"

namespace ragtor::http {

namespace {

using snapshot_ptr = std::shared_ptr<const kb_snapshot>;

// False after answering 404 when this node serves no KB API.
boost::asio::awaitable<bool> has_kb_api(handler_context& ctx, exchange& ex) {
  if (ctx.settings.catalog)
    co_return true;
  co_await reply_error(ex, 404, "not_found", "no knowledge-base API on this node");
  co_return false;
}

// The KB the path names; null after answering 404.
boost::asio::awaitable<snapshot_ptr> kb_of_path(handler_context& ctx, exchange& ex) {
  if (!co_await has_kb_api(ctx, ex))
    co_return nullptr;
  const auto& kb = ex.params["kb"];
  if (auto snap = ctx.settings.catalog->get(kb))
    co_return snap;
  co_await reply_error(ex, 404, "not_found", "unknown knowledge base \"" + kb + "\"");
  co_return nullptr;
}

}  // namespace

bool is_ndjson_type(std::string_view content_type) {
  return content_type.find("ndjson") != std::string_view::npos
         || content_type.find("jsonl") != std::string_view::npos;
}

handler_result list_kbs(handler_context& ctx, exchange& ex) {
  if (!co_await has_kb_api(ctx, ex))
    co_return;
  std::vector<snapshot_ptr> snaps;
  for (auto& name : ctx.settings.catalog->names())
    if (!ex.key || ex.key->allows_kb(name))  // a key limited to some KBs sees only those
      snaps.push_back(ctx.settings.catalog->get(name));
  co_await reply_json(ex, 200, kb_list_json(snaps));
}

handler_result create_kb(handler_context& ctx, exchange& ex) {
  if (!co_await has_kb_api(ctx, ex))
    co_return;
  auto s = kb_settings_from_json(ex.body);
  if (!s)
    co_return co_await reply_caf_error(ex, s.error());
  if (auto err = check_outbound_hosts(*s, ctx.settings.allowed_outbound_hosts))
    co_return co_await reply_error(ex, 400, "invalid_request", err->message, err->field);
  auto created = co_await async_request<kb_settings>(ctx.sys, ctx.settings.kb_admin, store_timeout,
                                                     atom::kb_create_v, *s);
  if (!created)
    co_return co_await reply_caf_error(ex, created.error());
  // (No temporaries from a ?: inside co_await: gcc 12 destroys them twice.)
  std::string body;
  if (auto snap = ctx.settings.catalog->get(created->name))
    body = kb_info_json(*snap);
  else
    body = to_json(*created);
  co_await reply_json(ex, 201, std::move(body));
}

handler_result get_kb(handler_context& ctx, exchange& ex) {
  auto snap = co_await kb_of_path(ctx, ex);
  if (!snap)
    co_return;
  co_await reply_json(ex, 200, kb_info_json(*snap));
}

handler_result kb_pipeline(handler_context& ctx, exchange& ex) {
  auto snap = co_await kb_of_path(ctx, ex);
  if (!snap)
    co_return;
  co_await reply_json(ex, 200, pipeline_json(snap->settings, ctx.settings.reranker));
}

handler_result ingest_documents(handler_context& ctx, exchange& ex) {
  auto snap = co_await kb_of_path(ctx, ex);
  if (!snap)
    co_return;
  api_parse<std::vector<document>> docs;
  if (ex.streamed) {
    docs.ok = ex.streamed->ok();
    docs.error = ex.streamed->error();
    docs.value = std::move(ex.streamed->documents());
  } else {
    docs = parse_documents_body(ex.body, is_ndjson_type(ex.content_type),
                                ctx.settings.max_ingest_documents);
  }
  if (!docs.ok)
    co_return co_await reply_request_error(ex, docs.error);
  const auto& kb = ex.params["kb"];
  auto report = co_await async_request<ingest_report>(ctx.sys, ctx.settings.kb_admin,
                                                      ctx.settings.ingest_timeout,
                                                      atom::kb_ingest_v, kb, std::move(docs.value));
  if (!report)
    co_return co_await reply_caf_error(ex, report.error());
  co_await reply_json(ex, 200, ingest_report_json(kb, *report));
}

handler_result search_kb(handler_context& ctx, exchange& ex) {
  auto snap = co_await kb_of_path(ctx, ex);
  if (!snap)
    co_return;
  auto& settings = ctx.settings;
  auto sr = parse_search_request(ex.body, settings.limits.max_body_bytes,
                                 settings.limits.max_message_bytes);
  if (!sr.ok)
    co_return co_await reply_request_error(ex, sr.error);
  std::string agent_type = sr.value.agent_type;
  if (agent_type.empty())
    agent_type = snap->settings.default_agent_type;
  if (agent_type.empty())
    agent_type = settings.default_agent_type;
  if (!is_agent_type(agent_type))
    co_return co_await reply_error(
        ex, 400, "invalid_request",
        "field \"agent_type\" must be one of naive_rag_agent, hybrid_agent, graph_agent, "
        "deep_research_agent, fusion_agent",
        "agent_type");
  retrieve_options ro;
  ro.top_k = sr.value.top_k > 0         ? sr.value.top_k
             : snap->settings.top_k > 0 ? snap->settings.top_k
                                        : settings.default_top_k;
  const auto& kb = ex.params["kb"];
  auto result = co_await async_request<retrieval_result>(
      ctx.sys, settings.pool, store_timeout, atom::retrieve_v, format_worker_name(kb, agent_type),
      sr.value.query, std::string{"search"}, ro);
  if (!result)
    co_return co_await reply_caf_error(ex, result.error());
  co_await reply_json(ex, 200, retrieval_result_json(*result));
}

}  // namespace ragtor::http
