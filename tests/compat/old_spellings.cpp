// Programs written for dimsum 0.1.0 compile against this version and compute
// the same. The two test cases below are 0.1.0's examples/seed001_char_head.cpp
// and examples/seed004_self_attention.cpp as they were, their main() made a
// test case: they name the seed classes in dimsum::nn (now deprecated aliases
// of dimsum::nn::seeds), assign tensors to parameter members and call
// char_head::forward<QT, KT> (deprecated: forward<Time, QT, KT>). Their
// results are checked against PyTorch's fixtures, as 0.1.0 checked them, and
// against the same computation written with the current spellings.
// Built with -Wno-deprecated-declarations; check_warnings.cmake checks that
// each old spelling warns and names its replacement.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>

#include <dimsum/nn/nn.hpp>

// 0.1.0's examples/seed_fixtures.hpp, as it was.
#include <dimsum/dimsum.hpp>
#include <dimsum/io/npy.hpp>

namespace seeds {

inline std::string fixture(const std::string& name) { return std::string(DIMSUM_FIXTURES_DIR) + name; }

template <class TT>
TT load(const std::string& name) {
  return dimsum::load_npy<TT>(fixture(name));
}

/// Prints the largest difference from PyTorch's value for `name`.
template <class E>
double report(const char* what, const E& expr, const std::string& name) {
  auto got = dimsum::eval(expr);
  auto want = dimsum::load_npy<decltype(got)>(fixture(name));
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = double(got.data()[i]), w = double(want.data()[i]);
    if (!(std::isnan(g) && std::isnan(w)) && g != w) worst = std::max(worst, std::abs(g - w));
  }
  std::printf("%-10s %-40s max |dimsum - pytorch| = %.2e\n", what, dimsum::shape_string(got).c_str(), worst);
  return worst;
}

}  // namespace seeds

// Every element of a and b equal (the old and the new spelling run the same code).
template <class A, class B>
bool same_elements(const A& a_expr, const B& b_expr) {
  auto a = dimsum::eval(a_expr);
  auto b = dimsum::eval(b_expr);
  if (a.extents() != b.extents()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a.data()[i] == b.data()[i]) && !(std::isnan(double(a.data()[i])) && std::isnan(double(b.data()[i]))))
      return false;
  return true;
}

using dimsum::tensor;
namespace nn = dimsum::nn;

static_assert(DIMSUM_VERSION >= 200, "dimsum.hpp includes <dimsum/version.hpp>");

namespace seed001 {
DIMSUM_DIM(chr);
DIMSUM_DIM(vocab);
DIMSUM_DIM(block);
DIMSUM_DIM(n_embd);
DIMSUM_DIM(head_size);
DIMSUM_DIM(batch);
struct time_ : dimsum::dim<"time"> {};
DIMSUM_DIM(q_time);
DIMSUM_DIM(k_time);
}  // namespace seed001

