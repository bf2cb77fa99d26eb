#include "cmd/program_fingerprint.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include <openssl/evp.h>

namespace snapflow {

namespace {

// Every field is length-prefixed, so no two different graphs write the same bytes.
class canonical_text {
 public:
  void field(std::string_view text) {
    out_ += std::to_string(text.size());
    out_ += ':';
    out_ += text;
  }
  void number(std::uint64_t n) { field(std::to_string(n)); }
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

std::string sha256_hex(const std::string& bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 is not available from this OpenSSL");
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

}  // namespace

std::string program_fingerprint(const job_graph& graph, std::string_view program_name) {
  canonical_text c;
  c.field("snapflow program fingerprint 1");
  c.field(program_name);
  std::vector<const job_vertex*> vertices;
  for (const auto& v : graph.vertices) vertices.push_back(&v);
  std::sort(vertices.begin(), vertices.end(),
            [](const job_vertex* a, const job_vertex* b) { return a->uid < b->uid; });
  c.number(vertices.size());
  for (const job_vertex* v : vertices) {
    c.field(v->uid);
    c.field(v->kind);
    c.field(v->custom_role ? to_string(*v->custom_role) : std::string_view("-"));
    c.number(v->parallelism);
    c.number(v->max_parallelism);
    c.number(v->params.size());
    for (const auto& [key, value] : v->params) {
      c.field(key);
      c.field(value);
    }
    // Inputs in the order the vertex reads them (a two-input operator tells them apart).
    const auto inputs = graph.inputs_of(v->id);
    c.number(inputs.size());
    for (const job_edge* e : inputs) {
      const job_vertex* source = graph.find_vertex(e->source);
      c.field(source != nullptr ? source->uid : std::string("?"));
      c.field(to_string(e->part));
    }
  }
  return sha256_hex(c.text());
}

}  // namespace snapflow
