// Trains a small decoder-only character transformer on English text: the
// fortune cookies of Debian's `fortunes` package (/usr/share/games/fortunes).
// Seed 001's model (a character vocabulary, token and position embeddings,
// a causal attention head) grown into N pre-norm blocks
// (nn::pre_norm_block: layer norms, causal multi-head attention and a GELU
// MLP), a final layer norm and an LM head
// (examples/char_transformer_model.hpp), trained with AdamW, a warmup +
// cosine learning rate and gradient clipping (include/dimsum/optim/).
//
// It prints a progress line (step, loss, tokens/s, elapsed, time left),
// evaluates a held-out loss, saves a .safetensors checkpoint and reloads it
// into a fresh model (the held-out loss must be the same), draws the loss
// curve as an SVG and samples text, greedy and with temperature and top-k.
//
//   train_char_transformer                      # the default run (a few minutes on 2 cores)
//   train_char_transformer --smoke              # the CTest: 80 steps of a tiny model, checked
//   train_char_transformer --steps 3000 --d-model 96 --layers 3 --heads 4 --seed 7 --out runs/a
//   (also --batch, --lr, --warmup, --context, --d-mlp, --eval-every, --eval-batches,
//    --sample-chars, --data DIR, and --threads N, 1 by default)
//   train_char_transformer --steps 3000 --stop-after 1000 --out runs/a     # stops as if interrupted
//   train_char_transformer --steps 3000 --resume runs/a --out runs/a       # continues from step 1000
//   train_char_transformer --bf16               # mixed precision: float32 masters, bf16 forward and backward
//
// --bf16 trains in mixed precision (loss_bf16 in char_transformer_model.cpp:
// the embeddings cast to bf16, every other parameter watched as a bf16 copy
// of its float32 master by the module that holds it, einsums on the bf16
// GEMM with float32 sums, the master gradients float32, AdamW and the
// checkpoint unchanged); the held-out loss is evaluated in float32.
//
// The checkpoint (OUT/char_transformer.safetensors, written at the end and
// every --save-every N steps) holds the model, the step, the model's sizes
// and the batch sampler's state in its metadata; beside it,
// OUT/char_transformer.optimizer.safetensors holds AdamW's state
// (save_optimizer_state). --resume DIR loads both and continues from the
// saved step to --steps with the sizes of the checkpoint: the parameters at
// the end are bit for bit those of a run that was never interrupted (with
// the same options and --threads; the schedule is a function of the step).
//
// Exit status 1 if a check fails: the initial loss is ln(vocab) within
// 0.05 (the initialisation's logits are near 0), the training and held-out
// losses fall by more than 0.5 and the held-out loss ends below the unigram
// baseline, the checkpoint reloaded into a fresh model gives the same
// held-out loss, and the loss curve is written (the checks of the losses'
// progress only for a run from step 0 to --steps, without --resume or
// --stop-after).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <dimsum/io/optimizer_state.hpp>
#include <dimsum/io/state_dict.hpp>
#include <dimsum/kernels/threads.hpp>
#include <dimsum/optim/optim.hpp>

#include "char_transformer_model.hpp"

namespace fs = std::filesystem;
namespace optim = dimsum::optim;
using namespace char_lm;

