#include "server/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace md::server {
namespace {

// ---- A small line-based parser of the text exposition format 0.0.4 ----

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  Labels labels;
  std::string value;  // as written, so tests can check the spelling too
};

struct Family {
  std::string help;
  std::string type;
  std::vector<Sample> samples;
};

struct Exposition {
  std::map<std::string, Family> families;
  std::vector<std::string> errors;  // anything a Prometheus scraper would reject or we forbid
};

bool is_name_char(char c, bool first) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  return alpha || (!first && c >= '0' && c <= '9');
}

// Reads a metric or label name at `pos`; empty on failure.
std::string read_name(const std::string& line, std::size_t& pos) {
  const std::size_t start = pos;
  while (pos < line.size() && is_name_char(line[pos], pos == start)) ++pos;
  return line.substr(start, pos - start);
}

// Reads `"..."` at `pos`, undoing the three escapes; false on a malformed value.
bool read_label_value(const std::string& line, std::size_t& pos, std::string& out) {
  if (pos >= line.size() || line[pos] != '"') return false;
  for (++pos; pos < line.size(); ++pos) {
    const char c = line[pos];
    if (c == '"') {
      ++pos;
      return true;
    }
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++pos >= line.size()) return false;
    switch (line[pos]) {
      case '\\':
        out += '\\';
        break;
      case '"':
        out += '"';
        break;
      case 'n':
        out += '\n';
        break;
      default:
        return false;
    }
  }
  return false;
}

bool read_labels(const std::string& line, std::size_t& pos, Labels& labels) {
  if (pos >= line.size() || line[pos] != '{') return true;  // no labels
  ++pos;
  while (pos < line.size() && line[pos] != '}') {
    const std::string key = read_name(line, pos);
    if (key.empty() || pos >= line.size() || line[pos] != '=') return false;
    ++pos;
    std::string value;
    if (!read_label_value(line, pos, value) || labels.count(key) > 0) return false;
    labels[key] = value;
    if (pos < line.size() && line[pos] == ',') ++pos;
  }
  if (pos >= line.size()) return false;
  ++pos;  // '}'
  return true;
}

// A sample belongs to the family just declared: same name, or a histogram's suffixed series.
bool belongs_to(const std::string& sample, const std::string& family, const std::string& type) {
  if (sample == family) return type != "histogram";
  if (type != "histogram") return false;
  return sample == family + "_bucket" || sample == family + "_sum" || sample == family + "_count";
}

void parse_comment(const std::string& line, const std::string& previous, std::string& current,
                   Exposition& e) {
  std::istringstream in(line);
  std::string hash, keyword, name;
  in >> hash >> keyword >> name;
  std::string rest;
  std::getline(in >> std::ws, rest);
  if (keyword == "HELP") {
    if (e.families.count(name) > 0) e.errors.push_back("family declared twice: " + name);
    e.families[name].help = rest;
    current = name;
  } else if (keyword == "TYPE") {
    // We require TYPE right after the family's HELP line.
    if (previous.rfind("# HELP " + name + " ", 0) != 0) e.errors.push_back("TYPE not after HELP");
    e.families[name].type = rest;
  } else {
    e.errors.push_back("unknown comment: " + line);
  }
}

void parse_sample(const std::string& line, const std::string& current, Exposition& e) {
  Sample s;
  std::size_t pos = 0;
  s.name = read_name(line, pos);
  if (s.name.empty() || !read_labels(line, pos, s.labels) || pos >= line.size() ||
      line[pos] != ' ') {
    e.errors.push_back("malformed sample: " + line);
    return;
  }
  s.value = line.substr(pos + 1);
  char* end = nullptr;
  std::strtod(s.value.c_str(), &end);
  if (s.value.empty() || *end != '\0') e.errors.push_back("bad value: " + line);
  auto it = e.families.find(current);
  if (it == e.families.end() || !belongs_to(s.name, current, it->second.type)) {
    e.errors.push_back("sample outside its family: " + line);
    return;
  }
  it->second.samples.push_back(std::move(s));
}

Exposition parse(const std::string& text) {
  Exposition e;
  if (text.empty() || text.back() != '\n') e.errors.push_back("no final newline");
  std::istringstream in(text);
  std::string line, previous, current;
  while (std::getline(in, line)) {
    if (line.empty()) {
      e.errors.push_back("blank line");
    } else if (line[0] == '#') {
      parse_comment(line, previous, current, e);
    } else {
      parse_sample(line, current, e);
    }
    previous = line;
  }
  return e;
}

