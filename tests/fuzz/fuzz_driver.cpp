// A plain main for the fuzz targets, so they build and run with any compiler (and under
// ASan/UBSan in ctest): every corpus file, then a number of seeded mutations of each (bit flips,
// interesting bytes, truncations, insertions, deletions, duplicated chunks, forged lengths,
// splices with another corpus file, dictionary tokens). Deterministic: a seed and the corpus
// decide every input, so a failure replays with the same arguments.
//
//   <target> <corpus folder or file>... [--mutations N] [--seed S] [--only FILE:K]
//
// On a crash the input is written to crash-<target>.bin in the current folder, and the file and
// mutation number are printed; --only FILE:K reruns just that one.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_target.hpp"

// The sanitizer runtime (and so its death callback) is there only in sanitizer builds.
#if defined(__SANITIZE_ADDRESS__)
#define SNAPFLOW_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SNAPFLOW_FUZZ_ASAN 1
#endif
#endif
#ifdef SNAPFLOW_FUZZ_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

namespace fs = std::filesystem;

constexpr std::size_t max_input_bytes = 64 * 1024;

class splitmix {
 public:
  explicit splitmix(std::uint64_t seed) : x_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (x_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t x_;
};

// Bytes that mean something to msgpack (nil, bools, integer, string, array and map headers) or
// to integer parsing (0, 1, sign and size boundaries).
constexpr std::uint8_t interesting_bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xc0, 0xc2, 0xc3, 0xcc,
                                              0xcd, 0xce, 0xcf, 0xd0, 0xd3, 0xd9, 0xda, 0xdb, 0xdc,
                                              0xdd, 0xde, 0xdf, 0x90, 0x9f, 0x8f, 0xa0, 0xbf};

// Lengths a forged header might carry.
constexpr std::uint64_t interesting_words[] = {
    0, 1, 0x7f, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0xffffffff, 0x7fffffffffffffff, ~0ull};

// Tokens of the formats under test: TOML for job files, msgpack keys for the rest.
const std::vector<std::string> dictionary = {"[[operator]]",
                                             "[job]",
                                             "[checkpointing]",
                                             "[operator.params]",
                                             " = ",
                                             "\"",
                                             "'''",
                                             "{",
                                             "}",
                                             "[",
                                             "]",
                                             ",",
                                             "\n",
                                             "#",
                                             "uid",
                                             "kind",
                                             "input",
                                             "inputs",
                                             "parallelism",
                                             "max_parallelism",
                                             "params",
                                             "partition",
                                             "interval_ms",
                                             "mode",
                                             "\"hash\"",
                                             "-1",
                                             "0",
                                             "99999999999999999999",
                                             "inf",
                                             "nan",
                                             "0x7fffffff",
                                             "true",
                                             "1979-05-27T07:32:00Z",
                                             "sequence_source",
                                             "keyed_sum",
                                             "two_phase_commit_file_sink",
                                             "\xa1"
                                             "v",
                                             "\xa1"
                                             "t",
                                             "\xa2"
                                             "id",
                                             "\xa8"
                                             "vertices",
                                             "\xa5"
                                             "edges",
                                             "\xaa"
                                             "checkpoint",
                                             "\xa7"
                                             "attempt"};

std::string mutate(std::string input, const std::vector<std::string>& corpus, splitmix& rng) {
  const std::size_t steps = 1 + rng.below(4);
  for (std::size_t s = 0; s < steps; ++s) {
    const std::size_t at = rng.below(input.size() + 1);
    switch (rng.below(9)) {
      case 0:  // flip a bit
        if (!input.empty()) input[rng.below(input.size())] ^= static_cast<char>(1u << rng.below(8));
        break;
      case 1:  // an interesting byte
        if (!input.empty())
          input[rng.below(input.size())] =
              static_cast<char>(interesting_bytes[rng.below(std::size(interesting_bytes))]);
        break;
      case 2:  // truncate
        input.resize(rng.below(input.size() + 1));
        break;
      case 3: {  // insert random bytes
        std::string bytes(1 + rng.below(8), '\0');
        for (char& c : bytes) c = static_cast<char>(rng.next());
        input.insert(at, bytes);
        break;
      }
      case 4:  // delete a chunk
        if (at < input.size())
          input.erase(at, 1 + rng.below(std::min<std::size_t>(16, input.size() - at)));
        break;
      case 5:  // duplicate a chunk somewhere else
        if (!input.empty()) {
          const std::size_t from = rng.below(input.size());
          const std::string chunk = input.substr(from, 1 + rng.below(32));
          input.insert(rng.below(input.size() + 1), chunk);
        }
        break;
      case 6: {  // a forged length or count, big-endian (msgpack) or little-endian (headers)
        const std::uint64_t word = interesting_words[rng.below(std::size(interesting_words))];
        const std::size_t width = std::size_t{1} << (1 + rng.below(3));  // 2, 4 or 8 bytes
        const bool big_endian = rng.below(2) == 0;
        for (std::size_t i = 0; i < width && at + i < input.size(); ++i) {
          const std::size_t shift = 8 * (big_endian ? width - 1 - i : i);
          input[at + i] = static_cast<char>((word >> shift) & 0xFFu);
        }
        break;
      }
      case 7: {  // splice with another corpus file
        const std::string& other = corpus[rng.below(corpus.size())];
        input = input.substr(0, at) + other.substr(rng.below(other.size() + 1));
        break;
      }
      case 8:  // a dictionary token
        input.insert(at, dictionary[rng.below(dictionary.size())]);
        break;
    }
    if (input.size() > max_input_bytes) input.resize(max_input_bytes);
  }
  return input;
}