namespace {

struct options {
  std::size_t steps = 1500;
  std::size_t batch_size = 16;
  double lr = 3e-3;
  std::size_t warmup = 100;
  std::size_t eval_every = 250;
  std::size_t eval_batches = 16;
  std::uint64_t seed = 1234;
  std::string out = "train_char_transformer_out";
  std::string data = "/usr/share/games/fortunes";
  std::size_t sample_chars = 300;
  // One thread by default: at these sizes (GEMMs of 1024 x 64 x 64) a
  // second thread gains little (with OpenMP regions, a busy machine once
  // made the run 7x slower). 0: the default (OMP_NUM_THREADS, else the cores).
  std::size_t threads = 1;
  std::size_t save_every = 0;  // 0: the checkpoint is written at the end only
  std::size_t stop_after = 0;  // 0: run to --steps
  std::string resume;          // a directory holding a checkpoint to continue from
  bool smoke = false;
  bool bf16 = false;  // mixed precision (--bf16)
  config model;
};

[[noreturn]] void usage(const char* why) {
  std::cerr << "train_char_transformer: " << why << "\n"
            << "options: --steps N --batch N --lr X --warmup N --eval-every N --eval-batches N --seed N\n"
            << "         --context N --d-model N --layers N --heads N --d-mlp N --out DIR --data DIR\n"
            << "         --sample-chars N --threads N --save-every N --stop-after N --resume DIR --smoke --bf16\n";
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  o.model.context = 64;
  o.model.d_model = 64;
  o.model.n_layers = 2;
  o.model.n_heads = 4;
  o.model.d_mlp = 256;
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      o.smoke = true;
    } else if (a == "--bf16") {
      o.bf16 = true;
    } else if (a == "--help" || a == "-h") {
      usage("a small character transformer trained on the fortunes package's texts");
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      kv[a] = argv[++i];
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.smoke) {  // a tiny model for a few dozen steps: the CTest, well under 30 s
    o.steps = 80;
    o.batch_size = 8;
    o.lr = 1e-2;
    o.warmup = 5;
    o.eval_every = 40;
    o.eval_batches = 4;
    o.sample_chars = 60;
    o.model.context = 32;
    o.model.d_model = 32;
    o.model.n_layers = 1;
    o.model.n_heads = 2;
    o.model.d_mlp = 64;
  }
  auto num = [&](const char* key, auto& field) {
    auto it = kv.find(key);
    if (it == kv.end()) return;
    try {
      if constexpr (std::is_same_v<std::remove_reference_t<decltype(field)>, double>)
        field = std::stod(it->second);
      else
        field = std::stoull(it->second);
    } catch (const std::exception&) {
      usage((std::string(key) + " needs a number").c_str());
    }
    kv.erase(it);
  };
  num("--steps", o.steps);
  num("--batch", o.batch_size);
  num("--lr", o.lr);
  num("--warmup", o.warmup);
  num("--eval-every", o.eval_every);
  num("--eval-batches", o.eval_batches);
  num("--seed", o.seed);
  num("--sample-chars", o.sample_chars);
  num("--threads", o.threads);
  num("--context", o.model.context);
  num("--d-model", o.model.d_model);
  num("--layers", o.model.n_layers);
  num("--heads", o.model.n_heads);
  num("--d-mlp", o.model.d_mlp);
  num("--save-every", o.save_every);
  num("--stop-after", o.stop_after);
  if (auto it = kv.find("--resume"); it != kv.end()) o.resume = it->second, kv.erase(it);
  if (auto it = kv.find("--out"); it != kv.end()) o.out = it->second, kv.erase(it);
  if (auto it = kv.find("--data"); it != kv.end()) o.data = it->second, kv.erase(it);
  if (!kv.empty()) usage(("unknown option " + kv.begin()->first).c_str());
  if (o.steps == 0 || o.batch_size == 0 || o.model.context < 2 || o.model.n_heads == 0 ||
      o.model.d_model % o.model.n_heads != 0 || o.eval_batches == 0)
    usage("steps, batch, eval-batches >= 1, context >= 2, and d-model a multiple of heads");
  o.warmup = std::min(o.warmup, o.steps);
  return o;
}

// --- the text: every English fortune database, one fortune per record ---

/// The fortunes of every database file in `dir` (the plain files; not the
/// .dat indexes, the .u8 links or the ASCII-art collections), with the `%`
/// separator lines stripped and only printable ASCII and newlines kept.
std::vector<std::string> read_fortunes(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (!e.is_regular_file() || e.path().has_extension() || name == "art" || name == "ascii-art") continue;
    files.push_back(e.path());
  }
  if (files.empty())
    throw std::runtime_error("no fortune databases in " + dir +
                             " (install the Debian package `fortunes`: apt-get install fortunes)");
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string line, cur;
    auto flush = [&] {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") {
        flush();
        continue;
      }
      for (char ch : line)
        if (ch >= 32 && ch < 127) cur += ch;
        else if (ch == '\t') cur += ' ';
      cur += '\n';
    }
    flush();
  }
  return out;
}

