// Compiling is passing: a dim may be named like a C or C++ library function
// (index, time, exp, log, ...) or like a dimsum function (sum, max, softmax,
// einsum, tensor, ...). The tags live in a namespace, as every dim should:
// inside it the tag hides the global C function of the same name (at global
// scope the function would hide the struct, C++'s rule for a class and a
// function of one name; see docs/reference.md, DIMSUM_DIM).
#include <dimsum/dimsum.hpp>
#include <dimsum/nn/nn.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <strings.h>
#include <type_traits>

namespace static_dim_names {

// Names of C library functions declared at global scope by the headers above.
DIMSUM_DIM(index);
DIMSUM_DIM(time);
DIMSUM_DIM(exp);
DIMSUM_DIM(log);
DIMSUM_DIM(abs);
DIMSUM_DIM(rand, 4);
DIMSUM_DIM(remove);
DIMSUM_DIM(floor);
// Names of dimsum functions and types.
DIMSUM_DIM(sum);
DIMSUM_DIM(max);
DIMSUM_DIM(softmax);
DIMSUM_DIM(einsum);
DIMSUM_DIM(tensor, 3);
DIMSUM_DIM(map);
DIMSUM_DIM(gelu);
DIMSUM_DIM(dims);
DIMSUM_DIM(rank);
DIMSUM_DIM(size);
DIMSUM_DIM(data);

using dimsum::has_dims;

using t1 = dimsum::tensor<float, index, time, exp, log>;
using t2 = dimsum::tensor<double, abs, rand, remove, floor>;
using t3 = dimsum::tensor<float, sum, max, softmax, einsum, tensor>;
using t4 = dimsum::tensor<float, map, gelu, dims, rank, size, data>;

t1& a();
t2& b();
t3& c();
t4& d();

static_assert(has_dims<t1, index, time, exp, log>);
static_assert(std::string_view(index::name.view()) == "index");
static_assert(std::string_view(dimsum::name_of<exp>) == "exp");
static_assert(rand::static_extent == 4 && tensor::is_static);

// Reductions, element-wise operations, softmax, einsum (string and named
// forms) and rename by these names.
static_assert(has_dims<decltype(dimsum::sum<time>(a())), index, exp, log>);
static_assert(has_dims<decltype(dimsum::max<index, log>(a())), time, exp>);
static_assert(has_dims<decltype(dimsum::logsumexp<exp>(a())), index, time, log>);
static_assert(has_dims<decltype(dimsum::softmax<time>(a())), index, time, exp, log>);
static_assert(has_dims<decltype(dimsum::exp(a()) + dimsum::log(a())), index, time, exp, log>);
static_assert(has_dims<decltype(dimsum::gelu(c()) * dimsum::sum<softmax>(c())), sum, max, softmax, einsum, tensor>);
static_assert(has_dims<decltype(dimsum::map([](float x) { return x; }, d())), map, gelu, dims, rank, size, data>);
static_assert(has_dims<decltype(dimsum::einsum<"index time exp log, sum max softmax einsum tensor -> time tensor">(a(), c())),
                       time, tensor>);
static_assert(has_dims<decltype(dimsum::einsum<time, einsum>(a(), c())), time, einsum>);
static_assert(has_dims<decltype(dimsum::rename<time, data>(a())), index, data, exp, log>);

// A dim declared inside a function works the same way.
inline void local_dims() {
  DIMSUM_DIM(index);
  DIMSUM_DIM(exp, 2);
  static_assert(has_dims<dimsum::tensor<float, index, exp>, index, exp>);
}

}  // namespace static_dim_names

// Outside the namespace, the tags are reached by their qualified names.
static_assert(dimsum::has_dims<dimsum::tensor<float, static_dim_names::index, static_dim_names::time>,
                               static_dim_names::index, static_dim_names::time>);