// What a crash handler writes out: prepared before each run, since a signal handler may only
// call async-signal-safe functions.
std::string current_input;
char crash_message[1024];
char crash_file[256];

void write_crash_report() {
  const int fd = ::open(crash_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t written = ::write(fd, current_input.data(), current_input.size());
    (void)written;
    ::close(fd);
  }
  ssize_t printed = ::write(2, crash_message, std::strlen(crash_message));
  (void)printed;
}

extern "C" void on_fatal_signal(int signal) {
  write_crash_report();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void run_one(const std::string& input, const std::string& name, std::size_t k, const char* target,
             std::uint64_t seed) {
  current_input = input;
  std::snprintf(crash_message, sizeof crash_message,
                "fuzz driver: %s crashed on %s mutation %zu (seed %llu); input written to %s; "
                "rerun with --seed %llu --only %s:%zu\n",
                target, name.c_str(), k, static_cast<unsigned long long>(seed), crash_file,
                static_cast<unsigned long long>(seed), name.c_str(), k);
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(current_input.data()),
                         current_input.size());
}

// FNV-1a: the same on every standard library, unlike std::hash.
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int usage(const char* why) {
  std::cerr << "fuzz driver: " << why
            << "\nusage: <target> <corpus folder or file>... [--mutations N] [--seed S] "
               "[--only FILE:K]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string target = fs::path(argv[0]).filename().string();
  std::vector<fs::path> inputs;
  std::size_t mutations = 1000;
  std::uint64_t seed = 1;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg.starts_with("--")) {
      return usage("unknown option");
    } else {
      inputs.emplace_back(arg);
    }
  }

  // Corpus files in name order, so every run sees the same inputs in the same order.
  std::vector<fs::path> files;
  for (const fs::path& p : inputs) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& entry : fs::directory_iterator(p))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      return usage(("no such corpus folder or file: " + p.string()).c_str());
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) return usage("the corpus is empty");
  std::vector<std::string> corpus;
  for (const fs::path& f : files) corpus.push_back(read_file(f));

  std::snprintf(crash_file, sizeof crash_file, "crash-%s.bin", target.c_str());
  std::signal(SIGABRT, on_fatal_signal);
  std::signal(SIGSEGV, on_fatal_signal);
  std::signal(SIGFPE, on_fatal_signal);
  std::signal(SIGILL, on_fatal_signal);
#ifdef SNAPFLOW_FUZZ_ASAN
  // ASan reports and exits without a signal the handlers above would see.
  __sanitizer_set_death_callback(write_crash_report);
#endif

  const auto began = std::chrono::steady_clock::now();
  std::size_t runs = 0;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string name = files[f].filename().string();
    // Each file's mutations depend only on the seed, its name and their number.
    splitmix rng(seed ^ fnv1a(name));
    for (std::size_t k = 0; k <= mutations; ++k) {
      std::string input = k == 0 ? corpus[f] : mutate(corpus[f], corpus, rng);
      if (!only.empty() && only != name + ":" + std::to_string(k)) continue;
      run_one(input, name, k, target.c_str(), seed);
      ++runs;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::cout << target << ": " << files.size() << " corpus file(s), " << runs << " input(s), "
            << seconds << " s, no crash\n";
  return 0;
}
