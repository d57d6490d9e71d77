// `megadecode serve`: the OpenAI-compatible HTTP server. It listens first (GET /health answers
// 503 while the model loads), serves until SIGINT or SIGTERM, then drains and exits 0; a second
// SIGINT or SIGTERM cancels what runs (streams get an in-band error) and exits within a second
// with 128 + the signal; a third exits on the spot.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "server/openai_server.h"

namespace md::cli {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_second_signal = 0;

extern "C" void on_stop_signal(int signal) {
  // Only async-signal-safe calls here.
  if (g_stop_signal == 0) {
    g_stop_signal = signal;
    return;
  }
  if (g_second_signal != 0) _exit(128 + signal);
  // The operator insists (the drain is waiting for a long reply): cancel and leave.
  g_second_signal = signal;
  constexpr char kMessage[] = "megadecode serve: second signal, exiting without draining\n";
  (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
}

// After a second signal the drain cancels what runs and returns within a second; should it be
// stuck (the model still loading, say), this leaves anyway.
void exit_soon_after_a_second_signal() {
  std::thread([] {
    while (g_second_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    _exit(128 + g_second_signal);
  }).detach();
}

struct ServeFlags {
  ModelFlags model;
  server::ServerOptions server;
  std::string served_names;
};

// Half of this machine's memory: room for the weights and everything else beside the sequences.
std::size_t default_kv_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) / 2;
}

void add_serve_flags(CLI::App& sub, ServeFlags& f) {
  add_model_flags(sub, f.model);
  server::ServerOptions& o = f.server;
  o.kv_memory_bytes = default_kv_memory();
  sub.add_option("--host", o.host, "Address to listen on (default 127.0.0.1: this machine only)");
  sub.add_option("--port", o.port, "TCP port (0: any free port)")->check(CLI::Range(0, 65535));
  sub.add_option("--served-model-name", f.served_names,
                 "Model id clients use (comma-separated aliases allowed; default: the model's "
                 "file or directory name, lower-cased)");
  sub.add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY'");
  sub.add_option("--max-batch", o.max_batch, "Rows decoded together (continuous batching)")
      ->check(CLI::Range(1, 64));
  sub.add_option("--max-queue", o.max_queue, "Waiting requests before 429")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub.add_option("--max-choices", o.max_choices, "Most choices (n × prompts) per request")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  sub.add_option("--max-body-bytes", o.max_body_bytes, "Largest request body (413 beyond)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 32));
  sub.add_option("--max-messages", o.max_messages, "Most chat messages per request")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  sub.add_option("--responses-kept", o.responses_kept,
                 "Responses the Responses API keeps in memory for previous_response_id and GET "
                 "/v1/responses/{id} (the oldest is dropped first; 0: none)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20));
  sub.add_option("--responses-memory", o.responses_memory_bytes,
                 "Memory the kept responses may take, e.g. 256M (the default); the oldest are "
                 "dropped first")
      ->transform(CLI::AsSizeValue(false));
  sub.add_option("--default-max-tokens", o.default_max_tokens,
                 "max_tokens when a request gives none (default: chat → the rest of the "
                 "context, completions → 16)");
  sub.add_option("--spec-max-rows", o.spec_max_rows,
                 "With --draft: greedy requests speculate while at most this many rows generate, "
                 "and decode batched beyond (same tokens); sampled requests always speculate")
      ->check(CLI::Range(int64_t{0}, int64_t{64}));
  sub.add_option("--prefill-chunk", o.prefill_chunk,
                 "Prompt tokens per prefill call, the grain of prefill (boundaries count from "
                 "the prompt's start, so outputs never depend on timing)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  sub.add_option("--prefill-budget-ms", o.prefill_budget_ms,
                 "Prefill chunks run between two decode steps while they fit in this many "
                 "milliseconds (at least one): the stall a long prompt causes running streams")
      ->check(CLI::Range(0.0, 60000.0));
  sub.add_option("--kv-memory", o.kv_memory_bytes,
                 "Sequence memory (KV caches, recurrent states) running requests may reserve at "
                 "once, e.g. 4G or 512M (default: half of this machine's memory; 0: no limit). "
                 "A request waits for memory in the queue; one that could never fit is a 400")
      ->transform(CLI::AsSizeValue(false));
  sub.add_option("--prefix-cache-memory", o.prefix_cache_bytes,
                 "Memory for states kept after requests, from which later prompts that start "
                 "the same way resume instead of prefilling again, e.g. 1G (the default); the "
                 "least recently used go first")
      ->transform(CLI::AsSizeValue(false));
  sub.add_flag("--prefix-cache,!--no-prefix-cache", o.prefix_cache,
               "Keep states across requests so that prompts sharing a prefix resume (on by "
               "default); --no-prefix-cache prefills every prompt from its first token");
  sub.add_option("--prefix-cache-interval", o.prefix_cache_interval,
                 "Prompt tokens between the states a prompt leaves in the prefix cache, on models "
                 "that cannot rewind a state (hybrids); rounded up to whole prefill chunks")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub.add_option("--shutdown-grace", o.shutdown_grace_seconds,
                 "Seconds running requests get to finish after SIGTERM")
      ->check(CLI::Range(0.0, 86400.0));
  sub.add_option("--http-threads", o.http_threads,
                 "Threads that run route handlers (JSON, templates, tokenizing); connections and "
                 "streams hold none")
      ->check(CLI::Range(1, 256));
  // At least a second: 0 would close every connection before its request arrived.
  sub.add_option("--read-timeout", o.read_timeout_seconds, "Seconds to wait for a request")
      ->check(CLI::Range(1, 86400));
  sub.add_option("--write-timeout", o.write_timeout_seconds, "Seconds a write may block")
      ->check(CLI::Range(1, 86400));
  sub.add_option("--cors-origin", o.cors_origin, "Send CORS headers allowing this origin");
  sub.add_option("--tool-call-format", o.tool_call_format,
                 "Tool-call format the model writes (default: from the chat template)")
      ->check(CLI::IsMember({"json", "xml"}));
  sub.add_flag("!--no-reasoning-parser", o.reasoning_parser,
               "Leave <think> blocks in content instead of reasoning_content");
  // The test seam (server_testing.h): hidden from --help (an empty group), for the HTTP
  // end-to-end tests that run the real binary.
  sub.add_option("--test-fault-after-tokens", o.test_hooks.scheduler.fault_after_tokens,
                 "Test hook: fail each choice after this many tokens")
      ->group("");
  sub.add_option("--test-prefill-delay-us", o.test_hooks.scheduler.prefill_delay_us_per_token,
                 "Test hook: make prefill this much slower per prompt token")
      ->group("");
  sub.add_option("--test-load-delay-ms", o.test_hooks.load_delay_ms,
                 "Test hook: delay the model load")
      ->group("");
  sub.add_option("--test-script-output", o.test_hooks.scripted_output,
                 "Test hook: every choice writes this text first")
      ->group("");
}

std::vector<std::string> split_names(const std::string& names) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= names.size()) {
    std::size_t comma = names.find(',', start);
    std::string name =
        names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!name.empty()) out.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int serve(ServeFlags& f) {
  f.server.served_model_names = split_names(f.served_names);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGPIPE, SIG_IGN);  // a client that vanished mid-write is a failed write, not death
  exit_soon_after_a_second_signal();

  if (!server::is_loopback_host(f.server.host) && f.server.api_key.empty()) {
    log::warn(
        "listening on {} without --api-key: anyone who can reach this address can use the model",
        f.server.host);
  }
  std::string spec = model_spec(f.model);
  if (follows_rank_zero(f.model)) {
    // Rank 0 listens and schedules; this rank only follows its calls (and exits there).
    f.model.model = spec;
    (void)open_model_session(f.model, f.server.max_batch);
  }
  server::OpenAiServer server(f.server, server::BuildInfo{"0.1.0", MD_GIT_REVISION}, spec,
                              f.model.executor);
  int port = server.start();
  log::info("listening on http://{}:{} (loading the model)", f.server.host, port);
  // Scripts and tests read the port from this line (with --port 0 it is the only way to know).
  fmt::print(stderr, "megadecode serve: listening on http://{}:{}\n", f.server.host, port);
  std::fflush(stderr);

  if (f.server.test_hooks.load_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(f.server.test_hooks.load_delay_ms));
  }
  ModelSession session;
  try {
    f.model.model = spec;
    if (f.model.force_accept > 0) {
      fail("--force-accept is for benchmarks (it changes the output); serve does not take it");
    }
    session = open_model_session(f.model, f.server.max_batch);
    server::ServedModel served;
    served.model = session.model.get();
    served.tokenizer = session.tokenizer.get();
    served.chat_template = session.chat_template ? &*session.chat_template : nullptr;
    served.sampling_defaults = session.sampling_defaults;
    served.context = session.context;
    served.executor = f.model.executor;
    if (session.drafter) {
      served.drafter = session.drafter.get();
      served.block_size = session.block_size;
      served.confidence_threshold = session.confidence_threshold;
      served.speculative_method = session.drafter_method;
      served.drafter_source = session.drafter_directory;
    }
    served.fingerprint_source =
        fmt::format("{}|{}|{}|{}|{}", session.source.directory, session.model->description(),
                    f.model.kv_cache, session.context, f.model.matmul_inputs);
    server.serve_model(served);
  } catch (const std::exception& e) {
    server.mark_failed();
    server.shutdown();  // nothing was served yet
    throw;
  }
  log::info("ready: {} (context {}, {} rows)", session.model->description(), session.context,
            f.server.max_batch);
  fmt::print(stderr, "megadecode serve: ready\n");
  std::fflush(stderr);
  while (g_stop_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  log::info("signal {}: draining (grace {} s)", static_cast<int>(g_stop_signal),
            f.server.shutdown_grace_seconds);
  server.shutdown([] { return g_second_signal != 0; });
  if (g_second_signal != 0) {
    std::fflush(stderr);
    std::fflush(stdout);
    _exit(128 + g_second_signal);
  }
  return kExitOk;
}

}  // namespace

CommandAction add_serve_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  auto flags = std::make_shared<ServeFlags>();
  add_serve_flags(*sub, *flags);
  return [flags]() { return serve(*flags); };
}

}  // namespace md::cli
