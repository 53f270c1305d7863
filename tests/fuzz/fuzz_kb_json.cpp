// libFuzzer target: the KB JSON inputs — ingestion bodies (JSON and NDJSON,
// the NDJSON one also fed in two pieces split where the first byte says),
// KB settings (POST /api/v1/kbs, workflow definitions included) and
// search requests. Every answer is a value or an error naming a field.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/kb_json.hpp"
#include "protocol/kb_settings.hpp"
#include "protocol/workflow_def.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view all{reinterpret_cast<const char*>(data), size};
  auto body = all.substr(1);
  for (bool ndjson : {false, true}) {
    auto docs = ragtor::parse_documents_body(body, ndjson, 64);
    if ((docs.ok && docs.value.size() > 64) || (!docs.ok && docs.error.message.empty()))
      std::abort();
  }
  ragtor::ndjson_documents stream{64};
  auto cut = std::min<size_t>(static_cast<uint8_t>(all[0]), body.size());
  bool ok = stream.feed(body.substr(0, cut)) && stream.feed(body.substr(cut)) && stream.finish();
  if (ok != stream.ok() || (!ok && stream.error().message.empty()))
    std::abort();
  if (auto s = ragtor::kb_settings_from_json(body)) {
    (void)ragtor::validate(*s);
    // What is accepted serialises to JSON that reads back the same.
    auto again = ragtor::kb_settings_from_json(ragtor::to_json(*s));
    if (!again || ragtor::to_json(*again) != ragtor::to_json(*s))
      std::abort();
  }
  (void)ragtor::wf::parse_workflow(body);
  auto search = ragtor::parse_search_request(body, 64 << 10, 4 << 10);
  if (search.ok && (search.value.query.empty() || search.value.query.size() > (4 << 10)))
    std::abort();
  return 0;
}