TEST_CASE("0.1.0's seed 001 example: nn::char_tokenizer, nn::char_head, weight = tensor, forward<QT, KT>",
          "[compat]") {
  using namespace seed001;
  // vocab = string.whitespace + ascii_letters + digits + punctuation
  auto tok = nn::char_tokenizer::python_printable();
  auto data = tok.encode<chr>("Attention is all you need");  // torch.LongTensor(encode(text))
  std::cout << "vocab_size " << tok.size() << ", decode(encode(text)) = \"" << tok.decode(data) << "\"\n";

  const std::size_t block_size = 4;
  // nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd): PyTorch's tables
  auto token_embedding_table = nn::embedding<float, vocab, n_embd>::load(seeds::fixture("seed001/token_embedding.npy"));
  auto position_embedding_table = nn::embedding<float, block, n_embd>::load(seeds::fixture("seed001/position_embedding.npy"));

  // get_batch(): ix from torch.randint; x = torch.stack([data[i:i+block_size] for i in ix])
  auto ix = seeds::load<tensor<std::int64_t, batch>>("seed001/batch_ix.npy");
  std::vector<tensor<std::int64_t, time_>> windows;
  for (std::size_t b = 0; b < ix.size(); ++b) {
    const auto i = std::size_t(ix.data()[b]);
    windows.push_back(dimsum::rename<chr, time_>(dimsum::eval(dimsum::slice<chr>(data, i, i + block_size))));
  }
  auto x_ids = dimsum::stack<batch>(windows);

  auto emb_tok = token_embedding_table(x_ids);                                  // (B, T, C)
  auto emb_pos = position_embedding_table(dimsum::arange(time_{block_size}));  // (T, C)
  tensor<float, batch, time_, n_embd> x = emb_pos + emb_tok;                    // broadcast by name

  // key, query, value = nn.Linear(C, head_size, bias=False)
  nn::char_head<float, n_embd, head_size> head(n_embd{5}, head_size{6});
  head.key.weight = seeds::load<tensor<float, head_size, n_embd>>("seed001/key_weight.npy");
  head.query.weight = seeds::load<tensor<float, head_size, n_embd>>("seed001/query_weight.npy");
  head.value.weight = seeds::load<tensor<float, head_size, n_embd>>("seed001/value_weight.npy");
  nn::char_head<float, n_embd, head_size>::trace<batch, q_time, k_time> t;
  auto out = head.forward<q_time, k_time>(x, &t);  // W = softmax(tril-masked q @ k^T * C**-0.5); out = W @ v

  double worst = 0;
  worst = std::max(worst, seeds::report("x_ids", x_ids, "seed001/x_ids.npy"));
  worst = std::max(worst, seeds::report("x", x, "seed001/x.npy"));
  worst = std::max(worst, seeds::report("k", t.k, "seed001/k.npy"));
  worst = std::max(worst, seeds::report("q", t.q, "seed001/q.npy"));
  worst = std::max(worst, seeds::report("W", t.weights, "seed001/weights.npy"));
  worst = std::max(worst, seeds::report("out", out, "seed001/out.npy"));
  CHECK(worst < 1e-5);

  // `weight = tensor` set the value and zeroed the gradient.
  CHECK(same_elements(head.key.weight.value, seeds::load<tensor<float, head_size, n_embd>>("seed001/key_weight.npy")));
  CHECK(head.key.weight.grad.extents() == head.key.weight.value.extents());
  for (std::size_t i = 0; i < head.key.weight.grad.size(); ++i) CHECK(head.key.weight.grad.data()[i] == 0.0f);

  // The current spellings compute the same, element for element.
  static_assert(std::is_same_v<nn::char_head<float, n_embd, head_size>, nn::seeds::char_head<float, n_embd, head_size>>);
  static_assert(std::is_same_v<nn::char_tokenizer, nn::seeds::char_tokenizer>);
  nn::seeds::char_head<float, n_embd, head_size> now(n_embd{5}, head_size{6});
  now.key.weight.value = head.key.weight.value;
  now.query.weight.value = head.query.weight.value;
  now.value.weight.value = head.value.weight.value;
  nn::seeds::char_head<float, n_embd, head_size>::trace<batch, q_time, k_time> t_now;
  auto out_now = now.forward<time_, q_time, k_time>(x, &t_now);
  CHECK(same_elements(out, out_now));
  CHECK(same_elements(t.weights, t_now.weights));
}

namespace seed004 {
DIMSUM_DIM(token);
DIMSUM_DIM(k_token);
DIMSUM_DIM(d_in);
DIMSUM_DIM(d_out);
}  // namespace seed004

