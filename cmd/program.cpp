#include "cmd/program.hpp"

#include <charconv>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include <CLI/CLI.hpp>

#include "cmd/cli/rest_client.hpp"
#include "cmd/program_fingerprint.hpp"
#include "cmd/worker_main.hpp"
#include "engine/runtime/operator_factory.hpp"
#include "graph/job_file_writer.hpp"
#include "graph/recovery_claim_mode.hpp"
#include "graph/stream_environment.hpp"

namespace snapflow {

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

// `--arg KEY=VALUE` (or `--arg=KEY=VALUE`) pairs taken out of argv; what is left is returned in
// `rest`, argv[0] first.
result<program_args> take_program_args(int argc, char** argv, std::vector<char*>& rest) {
  std::map<std::string, std::string> values;
  rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    std::string_view pair;
    if (a == "--arg") {
      if (i + 1 >= argc) return error{"--arg needs KEY=VALUE"};
      pair = argv[++i];
    } else if (a.starts_with("--arg=")) {
      pair = a.substr(6);
    } else {
      rest.push_back(argv[i]);
      continue;
    }
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return error{"--arg '" + std::string(pair) + "' is not KEY=VALUE"};
    values[std::string(pair.substr(0, eq))] = std::string(pair.substr(eq + 1));
  }
  return program_args(std::move(values));
}

std::string program_description(const program_info& info) {
  return info.description.empty() ? "a snapflow job and its worker in one program"
                                  : info.description;
}

int usage(const std::string& self, const program_info& info, std::ostream& out, int code) {
  out << self << ": " << program_description(info) << " (program '" << info.name << "')\n\n"
      << "usage:\n"
      << "  " << self << " submit --coordinator HOST:PORT [--job-name NAME] [--arg KEY=VALUE]...\n"
      << "      builds the job and submits it to the coordinator's REST API; prints its id\n"
      << "  " << self << " worker --coordinator tcp://HOST:PORT [worker options] [--arg KEY=VALUE]...\n"
      << "      a worker that runs this program's job (`" << self
      << " worker --help` lists its options)\n"
      << "  " << self << " fingerprint [--arg KEY=VALUE]...\n"
      << "      prints the fingerprint workers and the job must share\n"
      << "  " << self << " job-file [--arg KEY=VALUE]...\n"
      << "      prints the job file submit sends\n\n"
      << "Give the worker the same --arg values as the submission: they shape the job, and the\n"
      << "coordinator deploys it only to workers whose job has the same fingerprint.\n";
  return code;
}

// uid -> the vertex declared with a callable, as this process built it.
using callable_map = std::map<std::string, job_vertex, std::less<>>;

callable_map callables_of(const job_graph& graph) {
  callable_map out;
  for (const auto& v : graph.vertices)
    if (v.function) out.emplace(v.uid, v);
  return out;
}

// A user_* kind's creator that hands the deployed vertex this program's callable of the same
// uid, then makes the operator the built-in way.
operator_factory::creator program_creator(std::shared_ptr<const callable_map> callables,
                                          std::shared_ptr<const job_program> program) {
  return [callables, program](const job_vertex& vertex)
             -> result<std::unique_ptr<stream_operator>> {
    auto it = callables->find(vertex.uid);
    if (it == callables->end() || it->second.kind != vertex.kind)
      return error{"program '" + program->name + "' (fingerprint " + program->fingerprint +
                   ") has no " + vertex.kind + " callable with uid '" + vertex.uid + "'"};
    job_vertex with_callable = vertex;
    with_callable.function = it->second.function;
    return operator_factory::builtin().create(with_callable);
  };
}

int run_worker(const std::string& self, const program_info& info, const job_graph& job,
               std::vector<char*> rest) {
  auto callables = std::make_shared<const callable_map>(callables_of(job));
  auto program = std::make_shared<const job_program>(*job.program);
  worker_extensions extensions;
  extensions.program_name = self + " worker";
  extensions.description = "runs the subtasks of program '" + info.name +
                           "' (fingerprint " + program->fingerprint +
                           ") a snapflow coordinator deploys on it";
  extensions.programs = {{program->fingerprint, program->name}};
  // Every kind this job's callables come in (graph/user_function.hpp): a kind added to the
  // typed API is covered without a list to keep up to date here.
  extensions.register_operators = [callables, program](operator_factory& factory) {
    std::set<std::string> kinds;
    for (const auto& [_, vertex] : *callables) kinds.insert(vertex.kind);
    for (const auto& kind : kinds) factory.replace(kind, program_creator(callables, program));
  };
  // worker_main parses from argv[1]: the program's name, then the worker's own options.
  std::string name = self + " worker";
  rest[0] = name.data();
  return worker_main(static_cast<int>(rest.size()), rest.data(), std::move(extensions));
}

