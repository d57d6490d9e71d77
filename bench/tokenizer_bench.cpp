// Tokenizer throughput: Qwen3 (HF byte-level BPE) encoding of English prose, source code and CJK
// text, reported as bytes/s, plus the time to load the 11 MB tokenizer.json.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "text/tokenizer.h"

namespace {

namespace fs = std::filesystem;

const std::string kQwenDir = std::string(MD_QWEN3_TOKENIZER_DIR) + "";
constexpr std::size_t kCorpusBytes = 256 * 1024;  // per kind; keeps a run to a few seconds
constexpr std::size_t kDocumentBytes = 4096;      // encode() is called per document

const md::Tokenizer& qwen() {
  static const auto tok = md::load_tokenizer(kQwenDir);
  return *tok;
}

// Concatenates the text files under `dir` with one of the extensions until `limit` bytes.
std::string gather(const fs::path& dir, std::vector<std::string> extensions, std::size_t limit) {
  std::string out;
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    for (const auto& ext : extensions) {
      if (entry.is_regular_file() && entry.path().extension() == ext) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  while (out.size() < limit && !files.empty()) {
    for (const auto& f : files) out += md::read_text_file(f.string()) + "\n";
  }
  out.resize(std::min(out.size(), limit));
  return out;
}

// Chinese, Japanese and Korean sentences (written for this benchmark), shuffled into paragraphs.
std::string cjk_text(std::size_t limit) {
  const std::vector<std::string> sentences = {
      "今天的天气很好，我们一起去公园散步吧。",
      "这个推理引擎把每一步解码融合成一个程序，由一组常驻线程执行。",
      "模型的权重保持原来的格式，在寄存器里反量化，累加使用单精度浮点数。",
      "分词器必须和参考实现逐个词元完全一致，否则生成的文本就会不同。",
      "東京は日本の首都で、たくさんの人が電車で通勤しています。",
      "このプログラムはトークナイザーの速度を測定します。",
      "오늘은 날씨가 좋아서 친구들과 함께 산책을 했습니다.",
      "서울은 한국의 수도이며 많은 사람들이 살고 있습니다.",
      "「深度学习」和『自然语言处理』是人工智能的重要方向（见第三章）。",
  };
  std::mt19937 rng(42);
  std::string out;
  while (out.size() < limit) {
    out += sentences[rng() % sentences.size()];
    if (rng() % 5 == 0) out += "\n\n";
  }
  return out;
}

struct Corpus {
  std::vector<std::string> documents;
  std::size_t bytes = 0;
};

Corpus split_documents(const std::string& text) {
  Corpus c;
  for (std::size_t pos = 0; pos < text.size(); pos += kDocumentBytes) {
    std::size_t end = std::min(text.size(), pos + kDocumentBytes);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    c.documents.push_back(text.substr(pos, end - pos));
    c.bytes += c.documents.back().size();
    pos = end - kDocumentBytes;  // next document starts at a character boundary
  }
  return c;
}

const Corpus& corpus(int kind) {
  static const Corpus english =
      split_documents(gather(fs::path(MD_SOURCE_DIR) / "docs", {".md"}, kCorpusBytes));
  static const Corpus code = split_documents(
      gather(fs::path(__FILE__).parent_path().parent_path() / "src", {".cpp", ".h"}, kCorpusBytes));
  static const Corpus cjk = split_documents(cjk_text(kCorpusBytes));
  static const Corpus mixed = [] {
    Corpus m;
    for (const Corpus* c : {&english, &code, &cjk}) {
      m.documents.insert(m.documents.end(), c->documents.begin(), c->documents.end());
      m.bytes += c->bytes;
    }
    return m;
  }();
  switch (kind) {
    case 0:
      return mixed;
    case 1:
      return english;
    case 2:
      return code;
    default:
      return cjk;
  }
}

void BM_Encode(benchmark::State& state) {
  const Corpus& c = corpus(static_cast<int>(state.range(0)));
  const md::Tokenizer& tok = qwen();
  std::size_t tokens = 0;
  for (auto _ : state) {
    for (const auto& doc : c.documents) {
      auto ids = tok.encode(doc);
      tokens += ids.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["bytes/token"] = static_cast<double>(state.iterations() * c.bytes) /
                                  static_cast<double>(std::max<std::size_t>(tokens, 1));
}
BENCHMARK(BM_Encode)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->ArgName("mixed0_en1_code2_cjk3")
    ->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const Corpus& c = corpus(0);
  std::vector<std::vector<std::int32_t>> encoded;
  for (const auto& doc : c.documents) encoded.push_back(qwen().encode(doc));
  for (auto _ : state) {
    for (const auto& ids : encoded) benchmark::DoNotOptimize(qwen().decode(ids));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
}
BENCHMARK(BM_Decode)->MinTime(0.3)->Unit(benchmark::kMillisecond);

void BM_LoadQwenTokenizerJson(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(md::load_tokenizer(kQwenDir));
}
BENCHMARK(BM_LoadQwenTokenizerJson)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
