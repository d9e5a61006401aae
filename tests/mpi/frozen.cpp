// Parameters frozen by their type on a mesh: dist::average_gradients and
// dist::sharded_adamw (ZeRO-1) leave a frozen_parameter out (no gradient, no
// moments, unchanged), and train the others as optim::adamw does in one
// process on the averaged gradients (each rank's gradient here is a plain
// function of its rank, so the average is known: the single-process run on
// that average, checked against a hand-written AdamW step).
#include <catch2/catch.hpp>

#include <mpi.h>

#include <cmath>
#include <string>

#include <dimsum/distributed/dist.hpp>
#include <dimsum/distributed/zero.hpp>
#include <dimsum/optim/adamw.hpp>
#include <dimsum/training.hpp>

namespace dist = dimsum::dist;

namespace {
DIMSUM_MESH_AXIS(data);
DIMSUM_DIM(feat);

struct model {
  BOOST_HANA_DEFINE_STRUCT(model, (dimsum::frozen_parameter<double, feat>, scale),
                           (dimsum::parameter<double, feat>, w));
};

model make_model() {
  model m;
  m.scale = dimsum::tensor<double, feat>(feat{4});
  m.w = dimsum::tensor<double, feat>(feat{4});
  for (std::size_t i = 0; i < 4; ++i) {
    m.scale.value.data()[i] = 1.0 + double(i);
    m.w.value.data()[i] = 0.5 - 0.25 * double(i);
  }
  return m;
}

// loss = sum(scale * w * w) * (rank + 1): d loss / d w = 2 scale w (rank + 1),
// whose average over p ranks is 2 scale w (p + 1) / 2.
void backward(model& m, int rank) {
  dimsum::nn::zero_grad(m);
  dimsum::grad::tape t;
  auto w = m.w(t);
  t.backward(dimsum::sum<feat>(m.scale(t) * w * w) * double(rank + 1));
}
}  // namespace

TEST_CASE("average_gradients and sharded_adamw skip a frozen_parameter", "[mpi][frozen]") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dist::mesh<data> mesh(MPI_COMM_WORLD, data{size});
  const dimsum::optim::adamw_options o{.lr = 0.1, .weight_decay = 0.01};

  model a = make_model();  // average_gradients, then optim::adamw
  backward(a, rank);
  dist::average_gradients<data>(mesh, a);
  const model start = make_model();
  for (std::size_t i = 0; i < 4; ++i) {
    const double want = 2.0 * start.scale.value.data()[i] * start.w.value.data()[i] * (size + 1) / 2.0;
    CHECK(a.w.grad.data()[i] == Approx(want).epsilon(1e-14));
  }
  dimsum::optim::adamw opt(o);
  opt.step(a);

  model b = make_model();  // sharded_adamw
  backward(b, rank);
  dist::sharded_adamw<data> zero(o);
  zero.step(mesh, b);
  CHECK(zero.state_elements() == 2 * ((4 + std::size_t(size) - 1) / std::size_t(size)));  // w's moments only

  for (std::size_t i = 0; i < 4; ++i) {
    // AdamW's first step by hand: m = g/10 / (1 - 0.9), v = g^2/1000 / (1 - 0.999), so the update is
    // lr * g / (|g| + eps) after the decay w *= 1 - lr * wd.
    const double w0 = start.w.value.data()[i];
    const double g = 2.0 * start.scale.value.data()[i] * w0 * (size + 1) / 2.0;
    const double want = w0 * (1 - 0.1 * 0.01) - 0.1 * g / (std::abs(g) + 1e-8);
    CHECK(a.w.value.data()[i] == Approx(want).epsilon(1e-12));
    CHECK(b.w.value.data()[i] == Approx(want).epsilon(1e-12));
    CHECK(a.scale.value.data()[i] == start.scale.value.data()[i]);
    CHECK(b.scale.value.data()[i] == start.scale.value.data()[i]);
  }
}