TEST_CASE("0.1.0's seed 004 example: nn::self_attention_v1 and v2, W = tensor", "[compat]") {
  using namespace seed004;
  tensor<float, token, d_in> inputs(token{6}, d_in{3});
  const float rows[6][3] = {{0.43f, 0.15f, 0.89f},   // Your
                            {0.55f, 0.87f, 0.66f},   // journey
                            {0.57f, 0.85f, 0.64f},   // starts
                            {0.22f, 0.58f, 0.33f},   // with
                            {0.77f, 0.25f, 0.10f},   // one
                            {0.05f, 0.80f, 0.55f}};  // step
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 3; ++j) inputs(token{i}, d_in{j}) = rows[i][j];

  auto keys = dimsum::rename<token, k_token>(inputs);
  auto attn_scores = dimsum::eval(dimsum::einsum<"token d_in, k_token d_in -> token k_token">(inputs, keys));  // inputs @ inputs.T
  auto attn_weights = dimsum::eval(dimsum::softmax<k_token>(attn_scores));  // torch.softmax(attn_scores, dim=-1)
  auto all_context_vecs = dimsum::einsum<"token k_token, k_token d_in -> token d_in">(attn_weights, keys);
  std::cout << "attn_weights " << attn_weights << "\nall_context_vecs " << dimsum::eval(all_context_vecs) << "\n";

  nn::self_attention_v1<float, d_in, d_out> sa_v1(d_in{3}, d_out{2});  // torch.manual_seed(123)
  sa_v1.W_query = seeds::load<tensor<float, d_in, d_out>>("seed004/sa_v1/W_query.npy");
  sa_v1.W_key = seeds::load<tensor<float, d_in, d_out>>("seed004/sa_v1/W_key.npy");
  sa_v1.W_value = seeds::load<tensor<float, d_in, d_out>>("seed004/sa_v1/W_value.npy");
  auto v1 = sa_v1(inputs);
  std::cout << "sa_v1(inputs) " << v1 << "\n";

  nn::self_attention_v2<float, d_in, d_out> sa_v2(d_in{3}, d_out{2});  // torch.manual_seed(789)
  using lin = nn::linear<float, d_in, d_out>;
  sa_v2.W_query = lin::load(seeds::fixture("seed004/sa_v2/W_query_weight.npy"));
  sa_v2.W_key = lin::load(seeds::fixture("seed004/sa_v2/W_key_weight.npy"));
  sa_v2.W_value = lin::load(seeds::fixture("seed004/sa_v2/W_value_weight.npy"));
  auto v2 = sa_v2(inputs);
  std::cout << "sa_v2(inputs) " << v2 << "\n";

  double worst = 0;
  worst = std::max(worst, seeds::report("inputs", inputs, "seed004/inputs.npy"));
  worst = std::max(worst, seeds::report("weights", attn_weights, "seed004/weightless/attn_weights.npy"));
  worst = std::max(worst, seeds::report("contexts", all_context_vecs, "seed004/weightless/context_vecs.npy"));
  worst = std::max(worst, seeds::report("v1", v1, "seed004/sa_v1/context.npy"));
  worst = std::max(worst, seeds::report("v2", v2, "seed004/sa_v2/context.npy"));
  CHECK(worst < 1e-5);

  // The current spellings compute the same, element for element.
  nn::seeds::self_attention_v1<float, d_in, d_out> now_v1(d_in{3}, d_out{2});
  now_v1.W_query.value = sa_v1.W_query.value;
  now_v1.W_key.value = sa_v1.W_key.value;
  now_v1.W_value.value = sa_v1.W_value.value;
  nn::seeds::self_attention_trace<float, token, d_out> trace_v1;
  CHECK(same_elements(v1, now_v1(inputs, &trace_v1)));
  nn::self_attention_trace<float, token, d_out> old_trace_v1;  // the trace's old name
  CHECK(same_elements(v1, sa_v1(inputs, &old_trace_v1)));
  CHECK(same_elements(old_trace_v1.attn_weights, trace_v1.attn_weights));
  static_assert(std::is_same_v<nn::key_position<token>, nn::seeds::key_position<token>>);
}

TEST_CASE("parameter = tensor sets the value and zeros the gradient; an optional bias takes a tensor", "[compat]") {
  using namespace seed004;
  tensor<float, d_in, d_out> w(d_in{2}, d_out{3});
  for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = float(i) - 2.5f;
  dimsum::parameter<float, d_in, d_out> p(d_in{1}, d_out{1});
  p.grad.fill(7.0f);
  p = w;
  REQUIRE(p.value.extents() == w.extents());
  REQUIRE(p.grad.extents() == w.extents());
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(p.value.data()[i] == float(i) - 2.5f);
    CHECK(p.grad.data()[i] == 0.0f);
  }
  // An expression is evaluated into the value (0.1.0: weight = 2 * w).
  p = 2.0f * w;
  CHECK(p.value.data()[5] == 5.0f);

  nn::linear<float, d_in, d_out> lin(d_in{2}, d_out{3});
  tensor<float, d_out> b(d_out{3});
  b.fill(0.5f);
  lin.bias = b;  // 0.1.0's `lin.bias = tensor`: the optional holds parameter(b)
  REQUIRE(lin.bias.has_value());
  CHECK(lin.bias->value.data()[2] == 0.5f);
  CHECK(lin.bias->grad.data()[2] == 0.0f);
}
