// Compiling is passing: the gradient of every parameter of the example's
// transformer (examples/char_transformer_model.hpp) has exactly that
// parameter's dims in its type. Two ways: each member's gradient spelled
// out by hand with the dims the model declares (dimsum::gradient(p) and
// gradient<Ds...>(p), which states the dims, and the var the tape's watch
// gives), and every parameter found by walking the model's Hana-adapted
// structs at compile time (nested modules, the vector of blocks and the
// linear layers' optional biases included): its gradient is a tensor of
// its value type and dims.
#include <boost/hana.hpp>

#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../examples/char_transformer_model.hpp"

namespace static_train_gradient_types {

namespace hana = boost::hana;
using namespace char_lm;
using dimsum::gradient;
using dimsum::tensor;

/// The type of gradient(p) for a parameter lvalue of type P.
template <class P>
using gradient_t = std::remove_cvref_t<decltype(gradient(std::declval<P&>()))>;
/// The type of tape.watch(p).
template <class P>
using watched_t = decltype(std::declval<tape&>().watch(std::declval<P&>()));

/// Checks member M (a parameter of T with dims Ds...): gradient(p), the
/// gradient<Ds...>(p) that names them, and the watched var.
template <class M, class T, class... Ds>
constexpr bool has_gradient_dims() {
  static_assert(std::is_same_v<M, dimsum::parameter<T, Ds...>>, "the member is not the expected parameter");
  static_assert(std::is_same_v<gradient_t<M>, tensor<T, Ds...>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(gradient<Ds...>(std::declval<M&>()))>, tensor<T, Ds...>>);
  static_assert(std::is_same_v<decltype(std::declval<M&>().grad), tensor<T, Ds...>>);
  static_assert(std::is_same_v<watched_t<M>, dimsum::grad::var<T, Ds...>>);
  return true;
}

// By hand, every parameter of the model with the dims it declares.
static_assert(has_gradient_dims<decltype(model::tok_embed), float, vocab, d_model>());
static_assert(has_gradient_dims<decltype(model::pos_embed), float, ctx, d_model>());
static_assert(has_gradient_dims<decltype(model::W_U), float, d_model, vocab>());
static_assert(has_gradient_dims<decltype(model::b_U), float, vocab>());
static_assert(has_gradient_dims<decltype(layer_norm::weight), float, d_model>());
static_assert(has_gradient_dims<decltype(layer_norm::bias), float, d_model>());
static_assert(has_gradient_dims<decltype(causal_self_attention::W_Q), float, d_model, nheads, d_head>());
static_assert(has_gradient_dims<decltype(causal_self_attention::W_K), float, d_model, nheads, d_head>());
static_assert(has_gradient_dims<decltype(causal_self_attention::W_V), float, d_model, nheads, d_head>());
static_assert(has_gradient_dims<decltype(causal_self_attention::W_O), float, nheads, d_head, d_model>());
static_assert(has_gradient_dims<decltype(causal_self_attention::b_O), float, d_model>());
// The MLP's nn::linear layers: weights (out, in) as nn.Linear's, optional biases.
static_assert(has_gradient_dims<decltype(mlp::c_fc.weight), float, d_mlp, d_model>());
static_assert(has_gradient_dims<decltype(mlp::c_fc.bias)::value_type, float, d_mlp>());
static_assert(has_gradient_dims<decltype(mlp::c_proj.weight), float, d_model, d_mlp>());
static_assert(has_gradient_dims<decltype(mlp::c_proj.bias)::value_type, float, d_model>());
// The block's members, as nn::pre_norm_block names them.
static_assert(std::is_same_v<decltype(block::input_layernorm), layer_norm>);
static_assert(std::is_same_v<decltype(block::self_attn), causal_self_attention>);
static_assert(std::is_same_v<decltype(block::post_attention_layernorm), layer_norm>);
static_assert(std::is_same_v<decltype(block::mlp), mlp>);

// The order of dims is part of the type: W_O's gradient is not W_Q's.
static_assert(
    !std::is_same_v<gradient_t<decltype(causal_self_attention::W_O)>, gradient_t<decltype(causal_self_attention::W_Q)>>);

// By reflection: every parameter reached from the model.
template <class S>
struct is_vector : std::false_type {};
template <class E, class A>
struct is_vector<std::vector<E, A>> : std::true_type {};
template <class S>
struct is_optional : std::false_type {};
template <class E>
struct is_optional<std::optional<E>> : std::true_type {};

/// The number of parameter members reached from S (a vector's or an
/// optional's element type counted once), each checked: its gradient is
/// tensor<value_type, dims>.
template <class S>
constexpr std::size_t count_checked_parameters() {
  if constexpr (dimsum::is_parameter_v<S>) {
    static_assert(std::is_same_v<gradient_t<S>, typename S::tensor_type>);
    static_assert(std::is_same_v<gradient_t<S>, dimsum::tensor_for_t<typename S::value_type, typename S::dims>>);
    static_assert(std::is_same_v<watched_t<S>, dimsum::grad::var_for_t<typename S::value_type, typename S::dims>>);
    return 1;
  } else if constexpr (is_vector<S>::value || is_optional<S>::value) {
    return count_checked_parameters<typename S::value_type>();
  } else {
    static_assert(hana::Struct<S>::value, "a model member that is neither a parameter, a vector nor a Hana struct");
    return hana::unpack(hana::accessors<S>(), [](auto... member) {
      return (std::size_t{0} + ... +
              count_checked_parameters<std::remove_cvref_t<decltype(hana::second(member)(std::declval<S&>()))>>());
    });
  }
}

// tok_embed, pos_embed, W_U, b_U, ln_f (2), and one block's 13.
static_assert(count_checked_parameters<model>() == 4 + 2 + 13);

// The forward and the loss: logits (batch, posn, vocab), a rank-0 loss.
static_assert(std::is_same_v<decltype(forward(std::declval<tape&>(), std::declval<model&>(), std::declval<const ids_t&>())),
                             dimsum::grad::var<float, batch, posn, vocab>>);
static_assert(std::is_same_v<decltype(loss(std::declval<tape&>(), std::declval<model&>(), std::declval<const ids_t&>(),
                                           std::declval<const ids_t&>())),
                             dimsum::grad::var<float>>);

}  // namespace static_train_gradient_types