int run_submit(const std::string& self, job_graph job, std::vector<char*> rest) {
  CLI::App app{self + " submit: builds this program's job and submits it", self + " submit"};
  std::string coordinator = "localhost:8081";
  std::string token_file, ca_cert, job_name;
  std::optional<std::string> savepoint, claim_mode;
  bool json = false;
  app.add_option("--coordinator", coordinator,
                 "REST address of the coordinator: host:port, http://host:port or "
                 "https://host:port")
      ->envname("SNAPFLOW_COORDINATOR")
      ->capture_default_str();
  app.add_option("--rest-token-file", token_file,
                 "file holding the coordinator's REST token, sent with every call")
      ->envname("SNAPFLOW_REST_TOKEN_FILE");
  app.add_option("--ca-cert", ca_cert, "PEM file of the CA to trust for an https:// coordinator")
      ->envname("SNAPFLOW_CA_CERT");
  app.add_option("--job-name", job_name, "the job's name (default: the one the program sets)");
  app.add_option("--from-savepoint", savepoint, "start from this savepoint (or chk-<id>) folder");
  app.add_option("--claim-mode", claim_mode, "claim or no-claim; only with --from-savepoint");
  app.add_flag("--json", json, "print the coordinator's JSON answer");
  try {
    app.parse(static_cast<int>(rest.size()), rest.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }
  std::optional<recovery_claim_mode> claim;
  if (claim_mode) {
    claim = parse_recovery_claim_mode(*claim_mode);
    if (!claim || !savepoint) {
      std::cerr << self << ": --claim-mode is claim or no-claim, with --from-savepoint\n";
      return exit_usage;
    }
  }
  if (!job_name.empty()) job.name = job_name;
  auto text = write_job_file(job);
  if (!text) {
    std::cerr << self << ": the job cannot be submitted: " << text.err().message << "\n";
    return exit_failure;
  }
  cli::rest_access access;
  access.ca_cert = ca_cert;
  if (!token_file.empty()) {
    auto token = cli::read_rest_token_file(token_file);
    if (!token) {
      std::cerr << self << ": " << token.err().message << "\n";
      return exit_usage;
    }
    access.token = *token;
  }
  cli::rest_client client(coordinator, access);
  std::string path = "/jobs?name=" + cli::query_value(job.name);
  if (savepoint) path += "&fromSavepoint=" + cli::query_value(*savepoint);
  if (claim) path += "&claimMode=" + std::string(to_string(*claim));
  auto answer = client.post(path, *text, "application/toml");
  if (!answer) {
    std::cerr << self << ": cannot submit the job: " << answer.err().message << "\n";
    return exit_failure;
  }
  if (json)
    std::cout << answer->dump(2) << "\n";
  else
    std::cout << answer->value("jobid", std::string()) << "\n";
  return exit_ok;
}

}  // namespace

std::string program_args::get(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

std::int64_t program_args::get_int(const std::string& key, std::int64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::int64_t n = 0;
  const std::string& v = it->second;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size())
    throw std::invalid_argument("--arg " + key + "=" + v + ": not an integer");
  return n;
}

result<job_graph> build_program_job(const job_builder& build_job, const program_info& info,
                                    const program_args& args) {
  if (info.name.empty()) return error{"the program's name must not be blank"};
  if (auto why = program_name_problem(info.name)) return error{"program_info::name: " + *why};
  try {
    stream_environment env;
    api::typed_environment typed(env);
    build_job(typed, args);
    job_graph job = env.build_job_graph();
    job.program = job_program{info.name, program_fingerprint(job, info.name)};
    return job;
  } catch (const std::exception& e) {
    return error{"building the job failed: " + std::string(e.what())};
  }
}

int run_program(int argc, char** argv, program_info info, job_builder build_job) {
  // Messages name the program as users type it, without the folder it was started from.
  const std::string self =
      argc > 0 && argv[0] != nullptr && argv[0][0] != '\0'
          ? std::filesystem::path(argv[0]).filename().string()
          : std::string("program");
  if (argc < 2) return usage(self, info, std::cerr, exit_usage);
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help")
    return usage(self, info, std::cout, exit_ok);
  std::vector<char*> rest;
  auto args = take_program_args(argc - 1, argv + 1, rest);
  if (!args) {
    std::cerr << self << ": " << args.err().message << "\n";
    return exit_usage;
  }
  const bool wants_help =
      rest.size() > 1 && (std::string_view(rest[1]) == "--help" || std::string_view(rest[1]) == "-h");
  auto job = build_program_job(build_job, info, *args);
  if (!job && !wants_help) {
    std::cerr << self << ": " << job.err().message << "\n";
    return exit_failure;
  }
  if (command == "worker") {
    if (!job) return usage(self, info, std::cout, exit_ok);
    return run_worker(self, info, *job, std::move(rest));
  }
  if (command == "submit") {
    if (!job) return usage(self, info, std::cout, exit_ok);
    return run_submit(self, std::move(*job), std::move(rest));
  }
  if (command == "fingerprint" || command == "job-file") {
    if (rest.size() > 1) {
      std::cerr << self << " " << command << ": takes only --arg KEY=VALUE\n";
      return exit_usage;
    }
    if (command == "fingerprint") {
      std::cout << job->program->fingerprint << "\n";
      return exit_ok;
    }
    auto text = write_job_file(*job);
    if (!text) {
      std::cerr << self << ": " << text.err().message << "\n";
      return exit_failure;
    }
    std::cout << *text;
    return exit_ok;
  }
  std::cerr << self << ": unknown command '" << command << "'\n";
  return usage(self, info, std::cerr, exit_usage);
}

int run_program(int argc, char** argv, program_info info,
                std::function<void(api::typed_environment& typed)> build_job) {
  return run_program(argc, argv, std::move(info),
                     [build_job = std::move(build_job)](api::typed_environment& typed,
                                                        const program_args&) { build_job(typed); });
}

}  // namespace snapflow
