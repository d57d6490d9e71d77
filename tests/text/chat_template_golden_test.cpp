// Byte-for-byte comparison of the Jinja interpreter against Python jinja2: renders every case of
// the goldens written by tools/gen_template_goldens.py (the ctest fixture runs it first).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "text/chat_template.h"

namespace md {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string golden_path() {
  return (std::filesystem::path(MD_GOLDEN_DIR) / "chat_template_goldens.json").string();
}

// Shows where two renders first differ.
std::string first_difference(const std::string& want, const std::string& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  std::size_t from = i > 40 ? i - 40 : 0;
  auto snippet = [&](const std::string& s) {
    return ordered_json(
               s.substr(from, std::min<std::size_t>(s.size() - std::min(from, s.size()), 100)))
        .dump();
  };
  std::ostringstream out;
  out << "first difference at byte " << i << "\n  jinja2: " << snippet(want)
      << "\n  ours:   " << snippet(got);
  return out.str();
}

struct Outcome {
  bool ok = false;
  std::string detail;
};

Outcome run_case(const ordered_json& c, const std::map<std::string, std::string>& sources,
                 std::map<std::string, std::shared_ptr<ChatTemplate>>& cache) {
  const std::string key = c["template"].get<std::string>();
  const ordered_json& error = c["error"];
  ChatTemplateOptions options;
  options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  options.tools = c["tools"];
  if (c["bos_token"].is_string()) options.bos_token = c["bos_token"].get<std::string>();
  if (c["eos_token"].is_string()) options.eos_token = c["eos_token"].get<std::string>();
  options.extra = c["extra"];
  try {
    auto it = cache.find(key);
    if (it == cache.end()) {
      it = cache.emplace(key, std::make_shared<ChatTemplate>(sources.at(key), key)).first;
    }
    std::string got = it->second->render(c["messages"], options);
    if (!error.is_null()) {
      return {false, "jinja2 failed (" + error["type"].get<std::string>() + ": " +
                         error["message"].get<std::string>() + ") but we rendered " +
                         ordered_json(got).dump()};
    }
    const std::string want = c["expected"].get<std::string>();
    if (got == want) return {true, ""};
    return {false, first_difference(want, got)};
  } catch (const jinja::TemplateError& e) {
    if (error.is_null()) return {false, std::string("we failed but jinja2 rendered: ") + e.what()};
    if (error["kind"] == "raised") {
      // raise_exception(message) must surface the template's message unchanged.
      if (e.kind() != jinja::TemplateError::Kind::kRaised ||
          e.detail() != error["message"].get<std::string>()) {
        return {false, std::string("expected raise_exception(") + error["message"].dump() +
                           "), got: " + e.what()};
      }
    }
    if (error["kind"] == "syntax" && error["line"].is_number() &&
        e.line() != error["line"].get<int>()) {
      return {false, "syntax error reported on line " + std::to_string(e.line()) +
                         ", jinja2 says line " + error["line"].dump() + ": " + e.what()};
    }
    return {true, ""};
  } catch (const std::exception& e) {
    return {false, std::string("unexpected exception type: ") + e.what()};
  }
}

TEST(ChatTemplateGolden, RendersIdenticalToJinja2) {
  std::ifstream in(golden_path());
  ASSERT_TRUE(in) << "missing " << golden_path()
                  << " (run the text.template_goldens ctest fixture)";
  ordered_json golden = ordered_json::parse(in);
  std::map<std::string, std::string> sources;
  for (const auto& [key, source] : golden["templates"].items())
    sources[key] = source.get<std::string>();
  std::map<std::string, std::shared_ptr<ChatTemplate>> cache;
  std::map<std::string, std::pair<int, int>> per_template;  // identical, total
  int identical = 0, total = 0, reported = 0;
  for (const auto& c : golden["cases"]) {
    Outcome outcome = run_case(c, sources, cache);
    std::string family = c["template"].get<std::string>();
    family = family.substr(0, family.find('/'));
    ++total;
    ++per_template[family].second;
    if (outcome.ok) {
      ++identical;
      ++per_template[family].first;
    } else if (reported++ < 25) {
      ADD_FAILURE() << c["name"].get<std::string>() << ": " << outcome.detail;
    }
  }
  for (const auto& [family, counts] : per_template) {
    std::printf("  %-14s %d/%d identical\n", family.c_str(), counts.first, counts.second);
  }
  std::printf("%d/%d renders identical (%s)\n", identical, total,
              golden["generator"].get<std::string>().c_str());
  EXPECT_EQ(identical, total);
  EXPECT_GE(total, 200);
}

}  // namespace
}  // namespace md
