// ragtor's CAF type-ID block: every atom and every message type, in one
// place (the VAST atoms.hpp model). Atom texts are at most 10 characters and
// must be unique: two atoms with the same text are the same atom.
#pragma once

#include <string>
#include <vector>

#include <caf/type_id.hpp>

#include "protocol/messages.hpp"
#include "protocol/document.hpp"
#include "protocol/kb_settings.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(ragtor, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(ragtor, (ragtor::chat_request))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::route_decision))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::retrieval_item))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::trace_step))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::retrieval_result))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::retrieve_options))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::citation))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::usage_info))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::stored_message))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::turn_opened))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::generation_request))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::generation_result))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::stream_event))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::stream_event>))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::stored_message>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::conversation_info))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::conversation_page))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::feedback_vote))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::document))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::document>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::kb_settings))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::node_log))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::node_log>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::plan_input))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::plan_outcome))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::ingest_report))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::tool_call))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::tool_call>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::llm_message))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::llm_message>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::completion_request))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::completion_result))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::upstream_event))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::memory_record))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::memory_record>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::episode_record))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::episode_record>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::summary_record))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::graph_entity_row))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::graph_relation_row))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::graph_entity_row>))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::graph_relation_row>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::kb_graph_rows))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::rerank_reply))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::api_key_record))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::api_key_record>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::member_info))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::member_info>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::kb_version))
  CAF_ADD_TYPE_ID(ragtor, (std::vector<ragtor::kb_version>))
  CAF_ADD_TYPE_ID(ragtor, (ragtor::turn_context))

  CAF_ADD_ATOM(ragtor, ragtor::atom, status, "status")
  CAF_ADD_ATOM(ragtor, ragtor::atom, open_turn, "openturn")
  CAF_ADD_ATOM(ragtor, ragtor::atom, turn_done, "turndone")
  CAF_ADD_ATOM(ragtor, ragtor::atom, stop, "stop")
  CAF_ADD_ATOM(ragtor, ragtor::atom, subscribe, "subscribe")
  CAF_ADD_ATOM(ragtor, ragtor::atom, demand, "demand")
  CAF_ADD_ATOM(ragtor, ragtor::atom, cancel, "cancel")
  CAF_ADD_ATOM(ragtor, ragtor::atom, events, "events")
  CAF_ADD_ATOM(ragtor, ragtor::atom, token, "token")
  CAF_ADD_ATOM(ragtor, ragtor::atom, route, "route")
  CAF_ADD_ATOM(ragtor, ragtor::atom, resolve, "resolve")
  CAF_ADD_ATOM(ragtor, ragtor::atom, retrieve, "retrieve")
  CAF_ADD_ATOM(ragtor, ragtor::atom, generate, "generate")
  CAF_ADD_ATOM(ragtor, ragtor::atom, begin_turn, "beginturn")
  CAF_ADD_ATOM(ragtor, ragtor::atom, finish_turn, "finishturn")
  CAF_ADD_ATOM(ragtor, ragtor::atom, history, "history")
  CAF_ADD_ATOM(ragtor, ragtor::atom, store_done, "storedone")
  CAF_ADD_ATOM(ragtor, ragtor::atom, list_convs, "listconvs")
  CAF_ADD_ATOM(ragtor, ragtor::atom, messages, "messages")
  CAF_ADD_ATOM(ragtor, ragtor::atom, delete_conv, "deleteconv")
  CAF_ADD_ATOM(ragtor, ragtor::atom, clear, "clear")
  CAF_ADD_ATOM(ragtor, ragtor::atom, feedback, "feedback")
  CAF_ADD_ATOM(ragtor, ragtor::atom, tick, "rtick")
  CAF_ADD_ATOM(ragtor, ragtor::atom, shutdown, "shutdown")
  CAF_ADD_ATOM(ragtor, ragtor::atom, kb_create, "kbcreate")
  CAF_ADD_ATOM(ragtor, ragtor::atom, kb_ingest, "kbingest")
  CAF_ADD_ATOM(ragtor, ragtor::atom, complete, "complete")
  CAF_ADD_ATOM(ragtor, ragtor::atom, upstream, "upstream")
  CAF_ADD_ATOM(ragtor, ragtor::atom, core_mem, "coremem")
  CAF_ADD_ATOM(ragtor, ragtor::atom, mem_list, "memlist")
  CAF_ADD_ATOM(ragtor, ragtor::atom, mem_delete, "memdel")
  CAF_ADD_ATOM(ragtor, ragtor::atom, episode, "episode")
  CAF_ADD_ATOM(ragtor, ragtor::atom, recall, "recall")
  CAF_ADD_ATOM(ragtor, ragtor::atom, summary, "summary")
  CAF_ADD_ATOM(ragtor, ragtor::atom, summarize, "summarize")
  CAF_ADD_ATOM(ragtor, ragtor::atom, kb_graph, "kbgraph")
  CAF_ADD_ATOM(ragtor, ragtor::atom, plan, "plan")
  CAF_ADD_ATOM(ragtor, ragtor::atom, flow_state, "flowstate")
  CAF_ADD_ATOM(ragtor, ragtor::atom, rerank, "rerank")
  CAF_ADD_ATOM(ragtor, ragtor::atom, embedded, "qembedded")
  CAF_ADD_ATOM(ragtor, ragtor::atom, attach, "attach")
  CAF_ADD_ATOM(ragtor, ragtor::atom, find_turn, "findturn")
  CAF_ADD_ATOM(ragtor, ragtor::atom, key_create, "keycreate")
  CAF_ADD_ATOM(ragtor, ragtor::atom, key_list, "keylist")
  CAF_ADD_ATOM(ragtor, ragtor::atom, key_revoke, "keyrevoke")
  CAF_ADD_ATOM(ragtor, ragtor::atom, hello, "hello")
  CAF_ADD_ATOM(ragtor, ragtor::atom, ping, "ping")
  CAF_ADD_ATOM(ragtor, ragtor::atom, members, "members")
  CAF_ADD_ATOM(ragtor, ragtor::atom, peer_up, "peerup")
  CAF_ADD_ATOM(ragtor, ragtor::atom, peer_down, "peerdown")
  CAF_ADD_ATOM(ragtor, ragtor::atom, kb_sync, "kbsync")
  CAF_ADD_ATOM(ragtor, ragtor::atom, snapshot, "snapshot")
  CAF_ADD_ATOM(ragtor, ragtor::atom, evict, "evict")
  CAF_ADD_ATOM(ragtor, ragtor::atom, nodes, "nodes")
  CAF_ADD_ATOM(ragtor, ragtor::atom, opened, "opened")

CAF_END_TYPE_ID_BLOCK(ragtor)
// clang-format on

namespace caf {
class actor_system_config;
}

namespace ragtor {
// Registers every ragtor message type, actor handle type and the error
// category. Called once per actor_system_config, in every binary.
void register_types(caf::actor_system_config& cfg);
}  // namespace ragtor