struct corpus {
  std::string chars;                // the vocabulary, sorted
  std::vector<std::int64_t> train;  // 9 of every 10 fortunes
  std::vector<std::int64_t> held_out;

  std::int64_t id(char c) const { return std::int64_t(chars.find(c)); }
  std::string decode(const std::vector<std::int64_t>& ids) const {
    std::string s;
    for (auto i : ids) s += chars[std::size_t(i)];
    return s;
  }
};

/// The character vocabulary of the whole text; every tenth fortune (each
/// followed by a blank line) goes to the held-out split.
corpus make_corpus(const std::vector<std::string>& fortunes) {
  corpus c;
  bool seen[128] = {};
  for (const auto& f : fortunes)
    for (char ch : f) seen[int(ch)] = true;
  for (int ch = 0; ch < 128; ++ch)
    if (seen[ch]) c.chars += char(ch);
  for (std::size_t i = 0; i < fortunes.size(); ++i) {
    auto& dst = i % 10 == 9 ? c.held_out : c.train;
    for (char ch : fortunes[i] + "\n") dst.push_back(c.id(ch));
  }
  return c;
}

/// The held-out cross entropy of the training text's character frequencies
/// (add-one smoothed): the loss of a model that ignores the context.
double unigram_baseline(const corpus& c) {
  std::vector<double> count(c.chars.size(), 1.0);
  for (auto i : c.train) count[std::size_t(i)] += 1;
  double total = 0;
  for (double n : count) total += n;
  double ce = 0;
  for (auto i : c.held_out) ce -= std::log(count[std::size_t(i)] / total);
  return ce / double(c.held_out.size());
}

using ids_t = tensor<std::int64_t, batch, posn>;

/// Inputs and next-character targets of windows starting at `starts`.
std::pair<ids_t, ids_t> windows(const std::vector<std::int64_t>& data, const std::vector<std::size_t>& starts,
                                std::size_t len) {
  ids_t x(batch{starts.size()}, posn{len}), y(batch{starts.size()}, posn{len});
  for (std::size_t b = 0; b < starts.size(); ++b)
    for (std::size_t p = 0; p < len; ++p) {
      x.data()[b * len + p] = data[starts[b] + p];
      y.data()[b * len + p] = data[starts[b] + p + 1];
    }
  return {x, y};
}

/// The mean loss over fixed, evenly spaced held-out windows (no gradient
/// is taken: the tape is dropped).
double held_out_loss(model& m, const corpus& c, const options& o) {
  const std::size_t len = o.model.context, n = o.eval_batches * o.batch_size;
  const std::size_t span = c.held_out.size() - len - 1;
  double total = 0;
  for (std::size_t b = 0; b < o.eval_batches; ++b) {
    std::vector<std::size_t> starts(o.batch_size);
    for (std::size_t i = 0; i < o.batch_size; ++i) starts[i] = (b * o.batch_size + i) * span / n;
    auto [x, y] = windows(c.held_out, starts, len);
    tape t;
    total += loss(t, m, x, y).item();
  }
  return total / double(o.eval_batches);
}

