// A knowledge base as the API shows it: its settings, sizes and indexes
// (GET /api/v1/kbs, GET /api/v1/kbs/{kb}).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ragtor {

struct kb_snapshot;

// {"settings", "documents", "chunks", "indexes"} of one KB.
std::string kb_info_json(const kb_snapshot& snap);
// {"kbs": [...]} of every KB.
std::string kb_list_json(const std::vector<std::shared_ptr<const kb_snapshot>>& snaps);

}  // namespace ragtor
