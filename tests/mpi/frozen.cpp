// Parameters frozen by their type on a mesh: dist::average_gradients and
// dist::sharded_adamw (ZeRO-1) leave a frozen_parameter out (no gradient, no
// moments, unchanged), and train the others as optim::adamw does in one
// process on the averaged gradients (each rank's gradient here is a plain
// function of its rank, so the average is known: the single-process run on
// that average, checked against a hand-written AdamW step). A parameter
// frozen at run time (requires_grad false) is skipped by sharded_adamw as
// optim::adamw skips it: unchanged (value and moments), the others trained
// as optim::adamw trains them on the averaged gradients.
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

namespace {
DIMSUM_DIM(item);

struct three {
  BOOST_HANA_DEFINE_STRUCT(three, (dimsum::parameter<double, item>, a), (dimsum::parameter<double, item>, b),
                           (dimsum::parameter<double, item>, c));
};

three make_three() {
  three m;
  m.a = dimsum::tensor<double, item>(item{5});
  m.b = dimsum::tensor<double, item>(item{5});
  m.c = dimsum::tensor<double, item>(item{5});
  for (std::size_t i = 0; i < 5; ++i) {
    m.a.value.data()[i] = 0.3 + 0.1 * double(i);
    m.b.value.data()[i] = -0.2 + 0.15 * double(i);
    m.c.value.data()[i] = 0.7 - 0.2 * double(i);
  }
  return m;
}

// loss = sum(a b + c c c) * (rank + 1) + sum(a) * step: gradients that differ
// per rank and per step; a frozen b is a constant (no gradient).
void backward(three& m, int rank, int step) {
  dimsum::nn::zero_grad(m);
  dimsum::grad::tape t;
  auto a = m.a(t), b = m.b(t), c = m.c(t);
  t.backward(dimsum::sum<item>(a * b + c * c * c) * double(rank + 1) + dimsum::sum<item>(a) * double(step));
}
}  // namespace

TEST_CASE("sharded_adamw skips a parameter frozen at run time, as optim::adamw does", "[mpi][frozen]") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dist::mesh<data> mesh(MPI_COMM_WORLD, data{size});
  const dimsum::optim::adamw_options o{.lr = 0.05, .weight_decay = 0.1};

  three plain = make_three(), zero = make_three();  // b, in the middle, straddles the blocks of 2 and 4 ranks
  dimsum::optim::adamw opt(o);
  dist::sharded_adamw<data> sharded(o);
  dimsum::tensor<double, item> b_frozen;
  for (int step = 0; step < 4; ++step) {
    if (step == 1) {  // trained once (it has moments), then frozen
      plain.b.requires_grad = zero.b.requires_grad = false;
      b_frozen = zero.b.value;
      REQUIRE(dimsum::nn::parameter_count(zero) == 15);
    }
    backward(plain, rank, step);
    dist::average_gradients<data>(mesh, plain);
    opt.step(plain);
    backward(zero, rank, step);
    if (step >= 1) {
      for (std::size_t i = 0; i < 5; ++i) zero.b.grad.data()[i] = 100.0 + double(i);  // stale: not to be read
    }
    sharded.step(mesh, zero);
    INFO("step " << step);
    for (std::size_t i = 0; i < 5; ++i) {
      CHECK(zero.a.value.data()[i] == Approx(plain.a.value.data()[i]).epsilon(1e-12));
      CHECK(zero.c.value.data()[i] == Approx(plain.c.value.data()[i]).epsilon(1e-12));
      CHECK(zero.b.value.data()[i] == Approx(plain.b.value.data()[i]).epsilon(1e-12));
      if (step >= 1) CHECK(zero.b.value.data()[i] == b_frozen.data()[i]);  // no update, no weight decay
    }
  }
  // b's first step moved it: frozen afterwards, it differs from its start.
  const three start = make_three();
  CHECK(b_frozen.data()[0] != start.b.value.data()[0]);
}
