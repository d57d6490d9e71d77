// `megadecode chat`: an interactive conversation in the terminal. Replies stream as they are
// generated, reasoning set apart; slash commands manage the conversation; Ctrl-C stops a reply
// and Ctrl-D ends the chat. With stdin not a terminal it reads lines from the pipe, so it can be
// scripted.
#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "cli/chat_defaults.h"
#include "cli/chat_printer.h"
#include "cli/chat_session.h"
#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/line_reader.h"
#include "cli/model_session.h"
#include "cli/prefill_progress.h"

namespace md::cli {
namespace {

struct ChatFlags {
  ModelFlags model;
  SamplingFlags sampling;
  std::string system;
  bool no_think = false;
  bool no_color = false;
};

constexpr std::string_view kHelp =
    "Commands:\n"
    "  /reset         start a new conversation (the system message stays)\n"
    "  /system TEXT   set the system message and start a new conversation (no TEXT: none)\n"
    "  /stats         timings of the last reply and how much of the context is used\n"
    "  /help          this list\n"
    "  /exit, /quit   leave (as does Ctrl-D)\n"
    "A line starting with // sends the rest of it, starting with /, as a message.\n"
    "Ctrl-C stops a reply and keeps what it said so far; at the prompt, Ctrl-C twice leaves.\n";

int print_no_model() {
  fmt::print(stderr,
             "megadecode chat: no model given.\n"
             "Point it at one with --model:\n"
             "  ./megadecode chat --model /path/to/model-dir\n"
             "  ./megadecode chat --model Qwen/Qwen3.8-27B[@revision]   (from the Hugging Face "
             "cache, offline)\n"
             "A model directory holds config.json, *.safetensors and tokenizer files.\n"
             "Without --model, chat uses $MEGADECODE_MODEL or the default SmolLM2-135M-Instruct\n"
             "that scripts/setup installs into .models/ (not installed here).\n");
  return kExitUsage;
}

void print_stats(const ChatSession& chat) {
  if (const std::optional<ChatTurn>& turn = chat.last_turn()) {
    fmt::print(stderr, "{}\n", format_stats(turn->stats, turn->finish));
  } else {
    fmt::print(stderr, "no reply yet\n");
  }
  fmt::print(stderr, "context {} / {} tokens\n", chat.context_used(), chat.context_capacity());
}

// How many tokens a reply may have, and whether that is the chat's default rather than the
// user's --max-tokens (a reply the default cuts says so).
struct ReplyLimit {
  int64_t tokens = 0;
  bool is_default = false;
};

// Runs one turn; errors end the turn, not the chat.
void run_turn(ChatSession& chat, ChatPrinter& printer, const std::string& text, ReplyLimit limit) {
  InterruptScope interrupt;
  try {
    ChatTurn turn = chat.send(
        text, [&](const ReasoningParser::Segment& segment) { printer.print(segment); },
        &InterruptScope::flag());
    printer.end_turn();
    if (turn.finish == engine::FinishReason::kCancelled) fmt::print(stderr, "[stopped]\n");
    if (turn.finish == engine::FinishReason::kLength) {
      if (turn.stats.generated_tokens < limit.tokens) {
        fmt::print(stderr, "[the context is full: /reset starts a new conversation]\n");
      } else if (limit.is_default) {
        fmt::print(stderr,
                   "[cut at {} tokens, a chat reply's default limit: --max-tokens sets it]\n",
                   limit.tokens);
      }
    }
  } catch (const Error& e) {
    printer.end_turn();
    fmt::print(stderr, "error: {}\n(/reset starts a new conversation)\n", e.what());
  }
  InterruptScope::clear();
}

enum class CommandResult { kContinue, kQuit };

CommandResult run_command(ChatSession& chat, std::string_view line) {
  std::size_t space = line.find(' ');
  std::string_view name = line.substr(0, space);
  std::string_view argument;
  if (std::size_t start = line.find_first_not_of(' ', space); start != std::string_view::npos) {
    argument = line.substr(start);
  }
  if (name == "/exit" || name == "/quit") return CommandResult::kQuit;
  if (name == "/help") {
    fmt::print("{}", kHelp);
  } else if (name == "/reset") {
    chat.reset();
    fmt::print(stderr, "(new conversation)\n");
  } else if (name == "/system") {
    chat.set_system(std::string(argument));
    fmt::print(stderr, "({}; new conversation)\n",
               argument.empty() ? "no system message" : "system message set");
  } else if (name == "/stats") {
    print_stats(chat);
  } else {
    fmt::print(stderr, "unknown command {}\n{}", name, kHelp);
  }
  return CommandResult::kContinue;
}

int run_chat(const ChatFlags& flags) {
  if (flags.model.model.empty() && !default_model()) return print_no_model();
  ModelSession session = open_model_session(flags.model);
  const SamplingFlags sampling = chat_sampling(flags.sampling, session.model_sets_sampling);
  ChatSession chat(session, sampling, ChatOptions{flags.system, !flags.no_think});
  PrefillProgressLine progress = PrefillProgressLine::on_stderr();
  chat.set_prefill_progress(std::ref(progress));
  bool color = stdout_supports_color(flags.no_color);
  ChatPrinter printer(stdout, color);
  LineReader reader;
  if (reader.interactive()) {
    fmt::print(stderr, "{} | context {} tokens | /help for commands, Ctrl-D to leave\n{}\n",
               session.model->description(), session.context,
               describe_chat_sampling(sampling, flags.sampling, session.model_sets_sampling));
  }
  const std::string prompt = reader.interactive() ? "> " : "";
  bool interrupted_once = false;
  for (LineInput input = reader.read(prompt); input.kind != LineInput::Kind::kEnd;
       input = reader.read(prompt)) {
    if (input.kind == LineInput::Kind::kInterrupted) {
      // One Ctrl-C at the prompt may be a slip (or meant for a reply that just ended): ask.
      if (interrupted_once) return kExitOk;
      interrupted_once = true;
      fmt::print(stderr, "(Ctrl-C again or Ctrl-D to leave; the conversation is kept otherwise)\n");
      continue;
    }
    interrupted_once = false;
    std::string_view text = input.text;
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (text.starts_with("/") && !text.starts_with("//")) {
      if (run_command(chat, text) == CommandResult::kQuit) return kExitOk;
      continue;
    }
    if (text.starts_with("//")) text.remove_prefix(1);
    run_turn(chat, printer, std::string(text),
             ReplyLimit{sampling.max_tokens, flags.sampling.max_tokens == 0});
  }
  if (reader.interactive()) fmt::print("\n");  // the shell's prompt starts on a line of its own
  return kExitOk;
}

}  // namespace

CommandAction add_chat_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("chat", "Interactive terminal chat with a model");
  auto flags = std::make_shared<ChatFlags>();
  add_model_flags(*sub, flags->model);
  // Without --model the command explains how to give one rather than CLI11's bare complaint.
  sub->get_option("--model")->required(false);
  sub->add_option("--system", flags->system, "System message");
  sub->add_flag("--no-think", flags->no_think, "Ask the template to skip reasoning");
  sub->add_flag("--no-color", flags->no_color,
                "Show reasoning between [thinking] lines instead of in grey");
  add_sampling_flags(*sub, flags->sampling);
  return [flags]() { return run_chat(*flags); };
}

}  // namespace md::cli
