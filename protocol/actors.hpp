// Every typed actor interface of ragtor, in one header (the VAST model).
// Read this file to learn what each actor may say to whom. Handlers an actor
// only sends to itself or receives from its own helpers are marked INTERNAL.
// Every long-lived interface extends status_api.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "protocol/messages.hpp"
#include "protocol/type_ids.hpp"

namespace ragtor {

// -- common -------------------------------------------------------------------

// Answered by every long-lived actor.
using status_api = caf::typed_actor<
    // A JSON object describing the actor: kind, name, counters, state.
    caf::replies_to<atom::status>::with<std::string>>;

// -- streaming ----------------------------------------------------------------

// Where a stream actor publishes events: the HTTP bridge on the frontend.
using event_sink_actor = caf::typed_actor<
    // A batch of events in order; `start` first, `done` last.
    caf::reacts_to<atom::events, std::vector<stream_event>>>;

// Where a generator sends tokens as it produces them.
using token_sink_actor = caf::typed_actor<
    // One piece of answer text for request `request_id`.
    caf::reacts_to<atom::token, std::string /*request_id*/, std::string /*text*/>>;

// One per request: runs route -> history -> retrieve -> generate -> persist
// and publishes the turn's events. Quits after `done` was delivered.
using stream_actor = caf::typed_actor<
    // Attaches a subscriber; it is replayed the turn's events after seq
    // `after` (0 = all: a client retrying its request_id joins the running
    // turn; > 0: a client re-attaching with Last-Event-ID), then events
    // flow as its demand allows.
    caf::reacts_to<atom::subscribe, event_sink_actor, uint64_t /*after*/>,
    // That subscriber can take `n` more event batches.
    caf::reacts_to<atom::demand, event_sink_actor, int32_t>,
    // Stop generating; store what was generated as partial, then end with
    // `error` + `done`.
    caf::reacts_to<atom::cancel>,
    // INTERNAL (from the session of a stream started before its user message
    // was stored): the store answered `opened`; `keep` false = the turn
    // starts over elsewhere (or failed): quit without publishing or storing.
    caf::reacts_to<atom::opened, turn_opened, bool /*keep*/>,
    // INTERNAL: a timer fired (0 = the watchdog: subscriber check and turn
    // deadline, 2 = end of the detach grace period).
    caf::reacts_to<atom::tick, int32_t>>::extend_with<token_sink_actor, status_api>;

// -- sessions -------------------------------------------------------------------

// Answer of open_turn: the user message is committed and the turn runs.
struct turn_ticket {
  stream_actor stream;
  std::string conversation_id;
  std::string request_id;
  std::string user_message_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, turn_ticket& x) {
  return f(caf::meta::type_name("turn_ticket"), x.stream, x.conversation_id, x.request_id,
           x.user_message_id);
}

// One per active conversation (user_id, session_id): turns run one at a time
// in arrival order.
using session_actor = caf::typed_actor<
    // Queues a turn; answers once its user message is committed and its
    // stream actor runs.
    caf::replies_to<atom::open_turn, chat_request>::with<turn_ticket>,
    // Cancels the running or queued turn with this request id; true if found.
    caf::replies_to<atom::stop, std::string /*request_id*/>::with<bool>,
    // The stream of the running turn with this request id (re-attaching a
    // client); not_found when it is not running here.
    caf::replies_to<atom::attach, std::string /*request_id*/>::with<stream_actor>,
    // POST /api/v1/clear: cancels the running and queued turns, waits until
    // the running one is stored, then drops the conversation's messages,
    // summary and episodes; answers how many messages were removed. Turns
    // opened meanwhile run after the clear.
    caf::replies_to<atom::clear>::with<int64_t>,
    // INTERNAL (from its stream actor): the turn ended; start the next one.
    caf::reacts_to<atom::turn_done, std::string /*request_id*/>,
    // Graceful shutdown: refuse queued turns, cancel the running one, quit
    // once it has been stored.
    caf::reacts_to<atom::shutdown>,
    // INTERNAL: idle timer; the session quits if nothing happened since
    // activity number `epoch`.
    caf::reacts_to<atom::tick, uint64_t /*epoch*/>>::extend_with<status_api>;

// One per node: maps (user_id, session_id) to session actors.
using session_manager_actor = caf::typed_actor<
    // Routes the turn to its session (spawning it on first use); a
    // stateless turn runs at once, without a session.
    caf::replies_to<atom::open_turn, chat_request>::with<turn_ticket>,
    // POST /api/v1/chat/stop: cancels a user's running turn; true if found.
    // Asks the other frontends of a cluster when no session here runs it.
    caf::replies_to<atom::stop, std::string /*request_id*/, std::string /*user_id*/>::with<bool>,
    // GET /api/v1/chat/stream/{request_id}: the stream of a user's running
    // turn; a null handle when none of the user's sessions runs it (here or,
    // in a cluster, on another frontend).
    caf::replies_to<atom::attach, std::string /*request_id*/,
                    std::string /*user_id*/>::with<stream_actor>,
    // As stop and attach, asked by another frontend: this node's sessions
    // only, never forwarded.
    caf::replies_to<atom::stop, std::string /*request_id*/, std::string /*user_id*/,
                    bool /*local_only*/>::with<bool>,
    caf::replies_to<atom::attach, std::string /*request_id*/, std::string /*user_id*/,
                    bool /*local_only*/>::with<stream_actor>,
    // The cluster actor: frontend `node` (its session manager, an untyped
    // handle to this interface) is reachable / gone. Conversations are
    // owned by the frontends that are up (docs/cluster.md).
    caf::reacts_to<atom::peer_up, std::string /*node*/, caf::actor /*sessions*/>,
    caf::reacts_to<atom::peer_down, std::string /*node*/>,
    // POST /api/v1/clear: through the conversation's session (see there),
    // or straight to the store when it has none.
    caf::replies_to<atom::clear, std::string /*user_id*/,
                    std::string /*session_id*/>::with<int64_t>,
    // Stops every session (graceful shutdown): running turns are cancelled
    // and stored as partial; answers when all sessions are gone.
    caf::replies_to<atom::shutdown>::with<bool>>::extend_with<status_api>;

// -- routing and retrieval ---------------------------------------------------------

// Decides KB and retrieval strategy for a turn (stateless).
using router_actor = caf::typed_actor<
    // intent_detect -> apply_override_policy -> worker_select.
    caf::replies_to<atom::route, chat_request>::with<route_decision>>::extend_with<status_api>;

// A resident retrieval agent over one KB (instance_key = worker_name):
// hands each query to the least busy of its workers, so queries on one KB
// run at once. Never generates answers, never holds conversation state,
// never caches results.
using retrieval_agent_actor = caf::typed_actor<
    // Top evidence for `query`; thread_id is for traces only.
    caf::replies_to<atom::retrieve, std::string /*query*/, std::string /*thread_id*/,
                    retrieve_options>::with<retrieval_result>>::extend_with<status_api>;

// One of an agent's workers (linked to it, respawned when it dies). Each
// serves several queries at once over the KB's immutable snapshot: while a
// query waits for its embedding or reranking, the worker searches others.
using retrieval_worker_actor = caf::typed_actor<
    // As retrieval_agent_actor's retrieve.
    caf::replies_to<atom::retrieve, std::string /*query*/, std::string /*thread_id*/,
                    retrieve_options>::with<retrieval_result>,
    // INTERNAL (from the HTTP client's thread): the rerank endpoint answered
    // call `call`.
    caf::reacts_to<atom::rerank, uint64_t /*call*/, rerank_reply>,
    // INTERNAL (from the HTTP client's thread): the embedding model answered
    // call `call`: the query's vector, or why it failed ("" = it answered).
    caf::reacts_to<atom::embedded, uint64_t /*call*/, std::vector<float>,
                   std::string /*error*/>>::extend_with<status_api>;

// One per node (RAGAgentManager): worker_name -> resident agent, and in a
// cluster the other nodes' pools as replicas (docs/cluster.md).
using agent_pool_actor = caf::typed_actor<
    // The local agent serving `worker_name` (its instance_key), spawned
    // lazily.
    caf::replies_to<atom::resolve, std::string /*worker_name*/>::with<retrieval_agent_actor>,
    // Searches `query` with the agent of `worker_name` on the least busy
    // replica that serves its KB (this node's or another node's); an
    // attempt that fails, or whose node goes down, is retried once on
    // another replica, or on its own node once that is back within
    // pool_cluster_settings::replica_wait. The trace names the node that served it
    // (`served_by`). With opts.local_only: this node only.
    caf::replies_to<atom::retrieve, std::string /*worker_name*/, std::string /*query*/,
                    std::string /*thread_id*/, retrieve_options>::with<retrieval_result>,
    // The cluster actor: node `node`'s pool (an untyped handle to this
    // interface) serves these KBs ("*" = all; comma-separated).
    caf::reacts_to<atom::peer_up, std::string /*node*/, caf::actor /*pool*/,
                   std::string /*kbs*/>,
    // Node `node` is suspect or down: its replicas are dropped and the
    // queries in flight there retried elsewhere (or, with no replica left,
    // kept waiting for one to come back: pool_cluster_settings).
    caf::reacts_to<atom::peer_down, std::string /*node*/>,
    // Sent to itself: query `id`'s wait for a replica is over.
    caf::reacts_to<atom::tick, uint64_t /*query id*/>>::extend_with<status_api>;

// One per node: knowledge-base administration. Runs detached (its own
// thread) because creating and ingesting write files and rebuild indexes;
// requests are served one at a time, so two ingests into a KB never race.
using kb_admin_actor = caf::typed_actor<
    // Creates an empty KB with these settings; conflict when it exists.
    caf::replies_to<atom::kb_create, kb_settings>::with<kb_settings>,
    // Adds or replaces documents (by id), rebuilds the KB's indexes and
    // swaps the new snapshot in; answers only after the documents are on
    // disk and searchable and the entity graph is in the database.
    caf::replies_to<atom::kb_ingest, std::string /*kb*/,
                    std::vector<document>>::with<ingest_report>,
    // INTERNAL: apply the ingests of this KB that reached the store since
    // its last build, in one build (sent to itself).
    caf::reacts_to<atom::kb_ingest, std::string /*kb*/>,
    // Writes every KB's entity graph to the store where it changed (at
    // start); answers how many KBs were checked. Ingests do it themselves
    // before answering.
    caf::replies_to<atom::kb_graph>::with<int64_t>,
    // INTERNAL: time to bring the local KBs up to date with the store
    // (in a cluster, every [cluster] kb_sync_ms).
    caf::reacts_to<atom::kb_sync>,
    // Another node wrote a new version of this KB (told over the cluster):
    // bring the local KBs up to date now.
    caf::reacts_to<atom::kb_sync, std::string /*kb*/>>::extend_with<status_api>;

// -- generation --------------------------------------------------------------------

// A language model gateway (OpenAI-compatible or the extractive generator).
using llm_actor = caf::typed_actor<
    // Streams tokens to `sink` while generating; answers with the whole
    // result (its answer equals the concatenated tokens).
    caf::replies_to<atom::generate, generation_request, token_sink_actor>::with<generation_result>,
    // Stops the generation for this request id; its promise is answered with
    // what was produced so far (finish_reason "cancelled").
    caf::reacts_to<atom::cancel, std::string /*request_id*/>,
    // One non-streaming completion (structured decisions: router intent,
    // grading, summaries). The extractive generator answers `unavailable`:
    // there is no model to ask.
    caf::replies_to<atom::complete, completion_request>::with<completion_result>,
    // INTERNAL: time to emit the next paced token of this request.
    caf::reacts_to<atom::tick, std::string /*request_id*/>,
    // INTERNAL (from the HTTP client's thread): progress of an upstream call.
    caf::reacts_to<atom::upstream, std::string /*request_id*/,
                   upstream_event>>::extend_with<status_api>;

// -- answer planners ------------------------------------------------------------

// One per turn on a KB whose answer_mode is "workflow" or "tool_agent":
// decides what to search and whether to answer, ask or escalate
// (actors/pipeline). Answers once, then quits.
using planner_actor = caf::typed_actor<
    // Plans the turn; answers the decision, or an error (`cancelled`,
    // `overloaded` when the model gateway refused a call).
    caf::replies_to<atom::plan, plan_input>::with<plan_outcome>,
    // Stop now: the model call or tool call in flight is closed upstream,
    // the pending `plan` is answered `cancelled`, and the planner quits.
    caf::reacts_to<atom::cancel>,
    // INTERNAL: the backoff before attempt `attempt` of step `step` ended.
    caf::reacts_to<atom::tick, uint64_t /*step*/, int32_t /*attempt*/>,
    // INTERNAL (from the HTTP client's thread): the tool call of step
    // `step` answered: ok + response body, or !ok + what failed.
    caf::reacts_to<atom::upstream, uint64_t /*step*/, bool /*ok*/, std::string /*body*/,
                   std::string /*error*/>>::extend_with<status_api>;

// What a planner needs of the store: a conversation's workflow state
// (a subset of store_actor, so tests can stand in for it).
using flow_store_actor = caf::typed_actor<
    // The state (JSON; "" when none).
    caf::replies_to<atom::flow_state, std::string /*conversation_id*/>::with<std::string>,
    // Replaces it ("" deletes it); false when the conversation is gone.
    caf::replies_to<atom::flow_state, std::string /*conversation_id*/,
                    std::string /*state_json*/>::with<bool>>;

// -- memory ------------------------------------------------------------------------

// One per node: keeps conversation summaries fresh in the background
// (DESIGN §8). Never on a turn's critical path: streams tell it about a
// completed turn and go on.
using summarizer_actor = caf::typed_actor<
    // A turn of this conversation completed: refresh its summary if due.
    // Answers the outcome: "none" (not due), "written", "conflict" (another
    // writer got there first; theirs stays) or "failed" (the old summary
    // stays; counted). A trigger during a run for the same conversation
    // waits for it, then one more check answers all such triggers.
    caf::replies_to<atom::summarize, std::string /*conversation_id*/>::with<std::string>,
    // Answers true once the conversation has a summary of at least
    // `min_version` (at once if stored already; later when this node writes
    // it), false after `timeout_ms`.
    caf::replies_to<atom::summary, std::string /*conversation_id*/, int64_t /*min_version*/,
                    int32_t /*timeout_ms*/>::with<bool>,
    // INTERNAL: waiter `id` of a conversation timed out.
    caf::reacts_to<atom::tick, std::string /*conversation_id*/,
                   uint64_t /*id*/>>::extend_with<status_api>;

// -- cluster -------------------------------------------------------------------------

// What a node tells the nodes it connects to (untyped handles, cast on use).
struct node_services {
  member_info info;
  caf::actor cluster;   // its cluster_actor
  caf::actor pool;      // its agent_pool_actor
  caf::actor sessions;  // its session_manager_actor
  caf::actor admin;     // its admin_actor
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_services& x) {
  return f(caf::meta::type_name("node_services"), x.info, x.cluster, x.pool, x.sessions,
           x.admin);
}

// One per node (docs/cluster.md): membership. Published on the BASP port;
// connects to the seeds and the members in the store, pings every peer each
// heartbeat (no answer for failure_timeout: suspect, twice that or a lost
// connection: down), writes its own row of cluster_members, and tells the
// agent pool and the session manager which peers are usable.
using cluster_actor = caf::typed_actor<
    // A peer introduces itself; answers this node's services.
    caf::replies_to<atom::hello, node_services>::with<node_services>,
    // Liveness probe from a peer; answers this node's name.
    caf::replies_to<atom::ping>::with<std::string>,
    // Every member this node knows of, itself first.
    caf::replies_to<atom::members>::with<std::vector<member_info>>,
    // Graceful leave: marks this node `left` in the store; answers when
    // written.
    caf::replies_to<atom::shutdown>::with<bool>,
    // A KB has a new version in the store. From this node's kb_admin: told
    // to every peer that is up; from a peer: this node's kb_admin syncs
    // now instead of at its next kb_sync_ms tick.
    caf::reacts_to<atom::kb_sync, std::string /*kb*/>,
    // INTERNAL: this node's kb_admin, which is told of other nodes' versions.
    caf::reacts_to<atom::kb_sync, kb_admin_actor>,
    // INTERNAL: heartbeat timer.
    caf::reacts_to<atom::tick>>::extend_with<status_api>;

// -- operations ---------------------------------------------------------------------

// One per node (DESIGN §12, docs/admin.md): the admin console's view of the
// actor system. Asks this node's live actors for their `status` (each
// within [admin] status_timeout_ms: one that does not answer is listed as
// stuck) and, unless local_only, the admin actors of the peers that are up
// (each within twice that). Answers are JSON so that they cross nodes as
// plain strings.
using admin_actor = caf::typed_actor<
    // A JSON array of the status objects of the live actors of kind `kind`
    // ("" = every kind).
    caf::replies_to<atom::snapshot, std::string /*kind*/, bool /*local_only*/>::with<std::string>,
    // One actor's status object on node `node`; not_found when it is gone.
    caf::replies_to<atom::status, std::string /*node*/, uint64_t /*actor id*/>::with<std::string>,
    // A JSON array of node summaries (name, roles, status, uptime, load),
    // this node first.
    caf::replies_to<atom::nodes, bool /*local_only*/>::with<std::string>,
    // Cancels the running turn with this request id (any node); true if
    // found. The client gets `error` + `done`.
    caf::replies_to<atom::stop, std::string /*request_id*/, bool /*local_only*/>::with<bool>,
    // Ends the session (user_id, session_id) as on shutdown: queued turns
    // are refused, the running one is cancelled and stored; true if found.
    caf::replies_to<atom::evict, std::string /*user_id*/, std::string /*session_id*/,
                    bool /*local_only*/>::with<bool>,
    // The cluster actor: node `node`'s admin actor (an untyped handle to
    // this interface) is reachable / gone.
    caf::reacts_to<atom::peer_up, std::string /*node*/, caf::actor /*admin*/>,
    caf::reacts_to<atom::peer_down, std::string /*node*/>>::extend_with<status_api>;

// -- persistence -------------------------------------------------------------------

// The store façade: every persistence operation. Replies only after the
// write committed; blocking database calls run on store worker threads.
using store_actor = caf::typed_actor<
    // Ensures the conversation (user_id, session_id) exists and appends the
    // user message, in one transaction.
    caf::replies_to<atom::begin_turn, std::string /*user_id*/, std::string /*session_id*/,
                    std::string /*content*/, std::string /*request_id*/>::with<turn_opened>,
    // Appends the assistant message (completed or partial); answers its id.
    caf::replies_to<atom::finish_turn, stored_message>::with<std::string>,
    // The same, and in the same write job what a completed turn leaves for
    // recall: its episode (embedded here when it has no embedding) and the
    // long-term memories stated in it (same user + content: lifetime
    // refreshed). These are derived data: each kind is written under its
    // own savepoint, and one that fails is logged and never fails the
    // answer.
    caf::replies_to<atom::finish_turn, stored_message, std::vector<episode_record>,
                    std::vector<memory_record>>::with<std::string>,
    // The stored assistant message of a user's turn by request id;
    // not_found when the turn has no stored answer or is someone else's.
    caf::replies_to<atom::find_turn, std::string /*request_id*/,
                    std::string /*user_id*/>::with<stored_message>,
    // The last `limit` messages of a conversation, oldest first.
    caf::replies_to<atom::history, std::string /*conversation_id*/,
                    int32_t /*limit*/>::with<std::vector<stored_message>>,
    // A turn's context in one read job (turn_context): the newest
    // `window_limit` messages of the conversation, and unless `incognito`
    // its summary, the user's core memory, the memories related to
    // `question` (at most 5) and the episodes recalled for it that are not
    // in the conversation from `window_start_seq` on.
    caf::replies_to<atom::history, std::string /*conversation_id*/, std::string /*user_id*/,
                    std::string /*question*/, int32_t /*window_limit*/,
                    int64_t /*window_start_seq*/, bool /*incognito*/>::with<turn_context>,
    // A user's conversations, newest first, paged by an opaque cursor.
    caf::replies_to<atom::list_convs, std::string /*user_id*/, int32_t /*limit*/,
                    std::string /*cursor*/>::with<conversation_page>,
    // The newest `limit` messages before seq `before` (0 = latest), oldest
    // first; not_found unless the conversation is the user's.
    caf::replies_to<atom::messages, std::string /*conversation_id*/, std::string /*user_id*/,
                    int32_t /*limit*/, int64_t /*before*/>::with<std::vector<stored_message>>,
    // Deletes a conversation; not_found unless it is the user's.
    caf::replies_to<atom::delete_conv, std::string /*conversation_id*/,
                    std::string /*user_id*/>::with<bool>,
    // Drops a conversation's messages, summary and episodes; answers how many
    // messages were removed.
    caf::replies_to<atom::clear, std::string /*user_id*/,
                    std::string /*session_id*/>::with<int64_t>,
    // Toggles a vote; answers "positive", "negative" or "none".
    caf::replies_to<atom::feedback, feedback_vote>::with<std::string>,
    // A user's core memory profile (JSON object text, "{}" when none).
    caf::replies_to<atom::core_mem, std::string /*user_id*/>::with<std::string>,
    // Readiness: a trivial query on a read connection; true when answered.
    caf::replies_to<atom::ping>::with<bool>,
    // A user's most recent episodes (at most `limit`), newest first.
    caf::replies_to<atom::episode, std::string /*user_id*/,
                    int32_t /*limit*/>::with<std::vector<episode_record>>,
    // Episodic recall: the texts of the user's past turns most similar to
    // the question (at most 3, best first), leaving out the conversation's
    // turns from `window_start_seq` on; ranked among the 200 newest
    // episodes by their stored embeddings (recall_episodes_from).
    caf::replies_to<atom::recall, std::string /*user_id*/, std::string /*question*/,
                    std::string /*conversation_id*/,
                    int64_t /*window_start_seq*/>::with<std::vector<std::string>>,
    // A user's unexpired memories, newest first.
    caf::replies_to<atom::mem_list, std::string /*user_id*/>::with<std::vector<memory_record>>,
    // Deletes one memory ("" = all of the user's); answers how many.
    caf::replies_to<atom::mem_delete, std::string /*user_id*/,
                    std::string /*memory_id*/>::with<int64_t>,
    // A conversation's summary and message counts (version 0: none). With a
    // non-empty user_id: not_found unless the conversation is theirs.
    caf::replies_to<atom::summary, std::string /*conversation_id*/,
                    std::string /*user_id*/>::with<summary_record>,
    // Stores a summary computed from version `expected` (0 = none); false
    // (nothing written) when somebody else wrote first or the conversation
    // was cleared meanwhile.
    caf::replies_to<atom::summary, summary_record, int64_t /*expected*/>::with<bool>,
    // Stores a knowledge base's entity graph in the entities and relations
    // tables (all its rows, or a change to the stored graph); false when
    // that version is stored already; conflict when a change's base graph
    // is not the one stored (send every row then).
    caf::replies_to<atom::kb_graph, kb_graph_rows>::with<bool>,
    // A guided workflow's state of a conversation (JSON; "" when none).
    caf::replies_to<atom::flow_state, std::string /*conversation_id*/>::with<std::string>,
    // Replaces it ("" deletes it); false when the conversation is gone.
    caf::replies_to<atom::flow_state, std::string /*conversation_id*/,
                    std::string /*state_json*/>::with<bool>,
    // Replaces it; answers the stored profile.
    caf::replies_to<atom::core_mem, std::string /*user_id*/,
                    std::string /*profile_json*/>::with<std::string>,
    // Stores a new API key (hash only); conflict when the name is taken.
    // Answers the stored record.
    caf::replies_to<atom::key_create, api_key_record>::with<api_key_record>,
    // Every API key, revoked ones included (hashes, never keys), by name.
    caf::replies_to<atom::key_list>::with<std::vector<api_key_record>>,
    // Revokes the key named so; false when there is no active key of that name.
    caf::replies_to<atom::key_revoke, std::string /*name*/>::with<bool>,
    // KB content shared through the store (docs/cluster.md): stores the
    // KB's settings and these documents (replacing by id) under the KB's
    // next version; answers that version.
    caf::replies_to<atom::kb_sync, std::string /*kb*/, std::string /*settings_json*/,
                    std::vector<document>>::with<int64_t>,
    // Every KB's version and settings.
    caf::replies_to<atom::kb_sync>::with<std::vector<kb_version>>,
    // The documents of `kb` stored after version `after`, oldest first.
    caf::replies_to<atom::kb_sync, std::string /*kb*/,
                    int64_t /*after*/>::with<std::vector<document>>,
    // Writes this node's row of cluster_members (insert or update).
    caf::replies_to<atom::members, member_info>::with<bool>,
    // Every row of cluster_members, by name.
    caf::replies_to<atom::members>::with<std::vector<member_info>>,
    // INTERNAL (from the store's worker threads): job `id` finished (its
    // transaction committed or failed); deliver its response promise.
    caf::reacts_to<atom::store_done, uint64_t /*job id*/>>::extend_with<status_api>;

}  // namespace ragtor

CAF_BEGIN_TYPE_ID_BLOCK(ragtor_actors, caf::id_block::ragtor::end)
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::turn_ticket))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::event_sink_actor))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::token_sink_actor))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::stream_actor))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::retrieval_agent_actor))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::kb_admin_actor))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::node_services))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::cluster_actor))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::agent_pool_actor))
CAF_ADD_TYPE_ID(ragtor_actors, (ragtor::session_manager_actor))
CAF_END_TYPE_ID_BLOCK(ragtor_actors)
