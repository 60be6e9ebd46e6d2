// SPDX-License-Identifier: Apache-2.0
// `mlakv report`: for one model and KV memory budget, each format's capacity,
// accuracy (through the library's writers, readers and sparse decode) and
// speed on the chosen device, with a recommendation (`mlakv capacity`, the
// capacity part alone, is capacity_command.cpp).
#include <fmt/core.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "capacity.h"
#include "commands.h"
#include "device_flag.h"
#include "measure.h"
#include "mlakv/capabilities.h"
#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "mlakv/vocabulary.h"
#include "mlakv_support/json_text.h"
#include "npy.h"
#include "progress.h"
#include "report_options.h"
#include "sizes.h"
#include "svg_plot.h"
#include "synthetic.h"

namespace mlakv::tool {
using support::json_number;
using support::json_string;
namespace {

constexpr std::int64_t kTopk = 2048;  // tokens an indexer selects per query (DeepSeek-V3.2)

struct ReportOptions {
  ModelOptions model;
  std::string device = "cpu";
  std::int64_t tokens = 0;  // 0: 4096 on the CPU, 262144 on CUDA
  std::int64_t queries = 4;
  std::uint64_t seed = 0;
  std::string activations;
  bool allow_nonfinite = false;
  std::string max_attention_error_text = "2%";
  double max_attention_error = 0.02;  // parsed from the text
  bool json = false;
  std::string plot;
  bool quiet = false;
};

struct FormatRow {
  Capacity capacity;
  FormatAccuracy accuracy;
  FormatSpeed speed;
};

struct Inputs {
  Activations bf16;
  Activations fp16;
  Queries queries;
  std::string source;
};

// Queries only when the sparse-attention check runs (`attention`).
Inputs synthetic_inputs(const ReportOptions& o, std::int64_t tokens, const ModelPreset& model, bool attention) {
  Inputs in{make_activations(tokens, model.nope_dims, DType::kBFloat16, o.seed),
            make_activations(tokens, model.nope_dims, DType::kFloat16, o.seed),
            {},
            fmt::format("{} synthetic tokens (seed {})", tokens, o.seed)};
  if (attention) in.queries = make_queries(in.bf16, o.queries, model.heads, std::min(kTopk, tokens), o.seed);
  return in;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

// "[3, 17]": the row-major index of element `flat` in `shape`.
std::string index_text(const std::vector<std::int64_t>& shape, std::size_t flat) {
  std::vector<std::int64_t> index(shape.size());
  auto rest = static_cast<std::int64_t>(flat);
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? rest % shape[d] : 0;
    rest = shape[d] > 0 ? rest / shape[d] : 0;
  }
  std::string text = "[";
  for (std::size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "]";
}

// Non-finite activations measure nothing: refused naming the file, the array and the first bad index.
void check_finite(const ReportOptions& o, const std::string& file, const std::string& array, const NpyArray& a) {
  if (o.allow_nonfinite) return;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    if (std::isfinite(a.values[i])) continue;
    throw Error(ErrorCode::kValue,
                fmt::format("--activations: {}/{}: {}{} is {} (the first non-finite value); pass --allow-nonfinite "
                            "to measure how each format stores such values",
                            o.activations, file, array, index_text(a.shape, i), a.values[i]));
  }
}

// kv_c.npy [T, nope_dims] (512, or DeepSeek V4's 448) and k_pe.npy [T, 64]
// (float32 or float16), optional q.npy [R, H, 576], read only when the
// sparse-attention check runs (`attention`).
Inputs user_inputs(const ReportOptions& o, const ModelPreset& model, bool attention) {
  const std::string dir = o.activations;
  const NpyArray kv = read_npy("--activations", dir + "/kv_c.npy");
  const NpyArray pe = read_npy("--activations", dir + "/k_pe.npy");
  const auto shape_error = [&](const std::string& file, const std::string& want) {
    throw Error(ErrorCode::kShape, "--activations: " + dir + "/" + file + ": shape must be " + want);
  };
  const int nope = model.nope_dims;
  if (kv.shape.size() != 2 || kv.shape[1] != nope || kv.shape[0] < 1) {
    shape_error("kv_c.npy",
                fmt::format("[T, {}] ({} stores {} + {} values per token: kv_c the {}), got {}", nope, model.name, nope,
                            kRopeDim, nope == kLatentDim ? "latent" : fmt::format("{} NoPE values", nope),
                            shape_text(kv.shape)));
  }
  const std::int64_t tokens = kv.shape[0];
  if (pe.shape.size() != 2 || pe.shape[0] != tokens || pe.shape[1] != kRopeDim) {
    shape_error("k_pe.npy", fmt::format("[T, {}] with T = {} (kv_c.npy's rows)", kRopeDim, tokens));
  }
  check_finite(o, "kv_c.npy", "kv_c", kv);
  check_finite(o, "k_pe.npy", "k_pe", pe);
  Inputs in{round_activations(kv.values, pe.values, tokens, nope, DType::kBFloat16),
            round_activations(kv.values, pe.values, tokens, nope, DType::kFloat16),
            {},
            fmt::format("{} tokens of {}", tokens, dir)};
  const std::int64_t topk = std::min(kTopk, tokens);
  std::error_code missing;
  const bool has_q = std::filesystem::exists(dir + "/q.npy", missing);  // a stat, never an open: read_npy refuses FIFOs
  if (!attention) {
    if (has_q) in.source += " (its q.npy not read: no sparse-attention check)";
  } else if (has_q) {
    const NpyArray q = read_npy("--activations", dir + "/q.npy");
    if (q.shape.size() != 3 || q.shape[2] != kQueryDim || q.shape[0] < 1 || q.shape[1] < 1) {
      shape_error("q.npy", fmt::format("[R, H, {}]", kQueryDim));
    }
    check_finite(o, "q.npy", "q", q);
    in.queries = user_queries(q.values, q.shape[0], q.shape[1], tokens, topk, o.seed);
    in.source += " with its q.npy";
  } else {
    in.queries = make_queries(in.bf16, o.queries, model.heads, topk, o.seed);
  }
  return in;
}

// Why the sparse-attention check cannot run on the model's formats on `device`
// ("" when it can): it decodes every format and compares each result with the
// decode over bf16 records, so the decode must read all of them, bf16 included.
std::string attention_unavailable(const ModelPreset& model, const std::vector<Capacity>& caps, Device device) {
  const Backend backend = device.type == DeviceType::kCuda ? Backend::kCuda : Backend::kCpu;
  bool reference = false;
  std::string unread;
  for (const Capacity& c : caps) {
    reference = reference || c.format == Format::kBf16;
    if (!supports(c.format, backend, Operation::kDecode)) {
      unread += (unread.empty() ? "" : ", ") + std::string(format_info(c.format).id);
    }
  }
  if (!unread.empty()) {
    return fmt::format(
        "the sparse decode reads token-major records of {} + {} values, not {}'s {} + {} formats ({}); "
        "docs/attention.md says what a DeepSeek V4 decode needs",
        kLatentDim, kRopeDim, model.name, model.nope_dims, kRopeDim, unread);
  }
  if (!reference) {
    return fmt::format("no bf16 record of {}'s {} + {} values to decode the reference over", model.name,
                       model.nope_dims, kRopeDim);
  }
  return "";
}

std::int64_t nonfinite(const FormatRow& r) {
  return r.accuracy.latent.nonfinite + r.accuracy.rope.nonfinite +
         (r.accuracy.attention ? r.accuracy.attention->nonfinite : 0);
}

// The format with the most tokens among those within the attention-error limit
// whose decoded values are all finite; none without the sparse-attention check
// (`attention_na` not empty).
std::size_t recommend(const std::vector<FormatRow>& rows, double limit, const std::string& attention_na,
                      std::string& reason) {
  if (!attention_na.empty()) {
    reason =
        "the formats are ranked by their sparse-attention error, which is not measured for them (no decode "
        "reads them); compare their latent and RoPE errors";
    return rows.size();
  }
  std::size_t best = rows.size();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const FormatRow& r = rows[i];
    if (nonfinite(r) > 0) continue;        // overflows (or non-finite inputs): no error number describes it
    if (r.capacity.tokens == 0) continue;  // holds nothing in this budget
    if (!(r.accuracy.attention->rel_rms <= limit)) continue;
    if (best == rows.size() || r.capacity.tokens > rows[best].capacity.tokens ||
        (r.capacity.tokens == rows[best].capacity.tokens &&
         r.accuracy.attention->rel_rms < rows[best].accuracy.attention->rel_rms)) {
      best = i;
    }
  }
  if (best == rows.size()) {
    bool all_nonfinite = true;
    bool all_empty = true;
    for (const FormatRow& r : rows) {
      all_nonfinite = all_nonfinite && nonfinite(r) > 0;
      all_empty = all_empty && r.capacity.tokens == 0;
    }
    reason = all_empty       ? "the KV memory holds no token in any format"
             : all_nonfinite ? "every format decodes some values as NaN or infinity (non-finite inputs, or values "
                               "beyond a format's range); no error threshold can rank them"
                             : fmt::format("no format is within --max-attention-error {:g}%", 100.0 * limit);
    return best;
  }
  const FormatRow& r = rows[best];
  reason = fmt::format(
      "the most tokens ({:.2f}x bf16) among formats whose sparse-attention error is within {:g}% "
      "(it measured {:.3f}%)",
      r.capacity.tokens_vs_bf16, 100.0 * limit, 100.0 * r.accuracy.attention->rel_rms);
  return best;
}

double gbps(double bytes, double us) { return us > 0.0 ? bytes / us / 1e3 : 0.0; }
double fraction(double copy, double us) {
  return copy > 0.0 && us > 0.0 ? copy / us : std::numeric_limits<double>::quiet_NaN();
}

// "12.345" (a percentage), or "n/a" without the sparse-attention check.
std::string attention_percent(const FormatAccuracy& a) {
  return a.attention ? fmt::format("{:.3f}", 100.0 * a.attention->rel_rms) : "n/a";
}

// `attention_na`: why there is no sparse-attention check ("" when there is one).
void print_table(const ModelBudget& budget, const Inputs& in, Device device, const std::vector<FormatRow>& rows,
                 std::size_t best, const std::string& reason, const std::string& attention_na) {
  const bool cuda = device.type == DeviceType::kCuda;
  const ModelPreset& model = budget.model;
  fmt::print("mlakv report: {} ({} {}layers, {} heads), KV memory {}, {} backend\n", model.name, model.layers,
             model.compressed() ? "" : "MLA ", model.heads, budget.budget_text, cuda ? "CUDA" : "CPU");
  if (model.compressed()) fmt::print("{}", compressed_note(model));
  if (attention_na.empty()) {
    fmt::print(
        "accuracy on {}; sparse attention: {} query rows x {} heads x {} selected tokens, sm_scale 1/sqrt({})\n\n",
        in.source, in.queries.rows, in.queries.heads, in.queries.topk, kQueryDim);
  } else {
    fmt::print("accuracy on {}; sparse attention: not available: {}\n\n", in.source, attention_na);
  }
  fmt::print("  {:<26} {:>5} {:>9} {:>14} {:>9} {:>7} {:>9} {:>9} {:>9} {:>10} {:>10} {:>12} {:>11}", "format", "bytes",
             "KiB/token", "tokens", "128k seqs", "x bf16", "latent %", "rope %", "attn %", "write GB/s", "read GB/s",
             "write Mtok/s", "read Mtok/s");
  if (cuda) {
    fmt::print(" {:>8} {:>8}", "write/cp", "read/cp");
  }
  fmt::print("\n");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const FormatRow& r = rows[i];
    const auto tokens = static_cast<double>(in.bf16.tokens);
    fmt::print(
        "{} {:<26} {:>5} {:>9.1f} {:>14} {:>9} {:>6.2f}x {:>9.3f} {:>9.3f} {:>9} {:>10.1f} {:>10.1f} {:>12.3f} "
        "{:>11.3f}",
        i == best ? '*' : ' ', format_info(r.capacity.format).id, r.capacity.record_bytes,
        r.capacity.bytes_per_token / 1024.0, r.capacity.tokens, r.capacity.sequences, r.capacity.tokens_vs_bf16,
        100.0 * r.accuracy.latent.rel_rms, 100.0 * r.accuracy.rope.rel_rms, attention_percent(r.accuracy),
        gbps(r.speed.write_bytes, r.speed.write_us), gbps(r.speed.read_bytes, r.speed.read_us),
        tokens / r.speed.write_us, tokens / r.speed.read_us);
    if (cuda) {
      fmt::print(" {:>7.2f}x {:>7.2f}x\n", fraction(r.speed.write_copy_us, r.speed.write_us),
                 fraction(r.speed.read_copy_us, r.speed.read_us));
    } else {
      fmt::print("\n");
    }
  }
  if (attention_na.empty()) {
    fmt::print("\n'%' columns: relative RMS error against the bf16 inputs (attn: the sparse decode's output).\n");
  } else {
    fmt::print(
        "\n'%' columns: relative RMS error against the bf16 inputs (latent: the {} values of kv_c); attn: n/a, "
        "no sparse-attention check (above).\n",
        model.nope_dims);
  }
  for (const FormatRow& r : rows) {
    if (nonfinite(r) == 0) continue;
    const std::string attention = r.accuracy.attention
                                      ? fmt::format(", {} of {} attention outputs", r.accuracy.attention->nonfinite,
                                                    in.queries.rows * in.queries.heads * kValueDim)
                                      : "";
    fmt::print(
        "! {}: non-finite decoded or reference values (NaN/inf; '%' columns cover the finite ones): {} of {} "
        "latent, {} of {} rope{}{}\n",
        format_info(r.capacity.format).id, r.accuracy.latent.nonfinite, in.bf16.tokens * model.nope_dims,
        r.accuracy.rope.nonfinite, in.bf16.tokens * kRopeDim, attention,
        r.capacity.format == Format::kFp16 ? " (fp16 holds |x| <= 65504: larger inputs overflow)" : "");
  }
  if (best < rows.size()) {
    fmt::print("* recommended: {}: {}\n", format_info(rows[best].capacity.format).id, reason);
  } else {
    fmt::print("no recommendation: {}\n", reason);
  }
}

