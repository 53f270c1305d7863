// The composition root: builds the actor system, spawns every long-lived
// actor, starts the HTTP server and runs the shutdown protocol (stop
// accepting -> cancel and store in-flight turns -> stop I/O -> stop actors
// -> close the store).
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <malloc.h>
#include <sys/resource.h>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <unistd.h>

#include "actors/scheduler.hpp"
#include "actors/admin/admin.hpp"
#include "actors/agents/agent_pool.hpp"
#include "memory/long_term.hpp"
#include "protocol/log.hpp"
#include "actors/cluster/cluster.hpp"
#include "actors/kb/kb_admin.hpp"
#include "actors/llm/extractive_llm.hpp"
#include "actors/llm/openai_llm.hpp"
#include "actors/memory/summarizer.hpp"
#include "actors/pipeline/planner.hpp"
#include "actors/router/router.hpp"
#include "actors/session/session.hpp"
#include "actors/store/store_actor.hpp"
#include "app/commands/commands.hpp"
#include "app/commands/load.hpp"
#include "http/auth.hpp"
#include "http/open_files.hpp"
#include "http/server.hpp"
#include "llm/openai_client.hpp"
#include "pipeline/http_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/type_ids.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/kb_settings.hpp"
#include "retrieval/kb_store.hpp"