// ---- Lookups ----

const Family& family(const Exposition& e, const std::string& name) {
  static const Family kMissing;
  auto it = e.families.find(name);
  return it == e.families.end() ? kMissing : it->second;
}

// The samples named `name` whose labels include all of `want`.
std::vector<Sample> find(const Exposition& e, const std::string& family_name,
                         const std::string& name, const Labels& want = {}) {
  std::vector<Sample> out;
  for (const Sample& s : family(e, family_name).samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : want) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (match) out.push_back(s);
  }
  return out;
}

// The value of the single series `name{want...}`; NaN (and a test failure) when it is not unique.
double value(const Exposition& e, const std::string& name, const Labels& want = {}) {
  const std::vector<Sample> found = find(e, name, name, want);
  if (found.size() != 1) {
    ADD_FAILURE() << name << ": " << found.size() << " matching series";
    return std::nan("");
  }
  return std::strtod(found[0].value.c_str(), nullptr);
}

struct Hist {
  std::vector<std::string> le;
  std::vector<double> cumulative;
  double sum = 0;
  double count = 0;
};

Hist histogram(const Exposition& e, const std::string& name) {
  Hist h;
  for (const Sample& s : find(e, name, name + "_bucket")) {
    h.le.push_back(s.labels.at("le"));
    h.cumulative.push_back(std::strtod(s.value.c_str(), nullptr));
  }
  h.sum = std::strtod(find(e, name, name + "_sum").at(0).value.c_str(), nullptr);
  h.count = std::strtod(find(e, name, name + "_count").at(0).value.c_str(), nullptr);
  return h;
}

// Count in the bucket `le` itself (not cumulative).
double bucket_count(const Hist& h, const std::string& le) {
  for (std::size_t i = 0; i < h.le.size(); ++i) {
    if (h.le[i] == le) return h.cumulative[i] - (i == 0 ? 0 : h.cumulative[i - 1]);
  }
  ADD_FAILURE() << "no bucket le=" << le;
  return -1;
}

// ---- Fixtures ----

constexpr int kDraft = 4;

MetricsConfig config(int k = kDraft, std::string model = "test-model") {
  MetricsConfig c;
  c.model_name = std::move(model);
  c.version = "1.2.3";
  c.revision = "abc123";
  c.executor = "cuda";
  c.num_rows = 8;
  c.draft_positions = k;
  return c;
}

Exposition scrape(const ServerMetrics& m) {
  Exposition e = parse(m.render());
  for (const std::string& error : e.errors) ADD_FAILURE() << error;
  return e;
}