// The attention fields of a format's JSON row: numbers, or null without the sparse-attention check.
struct AttentionJson {
  std::string rel_rms = "null", max_abs = "null", nonfinite = "null";
};
AttentionJson attention_json(const FormatAccuracy& a) {
  if (!a.attention) return {};
  return {json_number(a.attention->rel_rms), json_number(a.attention->max_abs), std::to_string(a.attention->nonfinite)};
}

void print_json(const ModelBudget& budget, const Inputs& in, Device device, const ReportOptions& o,
                const std::vector<FormatRow>& rows, std::size_t best, const std::string& reason,
                const std::string& attention_na) {
  const bool compressed = budget.model.compressed();
  std::string out = "{\n";
  out += fmt::format("  \"model\": {{\"id\": {}, \"name\": {}, \"layers\": {}, \"heads\": {}{}}},\n",
                     json_string(budget.model.id), json_string(budget.model.name), budget.model.layers,
                     budget.model.heads, compression_json(budget.model));
  out += fmt::format("  \"kv_memory\": {},\n  \"device\": {},\n  \"source\": {},\n", budget.kv_memory,
                     json_string(device.type == DeviceType::kCuda ? "cuda" : "cpu"), json_string(in.source));
  if (attention_na.empty()) {
    out += fmt::format("  \"attention\": {{\"rows\": {}, \"heads\": {}, \"topk\": {}, \"sm_scale\": {}}},\n",
                       in.queries.rows, in.queries.heads, in.queries.topk,
                       json_number(1.0 / std::sqrt(double{kQueryDim})));
  } else {
    out += fmt::format("  \"attention\": {{\"available\": false, \"reason\": {}}},\n", json_string(attention_na));
  }
  out += fmt::format(
      "  \"max_attention_error\": {},\n  \"recommended\": {},\n  \"reason\": {},\n", json_number(o.max_attention_error),
      best < rows.size() ? json_string(format_info(rows[best].capacity.format).id) : "null", json_string(reason));
  out += "  \"formats\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const FormatRow& r = rows[i];
    const Capacity& c = r.capacity;
    const AttentionJson attention = attention_json(r.accuracy);
    out += fmt::format(
        "    {{\"format\": {}, \"record_bytes\": {}, \"bytes_per_token\": {}, \"tokens\": {}, "
        "\"sequences_128k\": {}, \"tokens_vs_bf16\": {}, {}\"latent_rel_rms\": {}, \"latent_max_abs\": {}, "
        "\"rope_rel_rms\": {}, \"rope_max_abs\": {}, \"attention_rel_rms\": {}, \"attention_max_abs\": {}, "
        "\"write_gbps\": {}, \"read_gbps\": {}, \"write_tokens_per_s\": {}, \"read_tokens_per_s\": {}, "
        "\"write_fraction_of_copy\": {}, \"read_fraction_of_copy\": {}, \"latent_nonfinite\": {}, "
        "\"rope_nonfinite\": {}, \"attention_nonfinite\": {}}}{}\n",
        json_string(format_info(c.format).id), c.record_bytes, c.bytes_per_token, c.tokens, c.sequences,
        json_number(c.tokens_vs_bf16),
        compressed ? fmt::format("\"window_bytes_per_sequence\": {}, ", c.window_bytes_per_sequence) : "",
        json_number(r.accuracy.latent.rel_rms), json_number(r.accuracy.latent.max_abs),
        json_number(r.accuracy.rope.rel_rms), json_number(r.accuracy.rope.max_abs), attention.rel_rms,
        attention.max_abs, json_number(gbps(r.speed.write_bytes, r.speed.write_us)),
        json_number(gbps(r.speed.read_bytes, r.speed.read_us)), json_number(in.bf16.tokens / (r.speed.write_us * 1e-6)),
        json_number(in.bf16.tokens / (r.speed.read_us * 1e-6)),
        json_number(fraction(r.speed.write_copy_us, r.speed.write_us)),
        json_number(fraction(r.speed.read_copy_us, r.speed.read_us)), r.accuracy.latent.nonfinite,
        r.accuracy.rope.nonfinite, attention.nonfinite, i + 1 < rows.size() ? "," : "");
  }
  out += "  ]\n}\n";
  fmt::print("{}", out);
}

