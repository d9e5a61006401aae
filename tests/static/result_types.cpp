// Compiling is passing: the dims (names and order) and value type of every
// operation's result, checked with the same traits users write.
#include <dimsum/dimsum.hpp>

#include <type_traits>

namespace static_tests {

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model, 30);
DIMSUM_DIM(nheads, 2);
DIMSUM_DIM(d_head, 10);

using namespace dimsum;

using x_t = tensor<float, batch, posn, d_model>;
using w_t = tensor<float, nheads, d_model, d_head>;
using wo_t = tensor<float, nheads, d_head, d_model>;
using b_t = tensor<float, nheads, d_head>;
using qkv_t = tensor<float, batch, posn, nheads, d_head>;
using scores_t = tensor<float, batch, nheads, q_posn, k_posn>;

x_t& x();
w_t& w();
wo_t& wo();
b_t& b();
qkv_t& q();
scores_t& scores();
tensor<bool, batch, k_posn>& pad();

// dims and dim lists
static_assert(d_model::static_extent == 30 && !posn::is_static);
static_assert(name_of<d_head> == "d_head");
static_assert(std::is_same_v<dims_of_t<x_t>, dim_list<batch, posn, d_model>>);
static_assert(std::is_same_v<union_t<dim_list<batch, posn>, dim_list<posn, d_model>>, dim_list<batch, posn, d_model>>);
static_assert(std::is_same_v<without_t<dim_list<batch, posn, d_model>, dim_list<posn>>, dim_list<batch, d_model>>);
// A static extent beats a dynamic one when the same dim meets itself.
static_assert(std::is_same_v<union_t<dim_list<dim<"d_model">>, dim_list<d_model>>, dim_list<d_model>>);
static_assert(contains_v<dim_list<batch, posn>, dim<"posn", 7>>);  // identity is the name

// einsum, string spelling: q, scores, z, out of seed 000
using q_expr = decltype(einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x(), w()));
static_assert(has_dims<q_expr, batch, posn, nheads, d_head>);
static_assert(std::is_same_v<value_type_of_t<q_expr>, float>);
using s_expr = decltype(einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
    rename<posn, q_posn>(q()), rename<posn, k_posn>(q())));
static_assert(has_dims<s_expr, batch, nheads, q_posn, k_posn>);
using z_expr = decltype(einsum<"batch k_posn nheads d_head, batch nheads q_posn k_posn -> batch q_posn nheads d_head">(
    rename<posn, k_posn>(q()), scores()));
static_assert(has_dims<z_expr, batch, q_posn, nheads, d_head>);
using out_expr = decltype(einsum<"batch posn nheads d_head, nheads d_head d_model -> batch posn d_model">(q(), wo()));
static_assert(has_dims<out_expr, batch, posn, d_model>);
// The output's dim types come from the operands (static extents carry over).
static_assert(std::is_same_v<dims_of_t<out_expr>, dim_list<batch, posn, d_model>>);
// Full contraction to rank 0, and a one-operand permutation.
static_assert(has_dims<decltype(einsum<"batch posn d_model, batch posn d_model -> ">(x(), x()))>);
static_assert(has_dims<decltype(einsum<"batch posn d_model -> d_model posn batch">(x())), d_model, posn, batch>);
// Three operands.
static_assert(has_dims<decltype(einsum<"batch posn d_model, nheads d_model d_head, nheads d_head -> batch posn">(
                           x(), w(), b())),
                       batch, posn>);

// einsum, named spelling: same result types.
static_assert(has_dims<decltype(einsum<batch, posn, nheads, d_head>(x(), w())), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(einsum<batch, posn, d_model>(q(), wo())), batch, posn, d_model>);
static_assert(std::is_same_v<dims_of_t<decltype(einsum<batch, posn, nheads, d_head>(x(), w()))>,
                             dims_of_t<q_expr>>);