const std::map<std::string, std::string>& expected_families() {
  static const std::map<std::string, std::string> kFamilies = {
      {"megadecode_requests_received_total", "counter"},
      {"megadecode_requests_finished_total", "counter"},
      {"megadecode_http_requests_total", "counter"},
      {"megadecode_prompt_tokens_total", "counter"},
      {"megadecode_prompt_tokens_cached_total", "counter"},
      {"megadecode_generation_tokens_total", "counter"},
      {"megadecode_num_requests_running", "gauge"},
      {"megadecode_num_requests_waiting", "gauge"},
      {"megadecode_num_rows", "gauge"},
      {"megadecode_decode_gap_max_seconds", "gauge"},
      {"megadecode_kv_memory_reserved_bytes", "gauge"},
      {"megadecode_kv_memory_budget_bytes", "gauge"},
      {"megadecode_kv_pool_blocks", "gauge"},
      {"megadecode_kv_pool_used_bytes", "gauge"},
      {"megadecode_kv_pool_peak_bytes", "gauge"},
      {"megadecode_prefix_cache_lookups_total", "counter"},
      {"megadecode_prefix_cache_hits_total", "counter"},
      {"megadecode_prefix_cache_hit_ratio", "gauge"},
      {"megadecode_prefix_cache_token_hit_ratio", "gauge"},
      {"megadecode_prefix_cache_stored_total", "counter"},
      {"megadecode_prefix_cache_evictions_total", "counter"},
      {"megadecode_prefix_cache_states", "gauge"},
      {"megadecode_prefix_cache_bytes", "gauge"},
      {"megadecode_prefix_cache_budget_bytes", "gauge"},
      {"megadecode_kv_cache_usage_ratio", "gauge"},
      {"megadecode_time_to_first_token_seconds", "histogram"},
      {"megadecode_inter_token_latency_seconds", "histogram"},
      {"megadecode_e2e_request_latency_seconds", "histogram"},
      {"megadecode_request_queue_time_seconds", "histogram"},
      {"megadecode_request_prefill_time_seconds", "histogram"},
      {"megadecode_request_decode_time_seconds", "histogram"},
      {"megadecode_request_prompt_tokens", "histogram"},
      {"megadecode_request_generation_tokens", "histogram"},
      {"megadecode_spec_decode_num_drafts_total", "counter"},
      {"megadecode_spec_decode_num_draft_tokens_total", "counter"},
      {"megadecode_spec_decode_num_accepted_tokens_total", "counter"},
      {"megadecode_spec_decode_num_accepted_tokens_per_pos_total", "counter"},
      {"megadecode_spec_decode_mean_acceptance_length", "gauge"},
      {"megadecode_spec_decode_acceptance_length", "histogram"},
      {"megadecode_decode_steps_total", "counter"},
      {"megadecode_grammar_masks_total", "counter"},
      {"megadecode_grammar_masks_computed_total", "counter"},
      {"megadecode_grammar_mask_seconds_total", "counter"},
      {"megadecode_ready", "gauge"},
      {"megadecode_build_info", "gauge"},
  };
  return kFamilies;
}

// ---- Startup ----

TEST(ServerMetricsTest, ContentTypeIsTextFormat004) {
  EXPECT_STREQ(ServerMetrics::kContentType, "text/plain; version=0.0.4; charset=utf-8");
}

TEST(ServerMetricsTest, EveryFamilyExistsAtStartupWithHelpAndType) {
  ServerMetrics m(config());
  const Exposition e = scrape(m);
  std::set<std::string> seen;
  for (const auto& [name, fam] : e.families) {
    seen.insert(name);
    EXPECT_FALSE(fam.help.empty()) << name;
    auto it = expected_families().find(name);
    ASSERT_NE(it, expected_families().end()) << "unexpected family " << name;
    EXPECT_EQ(fam.type, it->second) << name;
  }
  EXPECT_EQ(seen.size(), expected_families().size());
}

TEST(ServerMetricsTest, EverySeriesCarriesTheModelName) {
  ServerMetrics m(config());
  m.http_response("/v1/models", 200);
  const Exposition e = scrape(m);
  for (const auto& [name, fam] : e.families) {
    EXPECT_FALSE(fam.samples.empty() && name != "megadecode_http_requests_total") << name;
    for (const Sample& s : fam.samples) EXPECT_EQ(s.labels.at("model_name"), "test-model");
  }
}

TEST(ServerMetricsTest, StartsAtZero) {
  ServerMetrics m(config());
  const Exposition e = scrape(m);
  for (const auto& [name, fam] : e.families) {
    if (name == "megadecode_num_rows" || name == "megadecode_build_info") continue;
    for (const Sample& s : fam.samples) EXPECT_EQ(s.value, "0") << s.name;
  }
  EXPECT_TRUE(family(e, "megadecode_http_requests_total").samples.empty());
  EXPECT_EQ(value(e, "megadecode_num_rows"), 8);
  EXPECT_EQ(value(e, "megadecode_ready"), 0);
}

TEST(ServerMetricsTest, KnownLabelValuesArePreCreated) {
  ServerMetrics m(config());
  const Exposition e = scrape(m);
  for (const char* endpoint : {"chat", "completions", "responses"}) {
    EXPECT_EQ(value(e, "megadecode_requests_received_total", {{"endpoint", endpoint}}), 0);
  }
  for (const char* reason : {"stop", "length", "tool_calls", "abort", "error"}) {
    EXPECT_EQ(value(e, "megadecode_requests_finished_total", {{"finished_reason", reason}}), 0);
  }
  const auto& per_pos = family(e, "megadecode_spec_decode_num_accepted_tokens_per_pos_total");
  ASSERT_EQ(per_pos.samples.size(), static_cast<std::size_t>(kDraft));
  for (int pos = 0; pos < kDraft; ++pos) {
    EXPECT_EQ(per_pos.samples[pos].labels.at("position"), std::to_string(pos));
  }
}