void write_plot(const std::string& path, const ModelBudget& budget, const std::vector<FormatRow>& rows,
                std::size_t best, double limit) {
  std::vector<PlotPoint> points;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (nonfinite(rows[i]) > 0) continue;  // no error number places it
    points.push_back({std::string(format_info(rows[i].capacity.format).id),
                      static_cast<double>(rows[i].capacity.bytes_per_token), rows[i].accuracy.attention->rel_rms,
                      i == best});
  }
  std::ofstream file(path);
  if (!file) throw Error(ErrorCode::kValue, "--plot: cannot write " + path);
  file << render_svg(fmt::format("{}: KV bytes per token vs sparse-attention error", budget.model.name), points,
                     100.0 * limit);
  if (!file) throw Error(ErrorCode::kValue, "--plot: writing " + path + " failed");
}

// "2%" (a percentage, as the table prints errors) or a fraction in [0, 1] ("0.02").
double parse_error_limit(const std::string& text) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string number = percent ? text.substr(0, text.size() - 1) : text;
  double value = 0.0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  const bool parsed = ec == std::errc() && end == number.data() + number.size() && std::isfinite(value);
  const double limit = percent ? value / 100.0 : value;
  if (!parsed || !(limit >= 0.0 && limit <= 1.0)) {
    throw Error(ErrorCode::kValue, fmt::format("--max-attention-error: must be a percentage in [0%, 100%] (2%) or a "
                                               "fraction in [0, 1] (0.02), got '{}'",
                                               text));
  }
  return limit;
}