/// `n` characters continuing `prompt`: greedy when temperature is 0,
/// otherwise drawn from softmax(logits / temperature) over the top_k.
std::string sample(model& m, const corpus& c, const options& o, const std::string& prompt, std::size_t n,
                   double temperature, std::size_t top_k, std::uint64_t seed) {
  std::vector<std::int64_t> ids;
  for (char ch : prompt)
    if (c.chars.find(ch) != std::string::npos) ids.push_back(c.id(ch));
  std::mt19937_64 gen(seed);
  const std::size_t v = c.chars.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t len = std::min(ids.size(), o.model.context);
    ids_t x(batch{1}, posn{len});
    std::copy(ids.end() - std::ptrdiff_t(len), ids.end(), x.data());
    tape t;
    const float* logits = forward(t, m, x).value().data() + (len - 1) * v;
    std::vector<std::size_t> order(v);
    for (std::size_t i = 0; i < v; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return logits[a] > logits[b]; });
    std::size_t next = order[0];
    if (temperature > 0) {
      const std::size_t keep = std::min(std::max<std::size_t>(top_k, 1), v);
      std::vector<double> p(keep);
      double z = 0;
      for (std::size_t i = 0; i < keep; ++i) z += p[i] = std::exp((logits[order[i]] - logits[order[0]]) / temperature);
      double r = double(gen() >> 11) * 0x1p-53 * z;
      std::size_t i = 0;
      while (i + 1 < keep && (r -= p[i]) > 0) ++i;
      next = order[i];
    }
    ids.push_back(std::int64_t(next));
  }
  return c.decode(std::vector<std::int64_t>(ids.end() - std::ptrdiff_t(n), ids.end()));
}

// --- the loss curve ---

struct point {
  std::size_t step;
  double loss;
};

/// An SVG line chart of the training loss (each step, and its moving
/// average) and the held-out loss, with ln(vocab) and the unigram baseline
/// as dashed lines.
void write_svg(const std::string& path, const std::vector<point>& train, const std::vector<point>& held,
               double ln_vocab, double unigram, std::size_t steps) {
  const double W = 720, H = 420, L = 60, R = 20, T = 30, B = 50;
  double top = ln_vocab + 0.25, bottom = unigram;
  for (const auto& p : train) bottom = std::min(bottom, p.loss), top = std::max(top, p.loss);
  for (const auto& p : held) bottom = std::min(bottom, p.loss);
  bottom = std::floor(std::max(0.0, bottom - 0.25) * 2) / 2;
  top = std::ceil(top * 2) / 2;
  auto X = [&](double s) { return L + (W - L - R) * s / double(std::max<std::size_t>(steps, 1)); };
  auto Y = [&](double l) { return T + (H - T - B) * (top - l) / (top - bottom); };
  std::ostringstream s;
  s.precision(5);
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">character transformer on "
    << "fortunes: cross entropy (nats per character)</text>\n";
  for (double l = bottom; l <= top + 1e-9; l += 0.5)
    s << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << Y(l) << "\" y2=\"" << Y(l)
      << "\" stroke=\"#ddd\"/><text x=\"" << L - 6 << "\" y=\"" << Y(l) + 4 << "\" text-anchor=\"end\">" << l
      << "</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const std::size_t st = steps * std::size_t(i) / 5;
    s << "<text x=\"" << X(double(st)) << "\" y=\"" << H - B + 18 << "\" text-anchor=\"middle\">" << st << "</text>\n";
  }
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">step</text>\n"
    << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  auto hline = [&](double l, const char* colour, const std::string& label) {
    s << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << Y(l) << "\" y2=\"" << Y(l) << "\" stroke=\""
      << colour << "\" stroke-dasharray=\"6 4\"/><text x=\"" << W - R - 4 << "\" y=\"" << Y(l) - 4
      << "\" text-anchor=\"end\" fill=\"" << colour << "\">" << label << "</text>\n";
  };
  hline(ln_vocab, "#888", "ln(vocab) = " + std::to_string(ln_vocab).substr(0, 5));
  hline(unigram, "#c60", "unigram baseline = " + std::to_string(unigram).substr(0, 5));
  auto polyline = [&](const std::vector<point>& ps, const char* colour, double width, const char* extra) {
    s << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"" << width << "\" " << extra
      << " points=\"";
    for (const auto& p : ps) s << X(double(p.step)) << ',' << Y(p.loss) << ' ';
    s << "\"/>\n";
  };
  std::vector<point> smooth;
  double ema = train.empty() ? 0 : train.front().loss;
  for (const auto& p : train) smooth.push_back({p.step, ema = 0.95 * ema + 0.05 * p.loss});
  polyline(train, "#9bd", 1, "opacity=\"0.6\"");
  polyline(smooth, "#06c", 2, "");
  polyline(held, "#d22", 2, "");
  for (const auto& p : held)
    s << "<circle cx=\"" << X(double(p.step)) << "\" cy=\"" << Y(p.loss) << "\" r=\"3\" fill=\"#d22\"/>\n";
  s << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << T + 16
    << "\" text-anchor=\"middle\" fill=\"#06c\">train (moving average; light: each step)</text>\n"
    << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << T + 32
    << "\" text-anchor=\"middle\" fill=\"#d22\">held out</text>\n</svg>\n";
  std::ofstream(path) << s.str();
}