TEST(ServerMetricsTest, BuildInfoIsAlwaysOne) {
  ServerMetrics m(config());
  const Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_build_info",
                  {{"version", "1.2.3"}, {"revision", "abc123"}, {"executor", "cuda"}}),
            1);
}

TEST(ServerMetricsTest, HistogramBucketBoundsAreExactlyTheDocumentedOnes) {
  ServerMetrics m(config());
  const Exposition e = scrape(m);
  const std::vector<std::string> ttft = {
      "0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75",
      "1",     "2.5",   "5",    "7.5",  "10",   "20",   "40",   "80",  "160",  "640", "+Inf"};
  const std::vector<std::string> itl = {
      "0.001", "0.0025", "0.005", "0.01", "0.015", "0.02", "0.025", "0.03", "0.04", "0.05", "0.075",
      "0.1",   "0.15",   "0.2",   "0.3",  "0.4",   "0.5",  "0.75",  "1",    "2.5",  "+Inf"};
  const std::vector<std::string> phase = {"0.3", "0.5", "0.8", "1",   "1.5", "2",    "2.5",
                                          "5",   "10",  "15",  "20",  "30",  "40",   "50",
                                          "60",  "120", "240", "480", "960", "1920", "+Inf"};
  const std::vector<std::string> tokens = {"1",     "2",     "5",     "10",     "20",   "50",
                                           "100",   "200",   "500",   "1000",   "2000", "5000",
                                           "10000", "20000", "50000", "100000", "+Inf"};
  EXPECT_EQ(histogram(e, "megadecode_time_to_first_token_seconds").le, ttft);
  EXPECT_EQ(histogram(e, "megadecode_inter_token_latency_seconds").le, itl);
  for (const char* name :
       {"megadecode_e2e_request_latency_seconds", "megadecode_request_queue_time_seconds",
        "megadecode_request_prefill_time_seconds", "megadecode_request_decode_time_seconds"}) {
    EXPECT_EQ(histogram(e, name).le, phase) << name;
  }
  EXPECT_EQ(histogram(e, "megadecode_request_prompt_tokens").le, tokens);
  EXPECT_EQ(histogram(e, "megadecode_request_generation_tokens").le, tokens);
  const std::vector<std::string> acceptance = {"1", "2", "3", "4", "5", "+Inf"};  // 1..k+1
  EXPECT_EQ(histogram(e, "megadecode_spec_decode_acceptance_length").le, acceptance);
}

TEST(ServerMetricsTest, SpeculationOffStillExportsSpecFamiliesAtZero) {
  ServerMetrics m(config(/*k=*/0));
  m.spec_step(0, 0);  // a plain decode step carries no drafts
  m.spec_step(3, 2);  // more drafts than k: clamped to k = 0, so nothing
  const Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_spec_decode_num_drafts_total"), 0);
  EXPECT_EQ(value(e, "megadecode_spec_decode_num_draft_tokens_total"), 0);
  EXPECT_EQ(value(e, "megadecode_spec_decode_num_accepted_tokens_total"), 0);
  EXPECT_EQ(value(e, "megadecode_spec_decode_mean_acceptance_length"), 0);
  const auto& per_pos = family(e, "megadecode_spec_decode_num_accepted_tokens_per_pos_total");
  EXPECT_EQ(per_pos.type, "counter");
  EXPECT_TRUE(per_pos.samples.empty());
  const Hist h = histogram(e, "megadecode_spec_decode_acceptance_length");
  EXPECT_EQ(h.le, (std::vector<std::string>{"1", "+Inf"}));
  EXPECT_EQ(h.count, 0);
}

// ---- Counters and gauges ----

