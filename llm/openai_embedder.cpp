#include "llm/openai_embedder.hpp"

#include <cmath>
#include <mutex>

#include "llm/openai_client.hpp"

namespace ragtor {

namespace {

class openai_embedder final : public embedder,
                              public std::enable_shared_from_this<openai_embedder> {
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
      for (auto& v : std::get<embedding_batch>(r))
        out.push_back(std::move(v));
    }
    return accepted(std::move(out));
  }

  bool remote() const override { return true; }

  void embed_async(std::vector<std::string> texts,
                   std::function<void(std::variant<embedding_batch, std::string>)> done) override {
    // The client may call back after the embedder is gone (shutdown).
    std::weak_ptr<openai_embedder> weak = shared_from_this();
    client_->embed(std::move(texts), [weak, done = std::move(done)](llm::embed_result r) {
      auto self = weak.lock();
      if (!self)
        done(std::string{"embedding model gone"});
      else if (auto* err = std::get_if<llm::llm_error>(&r))
        done("embedding model failed: " + err->message);
      else
        done(self->accepted(std::move(std::get<embedding_batch>(r))));
    });
  }

private:
  // L2-normalised rows of one size (which becomes dims() if unknown yet),
  // or why not; the sync and async paths share it.
  std::variant<embedding_batch, std::string> accepted(embedding_batch rows) const {
    for (auto& v : rows) {
      double norm = 0;
      for (float x : v)
        norm += static_cast<double>(x) * x;
      if (norm > 0)
        for (auto& x : v)
          x = static_cast<float>(x / std::sqrt(norm));
    }
    if (!rows.empty()) {
      std::lock_guard lock{mx_};
      if (dims_ == 0)
        dims_ = rows.front().size();
      for (auto& v : rows)
        if (v.size() != dims_)
          return "embedding model returned vectors of different sizes";
    }
    return rows;
  }

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