std::string clock(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

// The checkpoint files in directory `dir`.
std::string model_file(const std::string& dir) { return (fs::path(dir) / "char_transformer.safetensors").string(); }
std::string optimizer_file(const std::string& dir) {
  return (fs::path(dir) / "char_transformer.optimizer.safetensors").string();
}

// A metadata value of the checkpoint `path`, or an error naming it.
const std::string& meta(const dimsum::safetensors_contents& c, const std::string& path, const std::string& key) {
  const auto it = c.metadata.find(key);
  if (it == c.metadata.end())
    throw std::runtime_error("checkpoint '" + path + "' has no metadata '" + key + "'; it cannot be resumed");
  return it->second;
}

// A count in the metadata of the checkpoint `path`, or an error naming it.
std::size_t meta_count(const dimsum::safetensors_contents& c, const std::string& path, const std::string& key) {
  const std::string& v = meta(c, path, key);
  std::size_t n = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size())
    throw std::runtime_error("checkpoint '" + path + "': metadata '" + key + "' is '" + v + "', not a count");
  return n;
}

int main(int argc, char** argv) try {
  options o = parse(argc, argv);
  // Resuming: the model's sizes are the checkpoint's.
  dimsum::safetensors_contents resumed;
  if (!o.resume.empty()) {
    resumed = dimsum::read_safetensors(model_file(o.resume));
    const std::string path = model_file(o.resume);
    o.model.context = meta_count(resumed, path, "context");
    o.model.d_model = meta_count(resumed, path, "d_model");
    o.model.n_layers = meta_count(resumed, path, "n_layers");
    o.model.n_heads = meta_count(resumed, path, "n_heads");
    o.model.d_mlp = meta_count(resumed, path, "d_mlp");
  }
  dimsum::set_num_threads(int(o.threads));
  const corpus c = make_corpus(read_fortunes(o.data));
  config cfg = o.model;
  cfg.vocab = c.chars.size();
  if (c.held_out.size() < cfg.context + 2 || c.train.size() < cfg.context + 2)
    throw std::runtime_error("the text is shorter than one window");
  const double ln_vocab = std::log(double(cfg.vocab));
  const double unigram = unigram_baseline(c);

  model m = make_model(cfg);
  init_model(m, o.seed);
  optim::adamw opt({.lr = o.lr, .weight_decay = 0.01});
  std::mt19937_64 gen(optim::derive_seed(o.seed, "batches"));
  std::size_t first_step = 0;
  if (!o.resume.empty()) {
    const std::string path = model_file(o.resume);
    if (meta(resumed, path, "vocab") != c.chars)
      throw std::runtime_error("checkpoint '" + path + "' was trained on another text (another vocabulary)");
    first_step = meta_count(resumed, path, "step");
    dimsum::load_safetensors(path, m);
    dimsum::load_optimizer_state(optimizer_file(o.resume), m, opt);
    // The optimizer file is written before the model's: a run stopped
    // between the two leaves an optimizer ahead of the model.
    if (opt.state<dimsum::parameter<float, vocab, d_model>>("tok_embed").step != std::int64_t(first_step))
      throw std::runtime_error("checkpoint '" + path + "' is at step " + std::to_string(first_step) +
                               " but its optimizer state is not; the run stopped while saving");
    // A state that does not read back would leave the generator at its
    // seed: the batches, and so the run, would silently differ.
    std::istringstream rng(meta(resumed, path, "batch_rng"));
    if (!(rng >> gen) || !(rng >> std::ws).eof())
      throw std::runtime_error("checkpoint '" + path + "': metadata 'batch_rng' is not a state of the batch sampler");
    std::cout << "resuming from " << path << " at step " << first_step << "\n";
  }
  const std::size_t last_step = o.stop_after ? std::min(o.stop_after, o.steps) : o.steps;
  if (first_step >= last_step)
    throw std::runtime_error("nothing to train: the run starts at step " + std::to_string(first_step) +
                             " and stops at " + std::to_string(last_step));
  std::cout << "text: " << c.train.size() << " training and " << c.held_out.size()
            << " held-out characters from " << o.data << "; vocabulary " << cfg.vocab << " characters\n"
            << "model: " << cfg.n_layers << " blocks, d_model " << cfg.d_model << ", " << cfg.n_heads
            << " heads, d_mlp " << cfg.d_mlp << ", context " << cfg.context << ": "
            << dimsum::nn::parameter_count(m) << " parameters\n"
            << "kernels: " << dimsum::kernel_isa() << ", " << o.threads << " thread(s)\n"
            << "baselines: ln(vocab) = " << ln_vocab << ", unigram (held out) = " << unigram << "\n"
            << "training: " << o.steps << " steps of " << o.batch_size << " x " << cfg.context
            << " characters, AdamW lr " << o.lr << " (warmup " << o.warmup << ", cosine), clip 1.0, seed " << o.seed
            << (o.bf16 ? ", mixed precision (bf16 forward and backward, float32 masters)" : ", float32") << "\n";

  const optim::warmup_cosine_schedule schedule{.base_lr = o.lr, .warmup_steps = o.warmup, .total_steps = o.steps,
                                               .min_lr = o.lr / 10};
  const std::size_t span = c.train.size() - cfg.context - 1;
  const bool tty = isatty(2);
  std::vector<point> train_curve, held_curve;
  held_curve.push_back({first_step, held_out_loss(m, c, o)});
  fs::create_directories(o.out);
  const std::string ckpt = model_file(o.out);
  // The optimizer's state first, then the model's file with the step: the
  // model file is the record that a checkpoint is whole.
  auto save_checkpoint = [&](std::size_t steps_done) {
    std::ostringstream rng;
    rng << gen;
    dimsum::save_optimizer_state(optimizer_file(o.out), m, opt);
    dimsum::save_safetensors(ckpt, m,
                             {{"vocab", c.chars},
                              {"context", std::to_string(cfg.context)},
                              {"d_model", std::to_string(cfg.d_model)},
                              {"n_layers", std::to_string(cfg.n_layers)},
                              {"n_heads", std::to_string(cfg.n_heads)},
                              {"d_mlp", std::to_string(cfg.d_mlp)},
                              {"step", std::to_string(steps_done)},
                              {"batch_rng", rng.str()}});
  };
  const auto start = std::chrono::steady_clock::now();
  double train_seconds = 0;
  for (std::size_t step = first_step; step < last_step; ++step) {
    std::vector<std::size_t> starts(o.batch_size);
    for (auto& s : starts) s = std::size_t(gen() % span);
    auto [x, y] = windows(c.train, starts, cfg.context);
    dimsum::nn::zero_grad(m);
    double l;
    {
      tape t;
      auto lv = o.bf16 ? loss_bf16(t, m, x, y) : loss(t, m, x, y);
      l = lv.item();
      t.backward(lv);
    }
    optim::clip_grad_norm(m, 1.0);
    opt.options.lr = schedule(step);
    opt.step(m);
    train_curve.push_back({step, l});
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool eval = (step + 1) % o.eval_every == 0 || step + 1 == last_step;
    if (tty || eval || step == first_step || (step + 1) % 50 == 0) {
      const double done = double(step + 1 - first_step) / double(last_step - first_step);
      const double tok_s = double((step + 1 - first_step) * o.batch_size * cfg.context) / elapsed;
      char line[200];
      const int bar = int(done * 24);
      std::snprintf(line, sizeof line, "[%.*s%*s] step %zu/%zu  loss %.4f  %.0f tok/s  elapsed %s  left %s",
                    bar, "########################", 24 - bar, "", step + 1, o.steps, l, tok_s,
                    clock(elapsed).c_str(), clock(elapsed / done - elapsed).c_str());
      std::cerr << (tty ? "\r" : "") << line << (tty ? "\033[K" : "\n") << std::flush;
    }
    if (eval) {
      held_curve.push_back({step + 1, held_out_loss(m, c, o)});
      std::cerr << (tty ? "\n" : "") << "  held-out loss " << held_curve.back().loss << "\n";
    }
    train_seconds = elapsed;
    if (o.save_every && (step + 1) % o.save_every == 0 && step + 1 != last_step) save_checkpoint(step + 1);
  }
  save_checkpoint(last_step);
  const double held = held_curve.back().loss;
  double last_train = 0;
  const std::size_t tail = std::min<std::size_t>(train_curve.size(), 20);
  for (std::size_t i = train_curve.size() - tail; i < train_curve.size(); ++i) last_train += train_curve[i].loss;
  last_train /= double(tail);

  model fresh = make_model(cfg);
  dimsum::load_safetensors(ckpt, fresh);
  const double reloaded = held_out_loss(fresh, c, o);
  const std::string svg = (fs::path(o.out) / "loss_curve.svg").string();
  write_svg(svg, train_curve, held_curve, ln_vocab, unigram, o.steps);

  const std::size_t trained = last_step - first_step;
  std::cout << "\ntrained " << trained << " steps (" << first_step << " to " << last_step << " of " << o.steps
            << ") in " << clock(train_seconds) << " ("
            << std::lround(double(trained * o.batch_size * cfg.context) / train_seconds) << " tokens/s)\n"
            << "loss: initial " << train_curve.front().loss << " (ln(vocab) = " << ln_vocab << "), final train "
            << last_train << " (mean of the last " << tail << " steps), held out " << held_curve.front().loss
            << " -> " << held << " (unigram baseline " << unigram << ")\n"
            << "checkpoint: " << ckpt << " (reloaded into a fresh model: held-out loss " << reloaded << ")\n"
            << "loss curve: " << svg << "\n";

  const std::string prompt = "The ";
  std::cout << "\ngreedy, after \"" << prompt << "\":\n" << prompt
            << sample(fresh, c, o, prompt, o.sample_chars, 0.0, 1, 0) << "\n"
            << "\ntemperature 0.8, top-k 10, after \"" << prompt << "\":\n" << prompt
            << sample(fresh, c, o, prompt, o.sample_chars, 0.8, 10, o.seed) << "\n";

  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) std::cout << "CHECK FAILED: " << what << "\n", ++failures;
  };
  if (first_step == 0 && last_step == o.steps) {  // the progress of a whole run
    expect(std::abs(train_curve.front().loss - ln_vocab) < 0.05, "the initial loss is ln(vocab) within 0.05");
    expect(last_train < train_curve.front().loss - 0.5, "the training loss falls by more than 0.5");
    expect(held < held_curve.front().loss - 0.5, "the held-out loss falls by more than 0.5");
    expect(held < unigram, "the held-out loss is below the unigram baseline");
  }
  expect(std::abs(reloaded - held) <= 1e-6 * std::abs(held), "the reloaded checkpoint gives the same held-out loss");
  expect(fs::file_size(svg) > 1000, "the loss curve is written");
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "train_char_transformer: " << e.what() << "\n";
  return 1;
}