// The plot's file must be writable before the run starts, not found unwritable after it.
void check_writable(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw Error(ErrorCode::kValue, flag + ": " + path + ": no directory " + dir.string());
  if (fs::exists(target, ec) && !fs::is_regular_file(target, ec)) {
    throw Error(ErrorCode::kValue, flag + ": " + path + ": exists and is not a regular file");
  }
  if (::access(fs::exists(target, ec) ? path.c_str() : dir.c_str(), W_OK) != 0) {
    throw Error(ErrorCode::kValue, flag + ": " + path + ": not writable");
  }
}

// Host bytes the run holds per token: the bf16 and fp16 activations (16-bit and
// float32 copies, 2 x 3456), the measurement buffers (inputs, slots, a bf16
// cache, float32 and bf16 outputs: 6920) and the accuracy pass's decoded copy
// (2304). Measured: 526 MB of peak RSS at 32768 tokens.
constexpr double kHostBytesPerToken = 16140.0;

std::uint64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");  // a regular file of the kernel's
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// Refused with an estimate before starting, rather than ending in bad_alloc (or swapping) after minutes.
void check_host_memory(std::int64_t tokens) {
  const double need = kHostBytesPerToken * static_cast<double>(tokens) + 64e6;
  const auto available = static_cast<double>(available_host_memory());
  if (need <= available) return;
  const auto fits = static_cast<std::int64_t>(std::max(0.0, (available - 64e6) / kHostBytesPerToken));
  throw Error(ErrorCode::kValue,
              fmt::format("--tokens: {} tokens need about {} of host memory, {} is available; use --tokens {} or "
                          "fewer",
                          tokens, format_size(need), format_size(available), fits));
}

