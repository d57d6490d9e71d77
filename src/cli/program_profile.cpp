#include "cli/program_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <vector>

#include "program/instruction.h"

namespace md::cli {

namespace {

// "L12.attention" → "attention"; names without a layer prefix stay as they are.
std::string stem(const std::string& name) {
  if (name.size() < 3 || name[0] != 'L' || !std::isdigit(static_cast<unsigned char>(name[1])))
    return name;
  auto dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

struct Group {
  std::string opcode;
  std::string name;
  int64_t instructions = 0;
  int64_t tasks = 0;
  std::size_t bytes = 0;  // per step
  uint64_t busy_ns = 0;
  std::vector<uint64_t> wait_ns;  // per worker
};

std::vector<Group> groups_of(const program::Program& program) {
  std::vector<Group> groups;
  std::map<std::string, std::size_t> index;
  const auto& instructions = program.instructions();
  for (std::size_t i = 0; i < instructions.size(); ++i) {
    const program::Instruction& ins = instructions[i];
    std::string opcode(program::opcode_name(ins.opcode()));
    std::string key = opcode + "/" + stem(ins.name);
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) {
      groups.push_back({opcode, stem(ins.name), 0, 0, 0, 0,
                        std::vector<uint64_t>(static_cast<std::size_t>(program.workers()), 0)});
    }
    Group& g = groups[it->second];
    g.instructions += 1;
    g.tasks += ins.tasks;
    g.bytes += program::weight_bytes(ins);
    for (int w = 0; w < program.workers(); ++w) {
      const program::InstructionProfile& p = program.profile()[static_cast<std::size_t>(w)][i];
      g.busy_ns += p.busy_ns;
      g.wait_ns[static_cast<std::size_t>(w)] += p.wait_ns;
    }
  }
  return groups;
}

}  // namespace

std::string format_profile(const program::Program& program, double bandwidth, double step_seconds) {
  const double steps = static_cast<double>(std::max<uint64_t>(1, program.profiled_steps()));
  const double workers = program.workers();
  std::vector<Group> groups = groups_of(program);
  double total_ns = 0;
  std::size_t total_bytes = 0;
  for (const Group& g : groups) {
    total_ns += static_cast<double>(g.busy_ns);
    for (uint64_t w : g.wait_ns) total_ns += static_cast<double>(w);
    total_bytes += g.bytes;
  }
  std::string out =
      fmt::format("{:<15} {:<22} {:>5} {:>6} {:>7} {:>9} {:>10} {:>8}", "opcode", "instruction",
                  "count", "tasks", "share", "MB/step", "busy µs", "GB/s");
  for (int w = 0; w < program.workers(); ++w)
    out += fmt::format(" {:>9}", fmt::format("wait w{}", w));
  out += "\n";
  for (const Group& g : groups) {
    double busy_us = static_cast<double>(g.busy_ns) / steps / 1e3;  // summed over workers
    uint64_t waited = 0;
    for (uint64_t w : g.wait_ns) waited += w;
    double share = total_ns > 0 ? static_cast<double>(g.busy_ns + waited) / total_ns : 0;
    // Bytes over the wall time the group's tasks occupied the team (busy time / workers).
    double wall_s = static_cast<double>(g.busy_ns) / steps / 1e9 / workers;
    std::string rate = g.bytes > 0 && wall_s > 0
                           ? fmt::format("{:.2f}", static_cast<double>(g.bytes) / wall_s / 1e9)
                           : "-";
    out += fmt::format("{:<15} {:<22} {:>5} {:>6} {:>6.1f}% {:>9.3f} {:>10.1f} {:>8}", g.opcode,
                       g.name, g.instructions, g.tasks, 100 * share,
                       static_cast<double>(g.bytes) / 1e6, busy_us, rate);
    for (uint64_t w : g.wait_ns)
      out += fmt::format(" {:>9.1f}", static_cast<double>(w) / steps / 1e3);
    out += "\n";
  }
  // Where the step goes: the weight bytes at the measured bandwidth, the rest.
  double ideal = static_cast<double>(total_bytes) / bandwidth;
  double busy_s = 0, wait_s = 0;
  for (const Group& g : groups) {
    busy_s += static_cast<double>(g.busy_ns) / steps / 1e9 / workers;
    for (uint64_t w : g.wait_ns) wait_s += static_cast<double>(w) / steps / 1e9 / workers;
  }
  out += fmt::format(
      "step {:.3f} ms (this pass); the {:.2f} MB of weights need {:.3f} ms at the measured {:.2f} "
      "GB/s "
      "({:.0f}%); per worker on average {:.3f} ms in tasks, {:.3f} ms waiting for producers, "
      "{:.3f} ms "
      "outside both (wake-up, claims, profiling)\n",
      step_seconds * 1e3, static_cast<double>(total_bytes) / 1e6, ideal * 1e3, bandwidth / 1e9,
      100 * ideal / step_seconds, busy_s * 1e3, wait_s * 1e3,
      std::max(0.0, step_seconds - busy_s - wait_s) * 1e3);
  return out;
}

std::string weight_formats(const program::Program& program) {
  std::set<std::string> formats;
  for (const program::Instruction& ins : program.instructions()) {
    for (int64_t t = 0; t < ins.tasks; ++t) {
      for (const program::Tile* tile : program::task_tiles(ins, t)) {
        formats.insert(std::string(tile->weight.format_name()));
      }
    }
  }
  std::string out;
  for (const std::string& f : formats) out += (out.empty() ? "" : ", ") + f;
  return out.empty() ? "none" : out;
}

}  // namespace md::cli