TEST(ServerMetricsTest, CountersMoveByExactlyWhatWasRecorded) {
  ServerMetrics m(config());
  m.request_received("chat");
  m.request_received("chat");
  m.request_received("completions");
  m.choice_finished("stop");
  m.choice_finished("length");
  m.choice_finished("length");
  m.choice_finished("tool_calls");
  m.prompt_tokens(100, 40);
  m.prompt_tokens(7);
  m.generation_tokens(12);
  m.generation_tokens(30);
  m.generation_tokens(-5);  // ignored: counters never go down
  for (int i = 0; i < 5; ++i) m.decode_step();
  const Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_requests_received_total", {{"endpoint", "chat"}}), 2);
  EXPECT_EQ(value(e, "megadecode_requests_received_total", {{"endpoint", "completions"}}), 1);
  EXPECT_EQ(value(e, "megadecode_requests_finished_total", {{"finished_reason", "stop"}}), 1);
  EXPECT_EQ(value(e, "megadecode_requests_finished_total", {{"finished_reason", "length"}}), 2);
  EXPECT_EQ(value(e, "megadecode_requests_finished_total", {{"finished_reason", "tool_calls"}}), 1);
  EXPECT_EQ(value(e, "megadecode_requests_finished_total", {{"finished_reason", "abort"}}), 0);
  EXPECT_EQ(value(e, "megadecode_requests_finished_total", {{"finished_reason", "error"}}), 0);
  EXPECT_EQ(value(e, "megadecode_prompt_tokens_total"), 107);
  EXPECT_EQ(value(e, "megadecode_prompt_tokens_cached_total"), 40);
  EXPECT_EQ(value(e, "megadecode_generation_tokens_total"), 42);
  EXPECT_EQ(value(e, "megadecode_decode_steps_total"), 5);
}

TEST(ServerMetricsTest, HttpResponseSeriesAppearAsTheyOccur) {
  ServerMetrics m(config());
  m.http_response("/v1/chat/completions", 200);
  m.http_response("/v1/chat/completions", 200);
  m.http_response("/v1/chat/completions", 400);
  m.http_response("other", 404);
  const Exposition e = scrape(m);
  const std::string name = "megadecode_http_requests_total";
  EXPECT_EQ(family(e, name).samples.size(), 3u);
  EXPECT_EQ(value(e, name, {{"route", "/v1/chat/completions"}, {"status", "200"}}), 2);
  EXPECT_EQ(value(e, name, {{"route", "/v1/chat/completions"}, {"status", "400"}}), 1);
  EXPECT_EQ(value(e, name, {{"route", "other"}, {"status", "404"}}), 1);
}

TEST(ServerMetricsTest, UndocumentedLabelValuesStillCount) {
  ServerMetrics m(config());
  m.choice_finished("content_filter");
  const Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_requests_finished_total", {{"finished_reason", "content_filter"}}),
            1);
}

TEST(ServerMetricsTest, GaugesReadTheLastValueSet) {
  ServerMetrics m(config());
  m.set_running(2);
  m.set_waiting(5);
  m.set_waiting(1);
  m.set_kv_cache_usage(0.375);
  m.set_decode_gap_max(0.25);
  m.set_state_memory(3 << 20, 8 << 20);
  m.set_kv_pool(7, 7 << 14, 9 << 14);
  m.set_ready(true);
  Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_num_requests_running"), 2);
  EXPECT_EQ(value(e, "megadecode_num_requests_waiting"), 1);
  EXPECT_EQ(value(e, "megadecode_kv_cache_usage_ratio"), 0.375);
  EXPECT_EQ(value(e, "megadecode_decode_gap_max_seconds"), 0.25);
  EXPECT_EQ(value(e, "megadecode_kv_memory_reserved_bytes"), 3 << 20);
  EXPECT_EQ(value(e, "megadecode_kv_memory_budget_bytes"), 8 << 20);
  EXPECT_EQ(value(e, "megadecode_kv_pool_blocks"), 7);
  EXPECT_EQ(value(e, "megadecode_kv_pool_used_bytes"), 7 << 14);
  EXPECT_EQ(value(e, "megadecode_kv_pool_peak_bytes"), 9 << 14);
  EXPECT_EQ(value(e, "megadecode_ready"), 1);
  m.set_ready(false);
  e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_ready"), 0);
}

