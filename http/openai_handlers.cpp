// The OpenAI-compatible façade (docs/openai.md): GET /v1/models names the
// knowledge bases as models, POST /v1/chat/completions runs a turn through
// the same session and stream actors as /api/v1/chat and answers in the
// OpenAI shapes (http/openai_facade.hpp). With an X-Session-Id header the
// turn is stored and remembered like any other; without one it is
// stateless: the messages array is the history and nothing is stored.
#include <chrono>

#include <spdlog/spdlog.h>
#include <boost/asio/use_awaitable.hpp>
#include <caf/actor_system.hpp>

#include "http/caf_asio.hpp"
#include "protocol/log.hpp"
#include "http/connection_io.hpp"
#include "http/auth.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "http/openai_facade.hpp"
#include "http/turn_follow.hpp"
#include "protocol/chat_request_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_object.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor::http {

namespace {
const log::component lg{"http"};
}  // namespace

namespace net = boost::asio;

namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// When this process started: the `created` of every model.
const int64_t started_at = unix_seconds();

net::awaitable<void> reply_openai_error(exchange& ex, const openai::api_error& e) {
  co_await reply_json(ex, e.status, openai::error_json(e));
}

openai::api_error error_of(const caf::error& err) {
  auto he = http_error_of(code_of(err));
  openai::api_error e;
  e.status = he.status;
  e.message = error_message(err);
  e.code = std::string{he.code};
  e.type = he.status == 429   ? "rate_limit_error"
           : he.status >= 500 ? "server_error"
                              : "invalid_request_error";
  return e;
}

// `data: <json>\n\n`
void frame(std::string& out, std::string_view json) {
  out += "data: ";
  out += json;
  out += "\n\n";
}

}  // namespace

handler_result openai_models(handler_context& ctx, exchange& ex) {
  std::vector<std::string> kbs;
  if (ctx.settings.catalog)
    for (auto& name : ctx.settings.catalog->names())
      if (!ex.key || ex.key->allows_kb(name))  // a key limited to some KBs sees only those
        kbs.push_back(name);
  co_await reply_json(ex, 200, openai::models_json(openai::model_ids(kbs), started_at));
}

handler_result openai_chat(handler_context& ctx, exchange& ex) {
  flight_counter::guard in_flight{ctx.chats};
  auto& settings = ctx.settings;
  auto parsed = openai::parse_completion_request(ex.body, settings.limits.max_body_bytes,
                                                 settings.limits.max_message_bytes);
  if (!parsed.ok)
    co_return co_await reply_openai_error(ex, parsed.error);
  auto& oreq = parsed.request;
  if (!oreq.target.kb.empty() && (!settings.kb_exists || !settings.kb_exists(oreq.target.kb))) {
    openai::api_error e;
    e.status = 404;
    e.message = "the model `" + oreq.model + "` does not exist: no knowledge base \""
                + oreq.target.kb + "\"";
    e.param = "model";
    e.code = "model_not_found";
    co_return co_await reply_openai_error(ex, e);
  }
  auto max_id = settings.limits.max_id_chars;
  if (!oreq.user.empty() && !is_valid_id(oreq.user, max_id)) {
    openai::api_error e;
    e.message = "`user` " + id_field_error("user", max_id).message;
    e.param = "user";
    co_return co_await reply_openai_error(ex, e);
  }

  chat_request req;
  req.request_id = new_request_id();
  req.fresh_request_id = true;
  req.message = oreq.question;
  req.kb_prefix = oreq.target.general ? "general" : oreq.target.kb;
  req.agent_type = oreq.target.agent_type;
  req.temperature = oreq.temperature;
  req.max_tokens = oreq.max_tokens;
  auto session = ex.header ? ex.header("X-Session-Id") : std::string_view{};
  if (!session.empty()) {
    // A conversation: stored and remembered like /api/v1/chat.
    openai::api_error e;
    if (oreq.user.empty())
      e.message = "`user` is required with X-Session-Id (the conversation belongs to a user)";
    else if (!is_valid_id(session, max_id))
      e.message = "X-Session-Id " + id_field_error("session_id", max_id).message;
    if (!e.message.empty()) {
      e.param = oreq.user.empty() ? "user" : "X-Session-Id";
      co_return co_await reply_openai_error(ex, e);
    }
    req.user_id = oreq.user;
    req.session_id = std::string{session};
  } else {
    req.stateless = true;
    req.user_id = oreq.user.empty() ? "openai" : oreq.user;
    req.context = std::move(oreq.history);
  }

  auto ticket = co_await async_request<turn_ticket>(
      ctx.sys, ctx.sessions, caf::timespan{settings.turn_timeout}, atom::open_turn_v, req);
  if (!ticket) {
    lg->warn("openai: request {} refused: {}", req.request_id, ctx.sys.render(ticket.error()));
    co_return co_await reply_openai_error(ex, error_of(ticket.error()));
  }

  openai::completion_meta meta{"chatcmpl-" + req.request_id, unix_seconds(), oreq.model};
  openai::turn_outcome outcome;
  auto& sock = ex.io.socket;
  if (oreq.stream) {
    bool first = true;
    bool include_usage = oreq.include_usage;
    openai::turn_outcome* out = &outcome;
    auto format = [&meta, out, first, include_usage](std::string& text,
                                                     const event_batch& batch) mutable {
      if (first) {
        frame(text, openai::role_chunk(meta));
        first = false;
      }
      for (auto& ev : batch) {
        auto piece = out->add(ev);
        if (!piece.empty())
          frame(text, openai::content_chunk(meta, piece));
      }
      if (!out->done())
        return;
      if (auto failed = out->failure()) {
        frame(text, openai::error_json(*failed));
      } else {
        if (auto sources = out->sources_text(); !sources.empty())
          frame(text, openai::content_chunk(meta, sources));
        frame(text, openai::finish_chunk(meta, out->finish_reason(), out->citations_json()));
        if (include_usage)
          frame(text, openai::usage_chunk(meta, out->usage()));
      }
      text += "data: [DONE]\n\n";
    };
    co_await follow_turn(ctx, ex, ticket->stream, 0, on_hangup::cancel,
                         [&](event_pipe& pipe, const std::function<void()>& taken) {
                           return write_sse_as(sock, pipe, sse_timing_of(settings), format, false,
                                               taken);
                         });
    co_return;
  }
  turn_writer collect = [&](event_pipe& pipe,
                            const std::function<void()>& taken) -> net::awaitable<bool> {
    while (!outcome.done()) {
      event_batch batch;
      try {
        batch = co_await next_batch(pipe.channel());
      } catch (const boost::system::system_error&) {
        co_return false;  // the client went away
      }
      for (auto& ev : batch)
        outcome.add(ev);
      if (!outcome.done())
        taken();
    }
    try {
      if (auto failed = outcome.failure())
        co_await reply_openai_error(ex, *failed);
      else
        co_await reply_json(ex, 200, openai::completion_json(meta, outcome));
    } catch (const boost::system::system_error&) {
    }
    co_return true;
  };
  co_await follow_turn(ctx, ex, ticket->stream, 0, on_hangup::cancel, collect);
}

}  // namespace ragtor::http
