// Seed 001 (character embeddings and one head) against PyTorch: tokenizer,
// batch windows by slice and stack, token + position embeddings, the head's
// k, q, v, scores, tril mask, weights and output.
#include "golden.hpp"

#include <dimsum/nn/nn.hpp>
#include <dimsum/nn/seeds/seeds.hpp>

using dimsum::tensor;
namespace nn = dimsum::nn;

namespace seed001 {
DIMSUM_DIM(chr);
DIMSUM_DIM(vocab);
DIMSUM_DIM(block);
DIMSUM_DIM(n_embd);
DIMSUM_DIM(head_size);
DIMSUM_DIM(batch);
struct time_ : dimsum::dim<"time"> {};  // `time` would clash with ::time
DIMSUM_DIM(q_time);
DIMSUM_DIM(k_time);
}  // namespace seed001
using namespace seed001;

TEST_CASE("golden seed 001: tokenizer", "[golden][seed001]") {
  auto tok = nn::seeds::char_tokenizer::python_printable();
  CHECK(tok.size() == 100);
  auto ids = tok.encode<chr>("Attention is all you need");
  golden::check(ids, "seed001/text_ids.npy");
  CHECK(tok.decode(ids) == "Attention is all you need");
  tensor<std::int64_t, chr> bad(chr{1});
  bad.data()[0] = 100;
  REQUIRE_THROWS_AS(tok.decode(bad), dimsum::shape_error);
  REQUIRE_THROWS_AS(tok.encode<chr>("é"), dimsum::error);
}

TEST_CASE("golden seed 001: batches, embeddings and the single head", "[golden][seed001]") {
  const std::size_t block_size = 4;
  auto data = golden::load<tensor<std::int64_t, chr>>("seed001/text_ids.npy");
  auto ix = golden::load<tensor<std::int64_t, batch>>("seed001/batch_ix.npy");
  // x = torch.stack([data[i:i+block_size] for i in ix]), windows renamed to time.
  std::vector<tensor<std::int64_t, time_>> xs, ys;
  for (std::size_t b = 0; b < ix.size(); ++b) {
    const auto i = std::size_t(ix.data()[b]);
    xs.push_back(dimsum::rename<chr, time_>(dimsum::eval(dimsum::slice<chr>(data, i, i + block_size))));
    ys.push_back(dimsum::rename<chr, time_>(dimsum::eval(dimsum::slice<chr>(data, i + 1, i + block_size + 1))));
  }
  auto x_ids = dimsum::stack<batch>(xs);
  golden::check(x_ids, "seed001/x_ids.npy");
  golden::check(dimsum::stack<batch>(ys), "seed001/y_ids.npy");

  auto tok_table = nn::embedding<float, vocab, n_embd>::load(golden::fixture("seed001/token_embedding.npy"));
  auto pos_table = nn::embedding<float, vocab, n_embd>::load(golden::fixture("seed001/position_embedding.npy"));
  auto emb_tok = tok_table(x_ids);
  auto emb_pos = pos_table(dimsum::arange(time_{block_size}));
  golden::check(emb_tok, "seed001/emb_tok.npy");
  golden::check(emb_pos, "seed001/emb_pos.npy");
  tensor<float, batch, time_, n_embd> x = emb_tok + emb_pos;  // broadcast over batch by name
  golden::check(x, "seed001/x.npy");

  nn::seeds::char_head<float, n_embd, head_size> head(n_embd{5}, head_size{6});
  head.key.weight.value = golden::load<tensor<float, head_size, n_embd>>("seed001/key_weight.npy");
  head.query.weight.value = golden::load<tensor<float, head_size, n_embd>>("seed001/query_weight.npy");
  head.value.weight.value = golden::load<tensor<float, head_size, n_embd>>("seed001/value_weight.npy");
  nn::seeds::char_head<float, n_embd, head_size>::trace<batch, q_time, k_time> t;
  auto out = head.forward<time_, q_time, k_time>(x, &t);
  golden::check(t.k, "seed001/k.npy");
  golden::check(t.q, "seed001/q.npy");
  golden::check(t.v, "seed001/v.npy");
  golden::check(t.scores_raw, "seed001/scores_raw.npy");
  golden::check(t.scores, "seed001/scores.npy");
  golden::check(t.scores_masked, "seed001/scores_masked.npy");
  golden::check(t.weights, "seed001/weights.npy");
  golden::check(out, "seed001/out.npy");
  // tril as the seed builds it: ones kept where key <= query.
  auto ones = tensor<float, q_time, k_time>::ones(q_time{4}, k_time{4});
  golden::check(dimsum::causal_mask<q_time, k_time>(ones, 0.0f), "seed001/tril.npy");
  golden::check(dimsum::cast<float>(dimsum::tril(q_time{4}, k_time{4})), "seed001/tril.npy");

  // The head finds Batch by name: x laid out (n_embd, time, batch), lazily
  // permuted, gives PyTorch's numbers too.
  tensor<float, n_embd, time_, batch> x_permuted = x;
  decltype(t) t2;
  auto out2 = head.forward<time_, q_time, k_time>(x_permuted * 1.0f, &t2);
  golden::check(t2.weights, "seed001/weights.npy");
  golden::check(out2, "seed001/out.npy");
}

TEST_CASE("golden seed 001: an out-of-range id is an error", "[golden][seed001]") {
  nn::embedding<float, vocab, n_embd> table(vocab{100}, n_embd{5});
  tensor<std::int64_t, batch, time_> ids(batch{1}, time_{2});
  ids.data()[1] = 100;
  REQUIRE_THROWS_WITH(table(ids), Catch::Contains("id 100") && Catch::Contains("'vocab'") &&
                                      Catch::Contains("extent 100"));
  ids.data()[1] = -1;
  REQUIRE_THROWS_AS(table(ids), dimsum::shape_error);
}
