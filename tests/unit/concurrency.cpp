// Independent expressions evaluated from several threads at once give the
// same results as evaluated serially (run under ThreadSanitizer in CI).
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include <dimsum/nn/nn.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);

using namespace dimsum;
using x_t = tensor<float, batch, posn, d_model>;

// One attention forward pass, all of it shared-nothing except the inputs.
tensor<float, batch, q_posn, d_model> forward(const x_t& x, const tensor<float, nheads, d_model, d_head>& w) {
  tensor<float, batch, posn, nheads, d_head> q = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
  auto scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
      rename<posn, q_posn>(q), rename<posn, k_posn>(q));
  tensor<float, batch, nheads, q_posn, k_posn> p = softmax<k_posn>(causal_mask<q_posn, k_posn>(scores * 0.5f, -1e9f));
  return einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head, nheads d_model d_head -> batch q_posn d_model">(
      p, rename<posn, k_posn>(q), w);
}
}  // namespace

TEST_CASE("concurrency: expressions on shared inputs from several threads", "[concurrency]") {
  auto x = x_t::random_normal(1, batch{3}, posn{9}, d_model{8});
  auto w = tensor<float, nheads, d_model, d_head>::random_normal(2, nheads{2}, d_model{8}, d_head{4});
  const auto serial = test::flat(forward(x, w));
  const int n = 4;
  std::vector<std::vector<double>> results(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) results[std::size_t(t)] = test::flat(forward(x, w));
    });
  for (auto& th : threads) th.join();
  for (const auto& r : results) CHECK(r == serial);
}