void run_report(const ReportOptions& options) {
  const ReportOptions& o = options;
  // Every flag is checked before any work starts.
  const ModelBudget budget = resolve_budget(o.model);
  const Device device = resolve_device(o.device);
  ReportOptions parsed = o;
  parsed.max_attention_error = parse_error_limit(o.max_attention_error_text);
  check_writable("--plot", o.plot);
  if (o.activations.empty() == false && o.tokens > 0) {
    throw Error(ErrorCode::kValue, "--tokens: cannot be combined with --activations (the tokens are kv_c.npy's rows)");
  }
  const std::int64_t tokens = o.tokens > 0 ? o.tokens : device.type == DeviceType::kCuda ? 262144 : 4096;
  check_host_memory(tokens);
  const std::vector<Capacity> caps = capacities(budget.kv_memory, budget.model);
  const std::string attention_na = attention_unavailable(budget.model, caps, device);
  if (!o.plot.empty() && !attention_na.empty()) {
    throw Error(ErrorCode::kValue, fmt::format("--plot: draws each format's sparse-attention error, which {} has none "
                                               "of ({})",
                                               budget.model.id, attention_na));
  }
  const int steps = 2 + 2 * static_cast<int>(caps.size());
  Progress progress(o.quiet, steps);

  progress.step(o.activations.empty() ? "generating synthetic activations" : "reading " + o.activations);
  const bool attention = attention_na.empty();
  const Inputs in = o.activations.empty() ? synthetic_inputs(o, tokens, budget.model, attention)
                                          : user_inputs(o, budget.model, attention);
  progress.step(attention ? "uploading inputs and computing the bf16 reference attention" : "uploading inputs");
  Measurement measurement(device, in.bf16, in.fp16, in.queries);
  std::vector<FormatRow> rows;
  const int repeats = device.type == DeviceType::kCuda ? 10 : 3;
  for (const Capacity& c : caps) {
    const std::string id(format_info(c.format).id);
    progress.step("accuracy of " + id);
    FormatRow row{c, measurement.accuracy(c.format), {}};
    progress.step("speed of " + id);
    row.speed = measurement.speed(c.format, repeats);
    rows.push_back(row);
  }
  progress.finish();
  std::string reason;
  const std::size_t best = recommend(rows, parsed.max_attention_error, attention_na, reason);
  if (o.json) {
    print_json(budget, in, device, parsed, rows, best, reason, attention_na);
  } else {
    print_table(budget, in, device, rows, best, reason, attention_na);
  }
  if (!o.plot.empty()) write_plot(o.plot, budget, rows, best, parsed.max_attention_error);
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Which KV-cache format to run: capacity, accuracy and speed of each");
  auto o = std::make_shared<ReportOptions>();
  add_model_options(*cmd, o->model);
  cmd->add_option("--device", o->device, "cpu, cuda, or auto (cuda when a device is present)")->default_val("cpu");
  cmd->add_option("--tokens", o->tokens, "Synthetic tokens to measure (default 4096 on the CPU, 262144 on CUDA)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--queries", o->queries, "Query rows of the sparse-attention check")
      ->default_val(o->queries)
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--seed", o->seed, "Seed of the synthetic activations and queries")->check(non_negative_integer());
  cmd->add_option("--activations", o->activations,
                  "Directory with kv_c.npy [T,512] (deepseek-v4-flash: [T,448]) and k_pe.npy [T,64] (float32/float16), "
                  "optional q.npy [R,H,576]");
  cmd->add_flag("--allow-nonfinite", o->allow_nonfinite,
                "Measure activations holding NaN/inf instead of refusing them (counted per format)");
  cmd->add_option("--max-attention-error", o->max_attention_error_text,
                  "Largest sparse-attention error (relative RMS) a recommended format may have: 2% or 0.02")
      ->default_val(o->max_attention_error_text);
  cmd->add_flag("--json", o->json, "Print JSON instead of the table");
  cmd->add_option("--plot", o->plot, "Write an SVG of bytes per token against attention error");
  cmd->add_flag("--quiet", o->quiet, "No progress line on stderr");
  cmd->callback([o] { run_report(*o); });
}

}  // namespace mlakv::tool