// element-wise: left dims, then the right's new dims in the right's order
static_assert(has_dims<decltype(q() + b()), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(b() + q()), nheads, d_head, batch, posn>);
static_assert(has_dims<decltype(q() - b()), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(q() * b()), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(q() / 2.0f), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(2.0f * q()), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(-q()), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(exp(q())), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(sqrt(q())), batch, posn, nheads, d_head>);
static_assert(std::is_same_v<value_type_of_t<decltype(q() / 2.0)>, float>);  // a scalar adopts the tensor's type
static_assert(std::is_same_v<value_type_of_t<decltype(q() < b())>, bool>);
static_assert(has_dims<decltype(q() < b()), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(q() == 0.0f), batch, posn, nheads, d_head>);
static_assert(has_dims<decltype(outer(b(), x())), nheads, d_head, batch, posn, d_model>);
static_assert(has_dims<decltype(where(q() > 0.0f, q(), 0.0f)), batch, posn, nheads, d_head>);
static_assert(std::is_same_v<value_type_of_t<decltype(cast<double>(q()))>, double>);

// reductions: the reduced dims leave, the others keep their order
static_assert(has_dims<decltype(sum<d_head>(q())), batch, posn, nheads>);
static_assert(has_dims<decltype(sum<posn, nheads>(q())), batch, d_head>);
static_assert(has_dims<decltype(max<k_posn>(scores())), batch, nheads, q_posn>);
static_assert(has_dims<decltype(min<batch>(scores())), nheads, q_posn, k_posn>);
static_assert(has_dims<decltype(mean<d_model>(x())), batch, posn>);
static_assert(has_dims<decltype(sum<batch, posn, d_model>(x()))>);

// softmax and masks keep the dims
static_assert(has_dims<decltype(softmax<k_posn>(scores())), batch, nheads, q_posn, k_posn>);
static_assert(has_dims<decltype(causal_mask<q_posn, k_posn>(scores(), -1e9f)), batch, nheads, q_posn, k_posn>);
static_assert(has_dims<decltype(masked_fill(scores(), pad(), -1e9f)), batch, nheads, q_posn, k_posn>);
static_assert(has_dims<decltype(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores() / 3.0f, -1e9f))), batch, nheads,
                       q_posn, k_posn>);

// rename: free, and the dim keeps its place
static_assert(has_dims<decltype(rename<posn, q_posn>(q())), batch, q_posn, nheads, d_head>);
static_assert(std::is_same_v<decltype(rename<posn, q_posn>(q())), tensor_view<float, batch, q_posn, nheads, d_head>>);
static_assert(std::is_same_v<decltype(rename<posn, q_posn>(qkv_t{})), tensor<float, batch, q_posn, nheads, d_head>>);
static_assert(has_dims<decltype(rename<posn, q_posn>(q() + b())), batch, q_posn, nheads, d_head>);

// eval gives a tensor of the expression's dims
static_assert(std::is_same_v<decltype(eval(q() + b())), qkv_t>);
static_assert(std::is_same_v<decltype(eval(einsum<batch, posn, d_model>(q(), wo()))), x_t>);

// concepts for user signatures
static_assert(tensor_of<x_t, batch, posn, d_model>);
static_assert(tensor_of<const x_t&, batch, posn, d_model>);
static_assert(!tensor_of<x_t, posn, batch, d_model>);
static_assert(has_dims_unordered<x_t, posn, d_model, batch>);
static_assert(has_dim<x_t, posn>);
static_assert(!has_dim<x_t, k_posn>);
static_assert(typed_tensor_of<x_t, float, batch, posn, d_model>);
static_assert(rank_v<scores_t> == 4);

// the planner's classification of a two-operand contraction
using qk_plan = plan::contraction_plan<dim_list<batch, nheads, q_posn, k_posn>, dim_list<batch, q_posn, nheads, d_head>,
                                       dim_list<batch, k_posn, nheads, d_head>>;
static_assert(qk_plan::n_labels == 5);
static_assert(qk_plan::roles[0] == plan::role::batch && qk_plan::roles[1] == plan::role::batch);
static_assert(qk_plan::roles[2] == plan::role::m && qk_plan::roles[3] == plan::role::n);
static_assert(qk_plan::roles[4] == plan::role::k);
using out_plan = plan::contraction_plan<dim_list<batch, posn, d_model>, dim_list<batch, posn, nheads, d_head>,
                                        dim_list<nheads, d_head, d_model>>;
static_assert(out_plan::count(plan::role::m) == 2 && out_plan::count(plan::role::n) == 1 &&
              out_plan::count(plan::role::k) == 2 && out_plan::count(plan::role::batch) == 0);

}  // namespace static_tests