namespace ragtor {

namespace {
const log::component lg{"serve"};
}  // namespace

namespace {

// Blocks SIGINT/SIGTERM in every thread (threads inherit the mask), so the
// main thread can wait for them with sigwait.
sigset_t block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Whether answers come from a model: generator.provider "openai", or
// "auto" with llm.base_url set.
bool generator_uses_model(const config& cfg) {
  return cfg.generator.provider == "openai"
         || (cfg.generator.provider == "auto" && !cfg.llm.base_url.empty());
}

// Who reranks for KBs with enable_rerank: the /rerank endpoint when one is
// configured, else the model (listwise), else nobody.
reranker reranker_of(const config& cfg, llm_actor model) {
  reranker rr;
  if (generator_uses_model(cfg))
    rr.model = std::move(model);
  if (cfg.retrieval.rerank_base_url.empty())
    return rr;
  auto ec = endpoint_of(cfg, cfg.retrieval.rerank_base_url, cfg.retrieval.rerank_model);
  ec.first_token_timeout = std::chrono::milliseconds{cfg.retrieval.rerank_timeout_ms};
  ec.total_timeout = ec.first_token_timeout;
  rr.endpoint = std::make_shared<llm::openai_client>(ec);
  lg->info("reranker: model \"{}\" at {}", cfg.retrieval.rerank_model,
               cfg.retrieval.rerank_base_url);
  return rr;
}

std::string describe(const reranker& rr) {
  if (rr.endpoint)
    return "the rerank endpoint (model " + rr.endpoint->config().model + ")";
  return rr.model ? "the model, listwise" : "";
}

// [retrieval] agent_workers, 0 resolved: one worker per core, since
// searches are CPU work; more than the scheduler has threads cannot run at
// once.
size_t agent_workers_of(const config& cfg) {
  if (cfg.retrieval.agent_workers > 0)
    return static_cast<size_t>(cfg.retrieval.agent_workers);
  size_t n = std::max(1u, std::thread::hardware_concurrency());
  if (cfg.actors.scheduler_threads > 0)
    n = std::min(n, static_cast<size_t>(cfg.actors.scheduler_threads));
  return n;
}

// The OpenAI-compatible gateway's settings from [llm]; the turns' streams
// build their model calls with the same ones (stream_settings::model).
openai_llm_settings gateway_settings(const config& cfg) {
  openai_llm_settings os;
  os.model = cfg.llm.model;
  os.max_concurrency = static_cast<size_t>(cfg.llm.max_concurrency);
  os.max_queue = static_cast<size_t>(cfg.llm.max_queue);
  os.temperature = cfg.llm.temperature;
  os.max_tokens = cfg.llm.max_tokens;
  os.prompt_budget_tokens = static_cast<size_t>(cfg.llm.prompt_budget_tokens);
  return os;
}

// The answer generator the configuration asks for: the OpenAI-compatible
// gateway when a model is configured, otherwise the extractive generator.
llm_actor spawn_generator(caf::actor_system& sys, const config& cfg) {
  if (!generator_uses_model(cfg)) {
    extractive_llm_settings ls;
    ls.max_sentences = static_cast<size_t>(cfg.generator.extractive_max_sentences);
    ls.pace = std::chrono::milliseconds{cfg.generator.extractive_pace_ms};
    lg->info("generator: extractive (no language model configured)");
    return spawn_extractive_llm(sys, ls);
  }
  auto ec = endpoint_of(cfg, cfg.llm.base_url, cfg.llm.model);
  ec.max_idle_connections = static_cast<size_t>(cfg.llm.max_concurrency);
  auto client = std::make_shared<llm::openai_client>(ec);
  auto os = gateway_settings(cfg);
  lg->info("generator: model \"{}\" at {}", cfg.llm.model, cfg.llm.base_url);
  return spawn_openai_llm(sys, std::move(client), os);
}

// Raises the open-file limit to what the configured server needs: a
// descriptor per client connection ([server] max_connections) and per
// model connection ([llm] max_concurrency), and a margin for the listener,
// the database, the cluster and logs. The soft limit goes to the hard one;
// the hard one too when it is lower and the process may raise it (root).
// When it stays lower, says what will fail.
void raise_open_file_limit(const config& cfg) {
  constexpr uint64_t margin = 256;
  uint64_t want = 0;
  if (cfg.server.max_connections > 0)
    want = static_cast<uint64_t>(cfg.server.max_connections)
           + static_cast<uint64_t>(std::max(cfg.llm.max_concurrency, 0)) + margin;
  auto lim = http::raise_open_file_limit(want);
  if (lim.soft != lim.soft_before || lim.hard != lim.hard_before)
    lg->info("open file limit raised from {} (hard {}) to {} (hard {})", lim.soft_before,
             lim.hard_before, lim.soft, lim.hard);
  if (want > lim.soft)
    lg->warn("open file limit {} is below the {} that [server] max_connections ({}) and [llm] "
             "max_concurrency ({}) need: connections beyond it fail; raise the hard limit "
             "(ulimit -Hn, systemd LimitNOFILE=) or lower max_connections",
             lim.soft, want, cfg.server.max_connections, cfg.llm.max_concurrency);
}

// [cluster] node_name, or host name + ":" + the HTTP port.
std::string node_name_of(const config& cfg, uint16_t http_port) {
  if (!cfg.cluster.node_name.empty())
    return cfg.cluster.node_name;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')
    std::snprintf(host, sizeof(host), "localhost");
  return std::string{host} + ":" + std::to_string(http_port);
}

// Loads CAF's network layer when this node is part of a cluster: BASP with
// heartbeats (so a silent peer is noticed by the connection too), over TLS
// when [cluster] tls_* are set.
void configure_cluster(caf::actor_system_config& caf_cfg, const config& cfg) {
  if (cfg.cluster.listen.empty())
    return;
  caf_cfg.load<caf::io::middleman>();
  caf_cfg.set("middleman.heartbeat-interval",
              caf::timespan{std::chrono::milliseconds{cfg.cluster.heartbeat_ms}});
  if (!cfg.cluster.tls_certificate.empty()) {
    caf_cfg.load<caf::openssl::manager>();
    caf_cfg.set("openssl.certificate", cfg.cluster.tls_certificate);
    caf_cfg.set("openssl.key", cfg.cluster.tls_key);
    caf_cfg.set("openssl.cafile", cfg.cluster.tls_ca);
  }
}

std::vector<std::pair<std::string, uint16_t>> seeds_of(const config& cfg) {
  std::vector<std::pair<std::string, uint16_t>> out;
  for (auto& seed : http::split_list(cfg.cluster.seeds))
    if (auto at = parse_listen(seed))
      out.push_back(*at);
  return out;
}

// glibc raises its trim and mmap thresholds as the program frees large
// blocks (up to 32 MiB), after which freed memory is kept rather than given
// back; with CAF workers, Asio threads and store threads freeing each
// other's objects across arenas, the soak's RSS grew ~0.7 MiB/min while the
// live heap stayed flat. Fixed thresholds of 128 KiB keep RSS flat at the
// same turns/s (docs/security.md, "Soak"). MALLOC_TRIM_THRESHOLD_ /
// MALLOC_MMAP_THRESHOLD_ in the environment still decide.
void tune_allocator() {
  constexpr int threshold = 128 * 1024;
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_"))
    mallopt(M_TRIM_THRESHOLD, threshold);
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_"))
    mallopt(M_MMAP_THRESHOLD, threshold);
}

}  // namespace

int run_serve(const serve_options& opts) {
  tune_allocator();
  auto signals = block_shutdown_signals();
  auto cfg = load_effective_config(opts.common);
  if (!cfg) {
    std::cerr << "ragtor: configuration error: " << error_message(cfg.error()) << "\n";
    return 2;
  }
  if (!opts.listen.empty())
    cfg->server.listen = opts.listen;
  auto listen = parse_listen(cfg->server.listen);
  if (!listen) {
    std::cerr << "ragtor: " << error_message(listen.error()) << "\n";
    return 2;
  }
  setup_logging(cfg->log.level);
  if (auto* tunables = std::getenv("GLIBC_TUNABLES"); tunables && *tunables)
    lg->info("allocator: GLIBC_TUNABLES={}", tunables);
  // Nobody checks who calls an unauthenticated server: only on loopback,
  // unless the operator says otherwise (then at every start, a warning).
  if (cfg->auth.mode == "off" && !http::is_loopback_host(listen->first)) {
    if (!cfg->auth.allow_unauthenticated) {
      std::cerr << "ragtor: refusing to listen on " << cfg->server.listen
                << " without authentication: set [auth] mode = \"api_key\" (docs/security.md), "
                   "or [auth] allow_unauthenticated = true to serve anyone who connects\n";
      return 2;
    }
    lg->warn("serving {} WITHOUT authentication ([auth] allow_unauthenticated = true): "
                 "anyone who can connect may read and change every user's data",
                 cfg->server.listen);
  }
  // The console shows every user's sessions and can stop them: behind a
  // token, or reachable from this machine only.
  auto admin_token = !cfg->admin.token.empty() ? cfg->admin.token : cfg->auth.admin_token;
  if (cfg->admin.enabled && admin_token.empty() && !http::is_loopback_host(listen->first)) {
    std::cerr << "ragtor: refusing to listen on " << cfg->server.listen
              << " with the admin console open: set [admin] token (or RAGTOR_ADMIN__TOKEN) "
                 "to protect /admin, /admin/api/... and /metrics (docs/admin.md), or "
                 "[admin] enabled = false to turn them off\n";
    return 2;
  }
  raise_open_file_limit(*cfg);
  std::error_code fs_err;
  std::filesystem::create_directories(cfg->data_dir, fs_err);
  if (fs_err) {
    lg->error("cannot create data dir {}: {}", cfg->data_dir, fs_err.message());
    return 1;
  }

  // [kbs.<name>] of the config file: written to kb.json, the KB created
  // when new, before the catalog loads them.
  auto outbound = http::split_list(cfg->security.allowed_outbound_hosts);
  for (auto& [name, json] : cfg->kbs) {
    auto s = kb_settings_from_json(json);
    if (s) {
      if (auto bad = http::check_outbound_hosts(*s, outbound)) {
        lg->error("cannot apply [kbs.{}]: {}: {}", name, bad->field, bad->message);
        return 1;
      }
    }
    caf::error err = s ? save_kb_settings(cfg->data_dir, *s) : s.error();
    if (!err && !kb_exists(cfg->data_dir, name))
      err = create_kb(cfg->data_dir, name);
    if (err) {
      lg->error("cannot apply [kbs.{}]: {}", name, error_message(err));
      return 1;
    }
    lg->info("knowledge base \"{}\": settings from the config file", name);
  }

  auto build_opts = kb_build_options_of(*cfg);
  auto catalog = kb_catalog::load(cfg->data_dir, build_opts);
  if (!catalog) {
    lg->error("cannot load knowledge bases: {}", error_message(catalog.error()));
    return 1;
  }
  for (auto& name : (*catalog)->names()) {
    auto snap = (*catalog)->get(name);
    // KBs already on disk are held to today's outbound hosts too (the list
    // may have been narrowed since they were created).
    if (auto bad = http::check_outbound_hosts(snap->settings, outbound)) {
      lg->error("knowledge base \"{}\" (data/kbs/{}/kb.json): {}: {}; allow the host in "
                    "[security] allowed_outbound_hosts or change the KB",
                    name, name, bad->field, bad->message);
      return 1;
    }
    lg->info("knowledge base \"{}\": {} chunks, indexes {} in {:.0f} ms", name,
                 snap->chunks.size(), snap->loaded_from_snapshot ? "loaded" : "built",
                 snap->build_ms);
  }

  caf::actor_system_config caf_cfg;
  register_types(caf_cfg);
  if (cfg->actors.scheduler_threads > 0)
    caf_cfg.set("scheduler.max-threads", static_cast<size_t>(cfg->actors.scheduler_threads));
  // A worker that finds no job waits on its condition variable once CAF's
  // 100 busy polls fail, instead of 500 more polls 50 µs apart. Under light
  // load those sleeps were nearly all of ragtor's CPU: one stream, 127 ms
  // of CPU per turn (46 % of a core) against 13 ms (5 %), with the same
  // first-token overhead, and no loss at 64 streams or in a burst of 1,000
  // (docs/performance.md, "Idle workers wait instead of polling").
  caf_cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  // CAF's work stealing with a clock that does not wake its thread for every
  // request's timeout (actors/scheduler.hpp).
  use_ragtor_scheduler(caf_cfg);
  configure_cluster(caf_cfg, *cfg);
  caf::actor_system sys{caf_cfg};
  auto node = node_name_of(*cfg, listen->second);
  bool clustered = !cfg->cluster.listen.empty();

  store_options store_opts;
  if (cfg->store.backend == "postgres"
      || (cfg->store.backend == "auto" && !cfg->store.postgres_dsn.empty()))
    store_opts.postgres_dsn = cfg->store.postgres_dsn;
  store_opts.postgres_prepared = cfg->store.postgres_prepared_statements;
  store_opts.sqlite_path = cfg->store.sqlite_path.empty()
                               ? std::filesystem::path{cfg->data_dir} / "ragtor.db"
                               : std::filesystem::path{cfg->store.sqlite_path};
  store_opts.flush_max_batch = cfg->store.flush_max_batch;
  store_opts.read_connections = cfg->store.read_connections;
  store_opts.recall_index_bytes = static_cast<size_t>(cfg->memory.recall_index_mb) << 20;
  auto store = spawn_store(sys, store_opts);
  if (!store) {
    lg->error("cannot open the store: {}", sys.render(store.error()));
    return 1;
  }

  router_settings rs;
  rs.default_kb = cfg->router.default_kb;
  rs.default_agent_type = cfg->router.default_agent_type;
  rs.min_confidence = cfg->router.min_confidence;
  rs.mode = cfg->router.mode;
  rs.llm_timeout = std::chrono::milliseconds{cfg->router.llm_timeout_ms};
  auto llm = spawn_generator(sys, *cfg);
  auto rr = reranker_of(*cfg, llm);
  auto workers = agent_workers_of(*cfg);
  lg->info("retrieval agents: {} workers each", workers);
  pool_cluster_settings pcs;
  pcs.node = node;
  pcs.retrieval = list_has(cfg->cluster.roles, "retrieval");
  pcs.kbs = cfg->cluster.kbs;
  // A lost connection is dialled again one heartbeat later, then two:
  // both tries fall within failure_timeout_ms (at least 2 heartbeats).
  pcs.replica_wait = std::chrono::milliseconds{cfg->cluster.failure_timeout_ms};
  auto pool = spawn_agent_pool(sys, *catalog, workers, rr, pcs);
  auto router = spawn_router(sys, rs, *catalog, llm);

  summarizer_settings sum;
  sum.policy.window = cfg->memory.window;
  set_recall_cache_budget(static_cast<size_t>(cfg->memory.recall_cache_mb) << 20);
  sum.policy.min_messages = cfg->summary.min_messages;
  sum.policy.update_delta = cfg->summary.update_delta;
  sum.policy.regenerate_every = cfg->summary.regenerate_every;
  sum.enabled = cfg->summary.mode != "off";
  sum.use_model =
      cfg->summary.mode == "model" || (cfg->summary.mode == "auto" && generator_uses_model(*cfg));
  sum.max_tokens = cfg->summary.max_tokens;
  sum.max_input_tokens = static_cast<size_t>(cfg->summary.max_input_tokens);
  sum.timeout = std::chrono::seconds{cfg->summary.timeout_s};
  auto summarizer = spawn_summarizer(sys, *store, llm, sum);

  session_settings ss;
  ss.node = node;
  ss.max_queued_turns = static_cast<size_t>(cfg->session.max_queued_turns);
  ss.early_start = cfg->session.early_start;
  ss.idle_timeout = std::chrono::seconds{cfg->session.idle_timeout_s};
  ss.stream.top_k = cfg->retrieval.top_k;
  ss.stream.window = cfg->memory.window;
  ss.stream.turn_timeout = std::chrono::seconds{cfg->server.turn_timeout_s};
  ss.stream.max_pending_bytes = cfg->sse.max_pending_bytes;
  ss.stream.detach_grace = std::chrono::milliseconds{cfg->server.detach_grace_ms};
  if (generator_uses_model(*cfg)) {
    auto os = gateway_settings(*cfg);
    ss.stream.model = stream_settings::model_call{os.model, os.temperature, os.max_tokens,
                                                  os.prompt_budget_tokens, os.system_instructions};
  }
  if (sum.enabled)
    ss.stream.summary = sum.policy;
  session_deps sd{router, pool, llm, *store, summarizer};
  sd.planners = std::make_shared<planner_gate>(cfg->server.max_planner_turns);
  sd.tools_http = std::make_shared<http_json_client>();
  auto sessions = spawn_session_manager(sys, sd, ss);

  // Membership: published on the BASP port, so a node connecting there
  // gets this node's cluster actor (docs/cluster.md).
  cluster_settings cs;
  cs.self.name = node;
  cs.self.address = cfg->cluster.listen;
  cs.self.roles = cfg->cluster.roles;
  cs.self.kbs = cfg->cluster.kbs;
  cs.self.started_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  cs.seeds = seeds_of(*cfg);
  cs.heartbeat = std::chrono::milliseconds{cfg->cluster.heartbeat_ms};
  cs.failure_timeout = std::chrono::milliseconds{cfg->cluster.failure_timeout_ms};
  cs.store = *store;
  cs.pool = pool;
  cs.sessions = sessions;
  admin_settings as;
  as.node = node;
  as.roles = cfg->cluster.roles;
  as.address = cfg->cluster.listen;
  as.status_timeout = std::chrono::milliseconds{cfg->admin.status_timeout_ms};
  auto admin = spawn_admin(sys, as);
  cs.admin = admin;
  bool tls = !cfg->cluster.tls_certificate.empty();
  if (clustered)
    cs.middleman = caf::actor_cast<caf::actor>(tls ? sys.openssl_manager().actor_handle()
                                                   : sys.middleman().actor_handle());
  auto cluster = spawn_cluster(sys, cs);

  http::server_settings hs;
  hs.host = listen->first;
  hs.port = listen->second;
  hs.io_threads = cfg->server.io_threads;
  hs.limits.max_body_bytes = cfg->server.max_body_bytes;
  hs.limits.max_message_bytes = cfg->server.max_message_bytes;
  hs.heartbeat = std::chrono::seconds{cfg->sse.heartbeat_s};
  hs.write_timeout = std::chrono::seconds{cfg->sse.write_timeout_s};
  hs.turn_timeout = std::chrono::seconds{cfg->server.turn_timeout_s};
  hs.initial_credit = cfg->sse.initial_credit;
  hs.direct_writes = cfg->sse.direct_writes;
  hs.max_streams = static_cast<size_t>(cfg->server.max_streams);
  hs.max_connections = static_cast<size_t>(cfg->server.max_connections);
  hs.idle_timeout = std::chrono::seconds{cfg->server.idle_timeout_s};
  hs.header_timeout = std::chrono::seconds{cfg->server.header_timeout_s};
  hs.body_timeout = std::chrono::seconds{cfg->server.body_timeout_s};
  hs.reply_timeout = std::chrono::seconds{cfg->server.write_timeout_s};
  hs.max_header_bytes = cfg->server.max_header_bytes;
  hs.max_url_bytes = cfg->server.max_url_bytes;
  hs.api_keys = cfg->auth.mode == "api_key";
  hs.admin_token = admin_token;
  hs.admin_enabled = cfg->admin.enabled;
  hs.key_refresh = std::chrono::milliseconds{cfg->auth.key_refresh_ms};
  hs.allowed_outbound_hosts = outbound;
  if (hs.api_keys)
    lg->info("auth: API keys required (reloaded every {} ms)", cfg->auth.key_refresh_ms);
  hs.kb_exists = [catalog = *catalog](std::string_view kb) {
    // "general" means no retrieval (any case); "default" is the unnamed KB.
    if (format_worker_name(kb, "").empty())
      return true;
    return catalog->get(kb == "default" ? std::string_view{} : kb) != nullptr;
  };
  auto kb_admin =
      spawn_kb_admin(sys, cfg->data_dir, *catalog, build_opts, *store,
                     clustered ? std::chrono::milliseconds{cfg->cluster.kb_sync_ms}
                               : std::chrono::milliseconds{0},
                     clustered ? cluster : cluster_actor{});
  {
    // The entity graphs into the database before serving (a no-op for
    // graphs stored already).
    caf::scoped_actor self{sys};
    self->request(kb_admin, std::chrono::minutes(10), atom::kb_graph_v)
        .receive([](int64_t) {},
                 [&](caf::error& err) {
                   lg->warn("entity graphs not stored at start: {}", sys.render(err));
                 });
  }
  hs.catalog = *catalog;
  hs.kb_admin = kb_admin;
  hs.summarizer = summarizer;
  hs.pool = pool;
  hs.cluster = cluster;
  hs.admin = admin;
  hs.reranker = describe(rr);
  hs.max_ingest_bytes = cfg->server.max_ingest_bytes;
  hs.default_agent_type = cfg->router.default_agent_type;
  hs.default_top_k = cfg->retrieval.top_k;
  http::server srv{sys, hs, sessions, *store};
  auto port = srv.start();
  // Exits in dependency order, each stage waiting for the previous one to
  // be gone: what is left of the turns (sessions, their streams and
  // planners) first, then those who serve them (router, agents, KB
  // administration, which finishes an ingest in progress first), then the
  // summarizer, the model gateway, and the store last, so every write
  // sent before is committed.
  auto stop_actors = [&] {
    caf::scoped_actor self{sys};
    auto stage = [&](const auto&... hs) {
      (self->send_exit(hs, caf::exit_reason::user_shutdown), ...);
      self->wait_for(hs...);
    };
    stage(cluster, admin);
    stage(sessions);
    stage(router, pool, kb_admin);
    stage(summarizer);
    stage(llm);
    stage(*store);
  };
  if (!port) {
    lg->error("{}", error_message(port.error()));
    stop_actors();
    return 1;
  }
  if (clustered) {
    auto at = parse_listen(cfg->cluster.listen);
    auto published = tls ? caf::openssl::publish(cluster, at->second, at->first.c_str(), true)
                         : sys.middleman().publish(cluster, at->second, at->first.c_str(), true);
    if (!published) {
      lg->error("cannot listen for cluster peers on {}: {}", cfg->cluster.listen,
                    sys.render(published.error()));
      srv.stop();
      stop_actors();
      return 1;
    }
    lg->info("cluster: node \"{}\" listening for peers on {}{}", node, cfg->cluster.listen,
                 tls ? " (TLS)" : "");
  }
  auto host =
      listen->first.find(':') != std::string::npos ? "[" + listen->first + "]" : listen->first;
  std::printf("ragtor listening on http://%s:%u\n", host.c_str(), static_cast<unsigned>(*port));
  std::fflush(stdout);
  lg->info(
      "ready: data dir {}, store {}", cfg->data_dir,
      store_opts.postgres_dsn.empty() ? store_opts.sqlite_path.string() : std::string{"postgres"});

  int sig = 0;
  sigwait(&signals, &sig);
  lg->info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  auto grace = std::chrono::seconds{cfg->server.shutdown_grace_s};
  srv.stop_accepting();
  {
    // Peers stop sending work here; the store says `left`.
    caf::scoped_actor self{sys};
    self->request(cluster, std::chrono::seconds(2), atom::shutdown_v)
        .receive([](bool) {}, [](caf::error&) {});
  }
  {
    // Cancel running turns: each stores its partial answer and ends its
    // stream with error + done before the connections close.
    caf::scoped_actor self{sys};
    self->request(sessions, grace, atom::shutdown_v)
        .receive([](bool) {},
                 [](caf::error& err) { lg->warn("sessions did not stop in time"); });
  }
  if (auto left = srv.wait_idle(std::chrono::duration_cast<std::chrono::milliseconds>(grace)))
    lg->warn("{} request(s) still in flight at shutdown", left);
  srv.stop();
  stop_actors();
  lg->info("bye");
  return 0;
}

}  // namespace ragtor