TEST(ServerMetricsTest, PrefixCacheCountsAndRatios) {
  ServerMetrics m(config());
  engine::PrefixCacheStats stats;
  stats.lookups = 8;
  stats.hits = 6;
  stats.looked_up_tokens = 1000;
  stats.reused_tokens = 750;
  stats.checkpoints = 3;
  stats.stored = 5;
  stats.evicted = 2;
  stats.bytes = 12345;
  stats.budget = 1 << 20;
  m.set_prefix_cache(stats);
  Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_lookups_total"), 8);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_hits_total"), 6);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_hit_ratio"), 0.75);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_token_hit_ratio"), 0.75);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_stored_total"), 5);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_evictions_total"), 2);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_states"), 3);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_bytes"), 12345);
  EXPECT_EQ(value(e, "megadecode_prefix_cache_budget_bytes"), 1 << 20);
  stats.reused_tokens = 250;
  m.set_prefix_cache(stats);
  EXPECT_EQ(value(scrape(m), "megadecode_prefix_cache_token_hit_ratio"), 0.25);
}

TEST(ServerMetricsTest, GrammarMaskWork) {
  ServerMetrics m(config());
  EXPECT_EQ(value(scrape(m), "megadecode_grammar_masks_total"), 0);
  m.set_grammar(grammar::MaskStats{40, 7, 0.125});
  Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_grammar_masks_total"), 40);
  EXPECT_EQ(value(e, "megadecode_grammar_masks_computed_total"), 7);
  EXPECT_EQ(value(e, "megadecode_grammar_mask_seconds_total"), 0.125);
}

TEST(ServerMetricsTest, DoublesRoundTrip) {
  ServerMetrics m(config());
  m.set_kv_cache_usage(0.1 + 0.2);
  const Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_kv_cache_usage_ratio"), 0.1 + 0.2);
}

// ---- Histograms ----

TEST(ServerMetricsTest, HistogramBucketsAreCumulativeAndInclusive) {
  ServerMetrics m(config());
  m.observe_ttft(0.005);  // exactly on a bound: belongs to le="0.005"
  m.observe_ttft(0.0051);
  m.observe_ttft(0.3);
  m.observe_ttft(1000);  // above the last bound: only +Inf
  const Hist h = histogram(scrape(m), "megadecode_time_to_first_token_seconds");
  EXPECT_EQ(bucket_count(h, "0.001"), 0);
  EXPECT_EQ(bucket_count(h, "0.005"), 1);
  EXPECT_EQ(bucket_count(h, "0.01"), 1);
  EXPECT_EQ(bucket_count(h, "0.5"), 1);
  EXPECT_EQ(bucket_count(h, "640"), 0);
  EXPECT_EQ(bucket_count(h, "+Inf"), 1);
  for (std::size_t i = 1; i < h.cumulative.size(); ++i) {
    EXPECT_GE(h.cumulative[i], h.cumulative[i - 1]);
  }
  EXPECT_EQ(h.cumulative.back(), 4);
  EXPECT_EQ(h.count, 4);
  EXPECT_DOUBLE_EQ(h.sum, 0.005 + 0.0051 + 0.3 + 1000);
}

TEST(ServerMetricsTest, EachObserveFeedsItsOwnHistogram) {
  ServerMetrics m(config());
  m.observe_e2e(3);
  m.observe_queue(0.2);
  m.observe_prefill(0.4);
  m.observe_decode(2.6);
  m.observe_request_prompt_tokens(412);
  m.observe_request_generation_tokens(57);
  const Exposition e = scrape(m);
  const std::vector<std::pair<std::string, std::pair<std::string, double>>> cases = {
      {"megadecode_e2e_request_latency_seconds", {"5", 3}},
      {"megadecode_request_queue_time_seconds", {"0.3", 0.2}},
      {"megadecode_request_prefill_time_seconds", {"0.5", 0.4}},
      {"megadecode_request_decode_time_seconds", {"5", 2.6}},
      {"megadecode_request_prompt_tokens", {"500", 412}},
      {"megadecode_request_generation_tokens", {"100", 57}},
  };
  for (const auto& [name, expected] : cases) {
    const Hist h = histogram(e, name);
    EXPECT_EQ(h.count, 1) << name;
    EXPECT_EQ(bucket_count(h, expected.first), 1) << name;
    EXPECT_DOUBLE_EQ(h.sum, expected.second) << name;
  }
  EXPECT_EQ(histogram(e, "megadecode_time_to_first_token_seconds").count, 0);
}

