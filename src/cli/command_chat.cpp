// `megadecode chat`: an interactive conversation in the terminal. Replies stream as they are
// generated, reasoning set apart; slash commands manage the conversation; Ctrl-C stops a reply
// and Ctrl-D ends the chat. With stdin not a terminal it reads lines from the pipe, so it can be
// scripted.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "base/error.h"
#include "cli/chat_printer.h"
#include "cli/chat_session.h"
#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/line_reader.h"
#include "cli/model_session.h"

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
    "Ctrl-C stops a reply and keeps what it said so far.\n";

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

// Runs one turn; errors end the turn, not the chat.
void run_turn(ChatSession& chat, ChatPrinter& printer, const std::string& text) {
  InterruptScope interrupt;
  try {
    ChatTurn turn = chat.send(
        text, [&](const ReasoningParser::Segment& segment) { printer.print(segment); },
        &InterruptScope::flag());
    printer.end_turn();
    if (turn.finish == engine::FinishReason::kCancelled) fmt::print(stderr, "[stopped]\n");
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
  ChatSession chat(session, flags.sampling, ChatOptions{flags.system, !flags.no_think});
  bool color = stdout_supports_color(flags.no_color);
  ChatPrinter printer(stdout, color);
  LineReader reader;
  if (reader.interactive()) {
    fmt::print(stderr, "{} | context {} tokens | /help for commands, Ctrl-D to leave\n",
               session.model->description(), session.context);
  }
  const std::string prompt = reader.interactive() ? "> " : "";
  while (std::optional<std::string> line = reader.read(prompt)) {
    std::string_view text = *line;
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (text.starts_with("/") && !text.starts_with("//")) {
      if (run_command(chat, text) == CommandResult::kQuit) return kExitOk;
      continue;
    }
    if (text.starts_with("//")) text.remove_prefix(1);
    run_turn(chat, printer, std::string(text));
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
