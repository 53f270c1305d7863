#include "llm/openai_embedder.hpp"

#include <cmath>
#include <mutex>

#include "llm/openai_client.hpp"

namespace ragtor {

namespace {

class openai_embedder final : public embedder {
public:
  openai_embedder(std::shared_ptr<llm::openai_client> client, size_t batch)
      : client_(std::move(client)), batch_(std::max<size_t>(batch, 1)) {}

  std::string name() const override {
    return "openai:" + client_->config().model + "/" + std::to_string(dims());
  }

  size_t dims() const override {
    std::lock_guard lock{mx_};
    if (dims_ == 0) {
      // Learn the dimension from the model once.
      auto r = client_->embed_sync({"dimension probe"});
      if (auto* v = std::get_if<embedding_batch>(&r); v && !v->empty())
        dims_ = v->front().size();
    }
    return dims_;
  }

  std::variant<embedding_batch, std::string> embed(const std::vector<std::string>& texts) override {
    embedding_batch out;
    out.reserve(texts.size());
    for (size_t i = 0; i < texts.size(); i += batch_) {
      std::vector<std::string> part(
          texts.begin() + static_cast<std::ptrdiff_t>(i),
          texts.begin() + static_cast<std::ptrdiff_t>(std::min(texts.size(), i + batch_)));
      auto r = client_->embed_sync(std::move(part));
      if (auto* err = std::get_if<llm::llm_error>(&r))
        return "embedding model failed: " + err->message;
      for (auto& v : std::get<embedding_batch>(r)) {
        double norm = 0;
        for (float x : v)
          norm += static_cast<double>(x) * x;
        if (norm > 0)
          for (auto& x : v)
            x = static_cast<float>(x / std::sqrt(norm));
        out.push_back(std::move(v));
      }
    }
    if (!out.empty()) {
      std::lock_guard lock{mx_};
      if (dims_ == 0)
        dims_ = out.front().size();
      for (auto& v : out)
        if (v.size() != dims_)
          return "embedding model returned vectors of different sizes";
    }
    return out;
  }

private:
  std::shared_ptr<llm::openai_client> client_;
  size_t batch_;
  mutable std::mutex mx_;
  mutable size_t dims_ = 0;
};

}  // namespace

std::shared_ptr<embedder> make_openai_embedder(std::shared_ptr<llm::openai_client> client,
                                               size_t batch_size) {
  return std::make_shared<openai_embedder>(std::move(client), batch_size);
}

}  // namespace ragtor