TEST(ServerMetricsTest, InterTokenRecordsKObservationsOfDtOverK) {
  ServerMetrics m(config());
  m.observe_inter_token(0.03, 3);  // three tokens at 0.01 s each
  m.observe_inter_token(0.2, 1);
  m.observe_inter_token(0.5, 0);  // no tokens: nothing to record
  const Hist h = histogram(scrape(m), "megadecode_inter_token_latency_seconds");
  EXPECT_EQ(h.count, 4);
  EXPECT_EQ(bucket_count(h, "0.01"), 3);
  EXPECT_EQ(bucket_count(h, "0.2"), 1);
  EXPECT_NEAR(h.sum, 0.23, 1e-12);
}

TEST(ServerMetricsTest, NonFiniteObservationsAreDropped) {
  ServerMetrics m(config());
  m.observe_ttft(std::nan(""));
  m.observe_ttft(std::numeric_limits<double>::infinity());
  m.observe_ttft(0.02);
  const Hist h = histogram(scrape(m), "megadecode_time_to_first_token_seconds");
  EXPECT_EQ(h.count, 1);
  EXPECT_DOUBLE_EQ(h.sum, 0.02);
}

// ---- Speculative decoding ----

struct SpecTotals {
  double drafts, draft_tokens, accepted, mean;
  std::vector<double> per_pos;
};

SpecTotals spec_totals(const Exposition& e) {
  SpecTotals t;
  t.drafts = value(e, "megadecode_spec_decode_num_drafts_total");
  t.draft_tokens = value(e, "megadecode_spec_decode_num_draft_tokens_total");
  t.accepted = value(e, "megadecode_spec_decode_num_accepted_tokens_total");
  t.mean = value(e, "megadecode_spec_decode_mean_acceptance_length");
  for (const Sample& s :
       family(e, "megadecode_spec_decode_num_accepted_tokens_per_pos_total").samples) {
    t.per_pos.push_back(std::strtod(s.value.c_str(), nullptr));
  }
  return t;
}

// The three §1.5 consistency rules plus the mean-length definition, for a fixed-k drafter.
void expect_spec_consistent(const SpecTotals& t, int k) {
  double sum = 0;
  for (std::size_t pos = 0; pos < t.per_pos.size(); ++pos) {
    sum += t.per_pos[pos];
    if (pos > 0) {
      EXPECT_LE(t.per_pos[pos], t.per_pos[pos - 1]) << "position " << pos;
    }
  }
  EXPECT_EQ(t.accepted, sum);
  EXPECT_EQ(t.draft_tokens, k * t.drafts);
  if (t.drafts > 0) {
    EXPECT_DOUBLE_EQ(t.mean, 1 + t.accepted / t.drafts);
  }
}

TEST(ServerMetricsTest, SpecCountersFollowTheConsistencyRules) {
  ServerMetrics m(config());
  m.spec_step(4, 4);
  m.spec_step(4, 2);
  m.spec_step(4, 0);
  m.spec_step(4, 3);
  const Exposition e = scrape(m);
  const SpecTotals t = spec_totals(e);
  EXPECT_EQ(t.drafts, 4);
  EXPECT_EQ(t.draft_tokens, 16);
  EXPECT_EQ(t.accepted, 9);
  EXPECT_EQ(t.per_pos, (std::vector<double>{3, 3, 2, 1}));
  EXPECT_DOUBLE_EQ(t.mean, 1 + 9.0 / 4);
  expect_spec_consistent(t, kDraft);
  const Hist h = histogram(e, "megadecode_spec_decode_acceptance_length");
  EXPECT_EQ(h.count, 4);
  EXPECT_EQ(bucket_count(h, "1"), 1);  // accepted 0: only the sampled token
  EXPECT_EQ(bucket_count(h, "3"), 1);
  EXPECT_EQ(bucket_count(h, "4"), 1);
  EXPECT_EQ(bucket_count(h, "5"), 1);
  EXPECT_EQ(bucket_count(h, "+Inf"), 0);
  EXPECT_DOUBLE_EQ(h.sum, 5 + 3 + 1 + 4);
}

TEST(ServerMetricsTest, SpecStepClampsOutOfRangeArguments) {
  ServerMetrics m(config());
  m.spec_step(0, 0);   // no drafts: not a verify step
  m.spec_step(-2, 1);  // likewise
  m.spec_step(9, 9);   // clamped to k drafts, k accepted
  m.spec_step(4, -1);  // clamped to 0 accepted
  const SpecTotals t = spec_totals(scrape(m));
  EXPECT_EQ(t.drafts, 2);
  EXPECT_EQ(t.per_pos, (std::vector<double>{1, 1, 1, 1}));
  expect_spec_consistent(t, kDraft);
}

// ---- Label escaping ----

TEST(ServerMetricsTest, LabelValuesAreEscaped) {
  MetricsConfig c = config(kDraft, "we\"ird\\model\nname");
  c.version = "v\"1\"";
  ServerMetrics m(std::move(c));
  m.http_response("/a\\b", 200);
  const std::string text = m.render();
  EXPECT_NE(text.find("model_name=\"we\\\"ird\\\\model\\nname\""), std::string::npos);
  EXPECT_NE(text.find("version=\"v\\\"1\\\"\""), std::string::npos);
  EXPECT_NE(text.find("route=\"/a\\\\b\""), std::string::npos);
  const Exposition e = parse(text);
  EXPECT_TRUE(e.errors.empty());
  for (const auto& [name, fam] : e.families) {
    for (const Sample& s : fam.samples)
      EXPECT_EQ(s.labels.at("model_name"), "we\"ird\\model\nname");
  }
  EXPECT_EQ(value(e, "megadecode_build_info", {{"version", "v\"1\""}}), 1);
  EXPECT_EQ(value(e, "megadecode_http_requests_total", {{"route", "/a\\b"}}), 1);
}

// ---- Concurrency ----

TEST(ServerMetricsTest, ConcurrentRecordingKeepsExactTotals) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;  // a multiple of 5, so each accepted count 0..4 is equal
  ServerMetrics m(config());
  std::atomic<bool> done{false};
  // A scraper runs alongside: every snapshot it sees must already satisfy the rules.
  std::thread scraper([&] {
    do {
      const Exposition e = scrape(m);
      expect_spec_consistent(spec_totals(e), kDraft);
      const Hist h = histogram(e, "megadecode_spec_decode_acceptance_length");
      EXPECT_EQ(h.count, h.cumulative.back());
    } while (!done.load());
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&m] {
      for (int i = 0; i < kIterations; ++i) {
        m.request_received(i % 2 == 0 ? "chat" : "completions");
        m.choice_finished("stop");
        m.http_response("/v1/chat/completions", 200);
        m.prompt_tokens(3, 1);
        m.generation_tokens(2);
        m.observe_ttft(0.05);
        m.observe_inter_token(0.02, 2);
        m.spec_step(kDraft, i % 5);
        m.decode_step();
      }
    });
  }
  for (std::thread& w : workers) w.join();
  done = true;
  scraper.join();

  constexpr double kTotal = kThreads * kIterations;
  const Exposition e = scrape(m);
  EXPECT_EQ(value(e, "megadecode_requests_received_total", {{"endpoint", "chat"}}), kTotal / 2);
  EXPECT_EQ(value(e, "megadecode_requests_finished_total", {{"finished_reason", "stop"}}), kTotal);
  EXPECT_EQ(value(e, "megadecode_http_requests_total", {{"status", "200"}}), kTotal);
  EXPECT_EQ(value(e, "megadecode_prompt_tokens_total"), 3 * kTotal);
  EXPECT_EQ(value(e, "megadecode_prompt_tokens_cached_total"), kTotal);
  EXPECT_EQ(value(e, "megadecode_generation_tokens_total"), 2 * kTotal);
  EXPECT_EQ(value(e, "megadecode_decode_steps_total"), kTotal);
  EXPECT_EQ(histogram(e, "megadecode_time_to_first_token_seconds").count, kTotal);
  const Hist itl = histogram(e, "megadecode_inter_token_latency_seconds");
  EXPECT_EQ(itl.count, 2 * kTotal);
  EXPECT_EQ(bucket_count(itl, "0.01"), 2 * kTotal);
  EXPECT_NEAR(itl.sum, 0.02 * kTotal, 1e-6);
  const SpecTotals spec = spec_totals(e);
  EXPECT_EQ(spec.drafts, kTotal);
  // Per 5 steps, accepted = 0..4: position p is accepted in 4 - p of them.
  EXPECT_EQ(spec.per_pos,
            (std::vector<double>{kTotal * 4 / 5, kTotal * 3 / 5, kTotal * 2 / 5, kTotal / 5}));
  expect_spec_consistent(spec, kDraft);
}

}  // namespace
}  // namespace md::server
