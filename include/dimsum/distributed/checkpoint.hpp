#pragma once
/// \file
/// Sharded checkpoints: each rank writes the blocks it holds, and a
/// checkpoint saved on N ranks loads on M ranks (any mesh whose axes split
/// the dims evenly) or into one process (the full tensors, no MPI).
///
///     dist::save_checkpoint(m, "ckpt", dist::entry("W_Q", W_Q), dist::entry("W_O", W_O));
///     auto W_Q = dist::load<sharded<tensor<float, nheads, d_model, d_head>, split<nheads, model>>>(m2, "ckpt", "W_Q");
///     auto full = dist::load_full<tensor<float, nheads, d_model, d_head>>("ckpt", "W_Q");
///
/// Layout of the directory (docs/design.md, "Sharded checkpoints"):
///
///     dimsum-checkpoint.json                      the index: generation, ranks, every tensor's dtype, dims,
///                                                 global shape and blocks (file, offset, shape)
///     g<G>-rank<R>-of-<N>.safetensors             rank R's blocks of generation G, keyed by name, with
///                                                 "dimsum.dims.<name>" and "dimsum.offset.<name>" metadata
///
/// A save writes generation G + 1's rank files, agrees across ranks that
/// every file was written, and only then replaces the index (atomically:
/// temporary file, fsync, rename); the old generation's files are removed
/// after that. A save that fails on any rank removes the new files and
/// leaves the old checkpoint as it was, and throws on every rank. The
/// directory must be visible to every rank (a shared filesystem).

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <dimsum/distributed/mesh.hpp>
#include <dimsum/distributed/sharded.hpp>
#include <dimsum/io/safetensors.hpp>
#include <dimsum/nn/module.hpp>

namespace dimsum::dist {

/// A checkpoint that cannot be saved or loaded as asked: a missing tensor,
/// another dtype, a file that disagrees with the index, blocks that do not
/// cover the tensor. Dims and extents that disagree are a `shape_error`.
/// Thrown on every rank of a collective save or load.
struct checkpoint_error : dist_error {
  using dist_error::dist_error;
};

/// Operation names in diagnostics.
struct op_save {};
struct op_load {};

/// One named tensor of a checkpoint: a plain tensor (replicated: every rank
/// holds all of it) or a sharded one.
template <class X>
struct named_entry {
  std::string name;
  const X* value;
};
template <class X>
named_entry<X> entry(std::string name, const X& x) {
  return {std::move(name), &x};
}

/// The name of a checkpoint's index file.
inline constexpr std::string_view checkpoint_index_name = "dimsum-checkpoint.json";

namespace detail {

/// Placements of a tensor or sharded type (a plain tensor has none).
template <class X>
struct stored {
  using tensor_type = X;
  using placements = std::tuple<>;
};
template <class Tn, class... Ps>
struct stored<sharded<Tn, Ps...>> {
  using tensor_type = Tn;
  using placements = std::tuple<Ps...>;
};

/// For each dim of L: the index into the mesh's axes it is split over, or -1.
template <class L, class Placements>
std::vector<int> split_axes(const mesh_comms& c) {
  using I = placement_info<Placements>;
  std::vector<int> out(L::size, -1);
  for (std::size_t d = 0; d < L::size; ++d)
    for (std::size_t i = 0; i < I::size; ++i)
      if (I::splits[i] && I::dims[i] == L::names[d]) out[d] = static_cast<int>(c.axis_index(I::axes[i]));
  return out;
}

/// The coordinates of mesh rank r.
inline std::vector<int> coords_of(const mesh_comms& c, int r) {
  std::vector<int> coords(c.sizes.size(), 0);
  check_mpi(MPI_Cart_coords(c.cart, r, static_cast<int>(coords.size()), coords.data()), "MPI_Cart_coords");
  return coords;
}

/// A box of a tensor: offset and extents per dim.
struct box {
  std::vector<std::size_t> offset, shape;
};

/// The block that the rank at `coords` holds of a tensor with global extents
/// `global` whose dim d is split over axis `axes[d]` (-1: not split).
inline box block_at(const std::vector<std::size_t>& global, const std::vector<int>& axes, const mesh_comms& c,
                    const std::vector<int>& coords) {
  box b{std::vector<std::size_t>(global.size(), 0), global};
  for (std::size_t d = 0; d < global.size(); ++d)
    if (axes[d] >= 0) {
      const auto parts = static_cast<std::size_t>(c.sizes[static_cast<std::size_t>(axes[d])]);
      b.shape[d] = global[d] / parts;
      b.offset[d] = b.shape[d] * static_cast<std::size_t>(coords[static_cast<std::size_t>(axes[d])]);
    }
  return b;
}

/// Whether the rank at `coords` writes its block: it is at coordinate 0 of
/// every mesh axis the tensor is not split over (one copy of each block).
inline bool writes_block(const std::vector<int>& axes, const std::vector<int>& coords) {
  for (std::size_t a = 0; a < coords.size(); ++a)
    if (coords[a] != 0 && std::find(axes.begin(), axes.end(), static_cast<int>(a)) == axes.end()) return false;
  return true;
}

inline std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) (out += i ? sep : "") += parts[i];
  return out;
}
inline std::string join_sizes(const std::vector<std::size_t>& v) {
  std::vector<std::string> s;
  for (std::size_t x : v) s.push_back(std::to_string(x));
  return join(s, " ");
}

template <class L>
std::vector<std::string> dim_names() {
  return std::vector<std::string>(L::names.begin(), L::names.end());
}

inline std::string rank_file_name(std::uint64_t generation, int rank, int ranks) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "g%llu-rank%05d-of-%05d.safetensors", static_cast<unsigned long long>(generation),
                rank, ranks);
  return buf;
}

/// The parsed index of a checkpoint directory.
inline nlohmann::json read_index(const std::string& dir) {
  const auto path = std::filesystem::path(dir) / checkpoint_index_name;
  std::ifstream in(path);
  if (!in) throw checkpoint_error("checkpoint '" + dir + "' has no index '" + path.string() + "'");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw checkpoint_error("checkpoint '" + dir + "': the index is not valid JSON: " + e.what());
  }
  const auto bad = [&](const std::string& what) {
    throw checkpoint_error("checkpoint '" + dir + "': the index is not a dimsum sharded checkpoint index (" + what + ")");
  };
  if (!j.is_object() || !j.contains("format") || j["format"] != "dimsum-sharded-checkpoint") bad("format");
  if (!j.contains("generation") || !j["generation"].is_number_unsigned()) bad("generation");
  if (!j.contains("ranks") || !j["ranks"].is_number_unsigned()) bad("ranks");
  if (!j.contains("files") || !j["files"].is_array()) bad("files");
  for (const auto& f : j["files"])
    if (!f.is_string() || f.get<std::string>().find('/') != std::string::npos || f.get<std::string>().empty() ||
        f.get<std::string>()[0] == '.')
      bad("a file that is not a plain name in the directory");
  if (!j.contains("tensors") || !j["tensors"].is_object()) bad("tensors");
  const auto sizes = [](const nlohmann::json& a, std::size_t rank) {
    if (!a.is_array() || a.size() != rank) return false;
    for (const auto& x : a)
      if (!x.is_number_unsigned()) return false;
    return true;
  };
  for (auto it = j["tensors"].begin(); it != j["tensors"].end(); ++it) {
    const auto& t = it.value();
    const std::string name = "tensor '" + it.key() + "'";
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("dims") ||
        !t["dims"].is_array() || !t.contains("shape") || !t.contains("blocks") || !t["blocks"].is_array())
      bad(name + " lacks dtype, dims, shape or blocks");
    for (const auto& d : t["dims"])
      if (!d.is_string()) bad(name + ": a dim name that is not a string");
    const std::size_t rank = t["dims"].size();
    if (!sizes(t["shape"], rank)) bad(name + ": shape does not have one extent per dim");
    for (const auto& b : t["blocks"]) {
      if (!b.is_object() || !b.contains("file") || !b["file"].is_number_unsigned() ||
          b["file"].get<std::size_t>() >= j["files"].size() || !b.contains("offset") || !sizes(b["offset"], rank) ||
          !b.contains("shape") || !sizes(b["shape"], rank))
        bad(name + ": a block without a listed file, or without an offset and shape per dim");
      for (std::size_t d = 0; d < rank; ++d)
        if (b["offset"][d].get<std::size_t>() + b["shape"][d].get<std::size_t>() > t["shape"][d].get<std::size_t>())
          bad(name + ": a block outside the tensor");
    }
  }
  return j;
}

/// Runs f on every rank of `comm`; if it throws on any rank, every rank
/// throws: a shape_error if the first failing rank's error was one, a
/// checkpoint_error otherwise, naming `what` and the failing rank. No rank
/// is left waiting in a later collective.
template <class F>
void on_every_rank(MPI_Comm comm, const std::string& what, F&& f) {
  int me = 0, size = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &size);
  std::string message;
  int kind = 0;  // 1 shape_error, 2 other
  try {
    f();
  } catch (const shape_error& e) {
    message = e.what();
    kind = 1;
  } catch (const std::exception& e) {
    message = e.what();
    kind = 2;
  }
  // the message goes after this layer's own "dimsum: dist: " prefix: drop the inner one
  for (std::string_view prefix : {"dimsum: ", "dist: "})
    if (message.starts_with(prefix)) message.erase(0, prefix.size());
  const auto start = clock::now();
  arrive(comm, comm, what, code_checkpoint, {}, {}, start);
  const int mine = kind ? me : size;
  int first = size;
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm, &req), "MPI_Iallreduce (error agreement)");
  finish(req, comm, what, start);
  if (first == size) return;
  int len = static_cast<int>(message.size());
  std::array<int, 2> head{kind, len};
  check_mpi(MPI_Ibcast(head.data(), 2, MPI_INT, first, comm, &req), "MPI_Ibcast (error)");
  finish(req, comm, what, start);
  message.resize(static_cast<std::size_t>(head[1]));
  check_mpi(MPI_Ibcast(message.data(), head[1], MPI_CHAR, first, comm, &req), "MPI_Ibcast (error message)");
  finish(req, comm, what, start);
  const std::string full = what + " failed on rank " + std::to_string(first) + " of " + std::to_string(size) + ": " + message;
  if (head[0] == 1) throw shape_error("dist: " + full);
  throw checkpoint_error(full);
}

/// One line per parameter of `module`, in visiting order: its dotted name,
/// dims and extents, tab-separated.
template <class M>
std::vector<std::string> parameter_lines(const M& module) {
  std::vector<std::string> lines;
  nn::for_each_parameter(module, [&](const std::string& name, const auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    lines.push_back(name + "\t" + nn::parameter_dim_names<P>(", ") + "\t" + nn::detail::extents_string(p.value.extents()));
  });
  return lines;
}

/// Checks, collectively over `comm`, that every rank holds a module with the
/// same parameters (names, dims, extents, in the same order): one
/// all-reduce of a 64-bit hash of them when they agree; when they do not,
/// every rank gathers the others' lists and throws the same `shape_error`
/// naming the first parameter that differs and the ranks on each side.
/// Every wait is bounded by the deadline.
template <class M>
void check_same_parameters(MPI_Comm comm, const std::string& what, const M& module) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (size == 1) return;
  const auto lines = parameter_lines(module);
  const std::string text = join(lines, "\n");
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (char ch : text) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  h = (h ^ lines.size()) * 1099511628211ull;
  const auto start = clock::now();
  arrive(comm, comm, what, code_checkpoint, {}, {}, start);
  std::array<std::uint64_t, 2> mine{h, ~h}, most{};
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(mine.data(), most.data(), 2, MPI_UINT64_T, MPI_MAX, comm, &req),
            "MPI_Iallreduce (parameter hash)");
  finish(req, comm, what, start);
  if (most[0] == ~most[1]) return;  // the largest hash is the smallest: all equal
  // They differ: every rank gathers every rank's list and finds the same first difference.
  const int len = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  check_mpi(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm, &req), "MPI_Iallgather (parameter lists)");
  finish(req, comm, what, start);
  int total = 0;
  for (std::size_t r = 0; r < lens.size(); ++r) offsets[r] = total, total += lens[r];
  std::string all(static_cast<std::size_t>(total), '\0');
  check_mpi(MPI_Iallgatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, comm, &req),
            "MPI_Iallgatherv (parameter lists)");
  finish(req, comm, what, start);
  std::vector<std::vector<std::string>> lists(static_cast<std::size_t>(size));
  for (std::size_t r = 0; r < lists.size(); ++r) {
    const std::string t = all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lens[r]));
    for (std::size_t at = 0; !t.empty();) {
      const std::size_t end = std::min(t.find('\n', at), t.size());
      lists[r].push_back(t.substr(at, end - at));
      if (end == t.size()) break;
      at = end + 1;
    }
  }
  const auto line_at = [&](std::size_t r, std::size_t i) { return i < lists[r].size() ? lists[r][i] : std::string(); };
  const auto field = [](const std::string& line, int k) {  // 0 name, 1 dims, 2 extents
    std::size_t a = 0;
    for (int j = 0; j < k; ++j) a = line.find('\t', a) + 1;
    return line.substr(a, line.find('\t', a) - a);
  };
  const auto ranks_text = [](const std::vector<int>& rs) {
    std::vector<std::string> s;
    for (int r : rs) s.push_back(std::to_string(r));
    return std::string(rs.size() > 1 ? "ranks " : "rank ") + join(s, ", ");
  };
  for (std::size_t i = 0;; ++i) {
    std::vector<int> same, other;
    std::string theirs;
    for (int r = 0; r < size; ++r) {
      const std::string l = line_at(static_cast<std::size_t>(r), i);
      if (l == line_at(0, i)) {
        same.push_back(r);
      } else if (other.empty() || l == theirs) {
        theirs = l;
        other.push_back(r);
      }
    }
    if (other.empty()) continue;
    const std::string ours = line_at(0, i);
    const auto shown = [&](const std::string& l) {
      return "(" + field(l, 1) + ") with extents (" + field(l, 2) + ")";
    };
    std::string message = "dist: " + what + ": the ranks hold different modules: ";
    if (!ours.empty() && !theirs.empty() && field(ours, 0) == field(theirs, 0))
      message += "parameter '" + field(ours, 0) + "' is " + shown(ours) + " on " + ranks_text(same) + " but " +
                 shown(theirs) + " on " + ranks_text(other);
    else {
      const auto named = [&](const std::string& l, const std::vector<int>& rs) {
        return l.empty() ? "none on " + ranks_text(rs) + " (" + std::to_string(lists[static_cast<std::size_t>(rs[0])].size()) + " parameters)"
                         : "'" + field(l, 0) + "' " + shown(l) + " on " + ranks_text(rs);
      };
      message += "parameter " + std::to_string(i) + " is " + named(ours, same) + " but " + named(theirs, other);
    }
    throw shape_error(message + "; every rank must hold the same module");
  }
}

/// Throws `checkpoint_error` "<what> missing 'a', 'b' unexpected 'c'"
/// unless the checkpoint's names `have` are exactly `want`.
inline void check_names(const std::string& what, const std::set<std::string>& want, const std::set<std::string>& have) {
  std::string missing, unexpected;
  for (const auto& n : want)
    if (!have.count(n)) missing += (missing.empty() ? "'" : ", '") + n + "'";
  for (const auto& n : have)
    if (!want.count(n)) unexpected += (unexpected.empty() ? "'" : ", '") + n + "'";
  if (!missing.empty() || !unexpected.empty())
    throw checkpoint_error(what + (missing.empty() ? "" : " missing " + missing) +
                           (unexpected.empty() ? "" : " unexpected " + unexpected));
}

/// CRC-32 (IEEE 802.3, as zlib's crc32) of a byte range: the checksum each
/// saved block carries in its rank file's metadata.
inline std::uint32_t crc32(const std::byte* data, std::size_t n) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ static_cast<std::uint32_t>(data[i])) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
inline std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

/// Copies the part of `src` (a C-order block at `sb`, little-endian bytes)
/// that lies in `db` into `dst` (C-order, box `db`). Returns the number of
/// elements copied.
template <class T>
std::size_t copy_overlap(const std::byte* src, const box& sb, T* dst, const box& db) {
  const std::size_t r = sb.shape.size();
  std::vector<std::size_t> lo(r), hi(r);
  for (std::size_t d = 0; d < r; ++d) {
    lo[d] = std::max(sb.offset[d], db.offset[d]);
    hi[d] = std::min(sb.offset[d] + sb.shape[d], db.offset[d] + db.shape[d]);
    if (lo[d] >= hi[d]) return 0;
  }
  if (r == 0) {
    io::detail::copy_le_bytes(src, dst, 1);
    return 1;
  }
  std::vector<std::size_t> idx = lo;  // global index; the last dim runs in one copy
  const std::size_t run = hi[r - 1] - lo[r - 1];
  std::size_t copied = 0;
  while (true) {
    std::size_t so = 0, dof = 0;
    for (std::size_t d = 0; d < r; ++d) {
      so = so * sb.shape[d] + (idx[d] - sb.offset[d]);
      dof = dof * db.shape[d] + (idx[d] - db.offset[d]);
    }
    io::detail::copy_le_bytes(src + so * sizeof(T), dst + dof, run);
    copied += run;
    // Next index over dims 0 .. r-2 (an odometer); done when it wraps.
    std::size_t d = r - 1;
    bool wrapped = true;
    while (d-- > 0) {
      if (++idx[d] < hi[d]) {
        wrapped = false;
        break;
      }
      idx[d] = lo[d];
    }
    if (wrapped) return copied;
  }
}

/// Checks that a tensor of the index fits the C++ type Tn (dtype, dims in
/// order, static extents) and returns its global extents.
template <class Tn>
std::vector<std::size_t> checked_global_shape(const std::string& dir, const std::string& name, const nlohmann::json& t) {
  using T = typename Tn::value_type;
  using L = typename Tn::dims;
  const auto dtype = t.at("dtype").get<std::string>();
  if (dtype != safetensors_dtype_v<T>)
    throw checkpoint_error("checkpoint '" + dir + "': tensor '" + name + "' is " + dtype + " in the checkpoint but " +
                           std::string(safetensors_dtype_v<T>) + " in the type loading it");
  const auto dims = t.at("dims").get<std::vector<std::string>>();
  const auto shape = t.at("shape").get<std::vector<std::size_t>>();
  if (dims != dim_names<L>())
    throw shape_error("checkpoint '" + dir + "': tensor '" + name + "' has dims (" + join(dims, " ") +
                      ") in the checkpoint but (" + join(dim_names<L>(), " ") + ") in the type loading it");
  if (shape.size() != L::size) throw checkpoint_error("checkpoint '" + dir + "': tensor '" + name + "' has a bad shape");
  for (std::size_t d = 0; d < L::size; ++d)
    if (L::static_extents[d] != dynamic && L::static_extents[d] != shape[d])
      throw shape_error("checkpoint '" + dir + "': tensor '" + name + "': dim '" + std::string(L::names[d]) +
                        "' has extent " + std::to_string(shape[d]) + " in the checkpoint but " +
                        std::to_string(L::static_extents[d]) + " in the type loading it");
  return shape;
}

}  // namespace detail

/// Reads a checkpoint directory, caching its index and the rank files it
/// has read, so that loading many tensors reads each file once. Loading
/// into a sharded type is collective over the mesh (`load`); loading a full
/// tensor in one process (`full`) needs no MPI.
class checkpoint_reader {
 public:
  explicit checkpoint_reader(std::string dir) : dir_(std::move(dir)) {}

  /// The names of the tensors in the checkpoint, sorted.
  std::vector<std::string> names() {
    std::vector<std::string> out;
    for (auto it = index().at("tensors").begin(); it != index().at("tensors").end(); ++it) out.push_back(it.key());
    return out;
  }
  /// The number of ranks that saved the checkpoint.
  int saved_ranks() { return index().at("ranks").get<int>(); }

  /// The whole of tensor `name` as Tn (a `tensor<T, Ds...>`), in this
  /// process. Throws `checkpoint_error` (no such tensor, another dtype, a
  /// file that disagrees with the index) or `shape_error` (other dims,
  /// another static extent), and `safetensors_error` for a bad file.
  template <class Tn>
  Tn full(const std::string& name) {
    const auto shape = detail::checked_global_shape<Tn>(dir_, name, tensor_entry(name));
    std::array<std::size_t, Tn::rank> ext{};
    if constexpr (Tn::rank != 0) std::copy(shape.begin(), shape.end(), ext.begin());  // (a scalar has no extents)
    Tn out = Tn::from_extents(ext);
    fill(name, out.data(), detail::box{std::vector<std::size_t>(shape.size(), 0), shape});
    return out;
  }

  /// Elements [offset, offset + count) of the one-dim tensor `name` of the
  /// checkpoint into `dst`, read from whichever blocks hold them, checked
  /// as `full` checks a `tensor<T, D>`. No MPI.
  template <class T, class D>
  void read_range(const std::string& name, std::size_t offset, std::size_t count, T* dst) {
    const auto shape = detail::checked_global_shape<tensor<T, D>>(dir_, name, tensor_entry(name));
    if (offset + count > shape[0])
      throw checkpoint_error("checkpoint '" + dir_ + "': tensor '" + name + "' has " + std::to_string(shape[0]) +
                             " elements, not the " + std::to_string(offset + count) + " asked for");
    if (count != 0) fill(name, dst, detail::box{{offset}, {count}});
  }

  /// The index's entry of tensor `name` (its dtype, dims, shape, blocks and
  /// any fields the saver added); `checkpoint_error` if there is none.
  const nlohmann::json& entry_of(const std::string& name) { return tensor_entry(name); }

  /// Tensor `name` as S on this rank of mesh m: a `sharded<tensor<...>,
  /// split<D, A>...>` gets its block of every split dim, a plain tensor all
  /// of it. Collective over the mesh: an error on any rank (those of
  /// `full`, and a split dim whose extent does not divide by its axis's
  /// size) is thrown on every rank, naming the rank where it happened.
  /// A partial-sum type is a compile error.
  template <class S, axis... Axes>
  auto load(const mesh<Axes...>& m, const std::string& name) {
    using Ps = typename detail::stored<S>::placements;
    using Parts = typename detail::filter<detail::keep_partials, Ps>::type;
    if constexpr (std::tuple_size_v<Parts> != 0) {
      detail::report_partial<op_load, Ps>();
      return invalid_expression{};
    } else if constexpr (!detail::no_static_split_in<Ps>) {
      detail::report_static_split_in<Ps>();
      return invalid_expression{};
    } else {
      using Tn = typename detail::stored<S>::tensor_type;
      using L = typename Tn::dims;
      std::array<std::size_t, Tn::rank> ext{};
      Tn local;
      detail::on_every_rank(m.comm(), "loading '" + name + "' from checkpoint '" + dir_ + "'", [&] {
        const auto shape = detail::checked_global_shape<Tn>(dir_, name, tensor_entry(name));
        const auto& c = *m.comms();
        const auto axes = detail::split_axes<L, Ps>(c);
        for (std::size_t d = 0; d < L::size; ++d)
          if (axes[d] >= 0 && shape[d] % static_cast<std::size_t>(c.sizes[static_cast<std::size_t>(axes[d])]) != 0)
            throw shape_error("checkpoint '" + dir_ + "': tensor '" + name + "': dim '" + std::string(L::names[d]) +
                              "' of extent " + std::to_string(shape[d]) + " does not split evenly over mesh axis '" +
                              c.names[static_cast<std::size_t>(axes[d])] + "' of size " +
                              std::to_string(c.sizes[static_cast<std::size_t>(axes[d])]));
        const detail::box want = detail::block_at(shape, axes, c, c.coords);
        std::copy(want.shape.begin(), want.shape.end(), ext.begin());
        local = Tn::from_extents(ext);
        fill(name, local.data(), want);
      });
      if constexpr (is_sharded_v<S>)
        return S(std::move(local), m.comms());
      else
        return local;
    }
  }

 private:
  const nlohmann::json& index() {
    if (!index_) index_ = std::make_unique<nlohmann::json>(detail::read_index(dir_));
    return *index_;
  }
  const nlohmann::json& tensor_entry(const std::string& name) {
    const auto& ts = index().at("tensors");
    if (!ts.contains(name))
      throw checkpoint_error("checkpoint '" + dir_ + "' has no tensor '" + name + "' (it has: " +
                             detail::join(names(), ", ") + ")");
    return ts.at(name);
  }
  const safetensors_contents& file(std::size_t i) {
    auto it = files_.find(i);
    if (it != files_.end()) return it->second;
    const auto& list = index().at("files");
    if (i >= list.size()) throw checkpoint_error("checkpoint '" + dir_ + "': the index names a file it does not list");
    const auto path = (std::filesystem::path(dir_) / list.at(i).get<std::string>()).string();
    return files_.emplace(i, read_safetensors(path)).first->second;
  }
  /// Fills `dst` (C order, box `want`) from every block that overlaps it.
  template <class T>
  void fill(const std::string& name, T* dst, const detail::box& want) {
    std::size_t need = 1, got = 0;
    for (std::size_t e : want.shape) need *= e;
    for (const auto& b : tensor_entry(name).at("blocks")) {
      detail::box sb{b.at("offset").get<std::vector<std::size_t>>(), b.at("shape").get<std::vector<std::size_t>>()};
      if (sb.offset.size() != want.shape.size() || sb.shape.size() != want.shape.size())
        throw checkpoint_error("checkpoint '" + dir_ + "': tensor '" + name + "' has a block of another rank");
      bool overlaps = true;
      for (std::size_t d = 0; d < sb.shape.size(); ++d)
        overlaps = overlaps && sb.offset[d] < want.offset[d] + want.shape[d] && want.offset[d] < sb.offset[d] + sb.shape[d];
      if (!overlaps) continue;
      const auto& f = file(b.at("file").get<std::size_t>());
      auto t = f.tensors.find(name);
      if (t == f.tensors.end() || t->second.shape != sb.shape || t->second.dtype != safetensors_dtype_v<T>)
        throw checkpoint_error("checkpoint '" + dir_ + "': the rank file " + index().at("files").at(b.at("file").get<std::size_t>()).get<std::string>() +
                               " does not hold tensor '" + name + "' as the index says (block of shape " +
                               detail::join_sizes(sb.shape) + ")");
      verify(b.at("file").get<std::size_t>(), f, name, t->second);
      got += detail::copy_overlap(t->second.data.data(), sb, dst, want);
    }
    if (got != need)
      throw checkpoint_error("checkpoint '" + dir_ + "': the blocks of tensor '" + name + "' cover " +
                             std::to_string(got) + " of the " + std::to_string(need) + " elements needed");
  }

  /// Checks a block against the CRC-32 its rank file records (once per
  /// block; files saved without checksums are read as they are).
  void verify(std::size_t file_index, const safetensors_contents& f, const std::string& name, const safetensors_tensor& t) {
    if (!verified_.insert({file_index, name}).second) return;
    const auto it = f.metadata.find("dimsum.crc32." + name);
    if (it == f.metadata.end()) return;
    const std::string got = detail::hex32(detail::crc32(t.data.data(), t.data.size()));
    if (got != it->second)
      throw checkpoint_error("checkpoint '" + dir_ + "': tensor '" + name + "': its block in rank file " +
                             index().at("files").at(file_index).get<std::string>() + " fails its checksum (crc32 " + got +
                             ", saved as " + it->second + "): the file is damaged");
  }

  std::string dir_;
  std::set<std::pair<std::size_t, std::string>> verified_;
  std::unique_ptr<nlohmann::json> index_;
  std::map<std::size_t, safetensors_contents> files_;
};

/// Tensor `name` of the checkpoint in `dir` on this rank of mesh m (see
/// `checkpoint_reader::load`; use a reader to load many tensors).
template <class S, axis... Axes>
auto load(const mesh<Axes...>& m, const std::string& dir, const std::string& name) {
  checkpoint_reader r(dir);
  return r.load<S>(m, name);
}

/// The whole of tensor `name` of the checkpoint in `dir`, in one process.
template <class Tn>
Tn load_full(const std::string& dir, const std::string& name) {
  checkpoint_reader r(dir);
  return r.template full<Tn>(name);
}

namespace detail {
/// What a save needs of one entry: its name, dtype, dims, global extents,
/// split axes and local block.
struct save_item {
  std::string name, dtype;
  std::vector<std::string> dims;
  std::vector<std::size_t> global;
  std::vector<int> axes;
  safetensors_tensor local;
  /// If set, the block each mesh rank writes (none: it writes nothing),
  /// in place of the blocks `axes` cut (blocks of any extent, as ZeRO's
  /// element ranges).
  std::function<std::optional<box>(int rank)> block_of;
  /// Fields added to the tensor's entry in the index.
  nlohmann::json extra = nlohmann::json::object();
};

/// The block rank r (at `coords`) writes of item `it`, if any.
inline std::optional<box> written_block(const save_item& it, const mesh_comms& c, int r, const std::vector<int>& coords) {
  if (it.block_of) return it.block_of(r);
  if (!writes_block(it.axes, coords)) return std::nullopt;
  return block_at(it.global, it.axes, c, coords);
}

template <class X>
save_item save_item_of(const named_entry<X>& e, const mesh_comms& c) {
  using Tn = typename stored<X>::tensor_type;
  using T = typename Tn::value_type;
  using L = typename Tn::dims;
  const Tn& t = [&]() -> const Tn& {
    if constexpr (is_sharded_v<X>)
      return e.value->local();
    else
      return *e.value;
  }();
  save_item it;
  it.name = e.name;
  it.dtype = std::string(safetensors_dtype_v<T>);
  it.dims = dim_names<L>();
  it.axes = split_axes<L, typename stored<X>::placements>(c);
  const auto ext = t.extents();
  it.local.dtype = it.dtype;
  it.local.shape.assign(ext.begin(), ext.end());
  it.global = it.local.shape;
  for (std::size_t d = 0; d < L::size; ++d)
    if (it.axes[d] >= 0) it.global[d] *= static_cast<std::size_t>(c.sizes[static_cast<std::size_t>(it.axes[d])]);
  if (!writes_block(it.axes, c.coords)) return it;  // another rank writes this block: no copy
  it.local.data.resize(t.size() * sizeof(T));
  io::detail::copy_le_bytes(reinterpret_cast<const std::byte*>(t.data()), reinterpret_cast<T*>(it.local.data.data()),
                            t.size());
  return it;
}

template <class X>
constexpr bool has_partial_v = std::tuple_size_v<typename filter<keep_partials, typename stored<X>::placements>::type> != 0;
}  // namespace detail

namespace detail {
/// The collective save of the items `make_items(items)` appends (see
/// save_checkpoint).
template <class Mesh, class F>
void save_items(const Mesh& m, const std::string& dir, F&& make_items) {
  namespace fs = std::filesystem;
  const auto& c = *m.comms();
  const int me = m.rank(), ranks = m.size();
  const std::string what = "saving checkpoint '" + dir + "'";
  // The new generation: one more than the index's (rank 0 reads it).
  unsigned long long generation = 1;
  on_every_rank(m.comm(), what, [&] {
    if (me != 0) return;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw checkpoint_error("cannot create directory '" + dir + "': " + ec.message());
    if (fs::exists(fs::path(dir) / checkpoint_index_name))
      generation = read_index(dir).at("generation").get<unsigned long long>() + 1;
  });
  {
    const auto start = clock::now();
    MPI_Request req = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(&generation, 1, MPI_UNSIGNED_LONG_LONG, 0, m.comm(), &req), "MPI_Ibcast (generation)");
    finish(req, m.comm(), what, start);
  }

  std::vector<save_item> items;
  bool written = false;
  const std::string my_file = rank_file_name(generation, me, ranks);
  auto remove_mine = [&] {
    std::error_code ignored;
    if (written) fs::remove(fs::path(dir) / my_file, ignored);
  };
  try {
    on_every_rank(m.comm(), what, [&] {
      make_items(items);
      std::set<std::string> seen;
      safetensors_contents mine;
      for (auto& it : items) {
        if (!seen.insert(it.name).second) throw checkpoint_error("two entries are named '" + it.name + "'");
        const auto b = written_block(it, c, me, c.coords);
        if (!b) continue;
        mine.metadata["dimsum.dims." + it.name] = join(it.dims, " ");
        mine.metadata["dimsum.offset." + it.name] = join_sizes(b->offset);
        mine.metadata["dimsum.crc32." + it.name] = hex32(crc32(it.local.data.data(), it.local.data.size()));
        mine.tensors.emplace(it.name, std::move(it.local));
      }
      if (mine.tensors.empty()) return;
      write_safetensors((fs::path(dir) / my_file).string(), mine);
      written = true;
    });
    // Every rank file is on disk: rank 0 writes the index that makes it the checkpoint.
    on_every_rank(m.comm(), what, [&] {
      if (me != 0) return;
      nlohmann::json index;
      index["format"] = "dimsum-sharded-checkpoint";
      index["generation"] = generation;
      index["ranks"] = ranks;
      index["mesh"] = nlohmann::json::array();
      for (std::size_t a = 0; a < c.names.size(); ++a) index["mesh"].push_back({{"axis", c.names[a]}, {"size", c.sizes[a]}});
      std::vector<std::string> files;
      std::map<int, std::size_t> file_of_rank;
      nlohmann::json tensors = nlohmann::json::object();
      for (const auto& it : items) {
        nlohmann::json blocks = nlohmann::json::array();
        for (int r = 0; r < ranks; ++r) {
          const auto b = written_block(it, c, r, coords_of(c, r));
          if (!b) continue;
          if (!file_of_rank.count(r)) {
            file_of_rank[r] = files.size();
            files.push_back(rank_file_name(generation, r, ranks));
          }
          blocks.push_back({{"file", file_of_rank[r]}, {"offset", b->offset}, {"shape", b->shape}});
        }
        nlohmann::json entry = it.extra;
        entry.update({{"dtype", it.dtype}, {"dims", it.dims}, {"shape", it.global}, {"blocks", blocks}});
        tensors[it.name] = std::move(entry);
      }
      index["files"] = files;
      index["tensors"] = tensors;
      const std::string text = index.dump(1);
      io::detail::write_file_atomically<checkpoint_error>((fs::path(dir) / checkpoint_index_name).string(),
                                                           reinterpret_cast<const std::byte*>(text.data()), text.size());
    });
  } catch (...) {
    remove_mine();
    throw;
  }
  // The new index is in place: rank 0 removes the files of other generations.
  if (me == 0) {
    const std::string keep_prefix = "g" + std::to_string(generation) + "-";
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec)) {
      const std::string n = f.path().filename().string();
      if (n.size() > 12 && n[0] == 'g' && n.find("-rank") != std::string::npos &&
          n.ends_with(".safetensors") && n.rfind(keep_prefix, 0) != 0) {
        std::error_code ignored;
        fs::remove(f.path(), ignored);
      }
    }
  }
  const auto start = clock::now();
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(m.comm(), &req), "MPI_Ibarrier (checkpoint saved)");
  finish(req, m.comm(), what, start);
}
}  // namespace detail

/// Saves named tensors (`dist::entry("W_Q", W_Q)`: plain tensors are
/// replicated, sharded ones split) to directory `dir` as one checkpoint,
/// collectively over mesh m: each block is written once, by the rank at
/// coordinate 0 of every axis the tensor is not split over. The index is
/// replaced only after every rank has written its file, so a save that
/// fails anywhere throws on every rank and leaves the previous checkpoint
/// intact. A partial sum is a compile error (all_reduce it first).
template <axis... Axes, class... Xs>
void save_checkpoint(const mesh<Axes...>& m, const std::string& dir, const named_entry<Xs>&... entries) {
  if constexpr ((detail::has_partial_v<Xs> || ...)) {
    using Ps = detail::tuple_cat_t<typename detail::stored<Xs>::placements...>;
    detail::report_partial<op_save, Ps>();
  } else {
    detail::save_items(m, dir, [&](std::vector<detail::save_item>& items) {
      (items.push_back(detail::save_item_of(entries, *m.comms())), ...);
    });
  }
}

/// Saves every parameter of `module` (replicated on every rank, as in data
/// parallelism; found by nn::for_each_parameter, keyed by dotted name) as a
/// checkpoint in `dir`, collectively over mesh m: rank 0 writes the values,
/// with the same atomicity as save_checkpoint.
template <axis... Axes, class M>
void save_module(const mesh<Axes...>& m, const std::string& dir, const M& module) {
  detail::check_same_parameters(m.comm(), "saving checkpoint '" + dir + "'", module);
  detail::save_items(m, dir, [&](std::vector<detail::save_item>& items) {
    nn::for_each_parameter(module, [&](const std::string& name, const auto& p) {
      items.push_back(detail::save_item_of(entry(name, p.value), *m.comms()));
    });
  });
}

/// Loads every parameter of `module` from the checkpoint in `dir` (saved by
/// save_module or save_checkpoint, on any number of ranks), the whole value
/// on this rank. With a mesh it is collective (errors on every rank);
/// without one it needs no MPI. The checkpoint's names must be exactly the
/// module's (`checkpoint_error` naming the missing and unexpected ones),
/// and each must fit its parameter (dtype, dims, extents); everything is
/// read and checked before any parameter changes.
template <class M>
void load_module(checkpoint_reader& r, M& module) {
  std::set<std::string> want, have;
  nn::for_each_parameter(std::as_const(module), [&](const std::string& name, const auto&) { want.insert(name); });
  for (const auto& n : r.names()) have.insert(n);
  detail::check_names("checkpoint does not fit the module:", want, have);
  std::vector<std::function<void()>> commits;
  nn::for_each_parameter(module, [&](const std::string& name, auto& p) {
    using Tn = std::remove_cvref_t<decltype(p.value)>;
    Tn loaded = r.template full<Tn>(name);
    if (loaded.extents() != p.value.extents())
      throw shape_error("checkpoint: parameter '" + name + "' has extents " +
                        detail::join_sizes(std::vector<std::size_t>(loaded.extents().begin(), loaded.extents().end())) +
                        " in the checkpoint but " +
                        detail::join_sizes(std::vector<std::size_t>(p.value.extents().begin(), p.value.extents().end())) +
                        " in the module");
    commits.push_back([&p, t = std::move(loaded)]() mutable { p.value = std::move(t); });
  });
  for (auto& commit : commits) commit();
}
template <class M>
void load_module(const std::string& dir, M& module) {
  checkpoint_reader r(dir);
  load_module(r, module);
}
template <axis... Axes, class M>
void load_module(const mesh<Axes...>& m, const std::string& dir, M& module) {
  const std::string what = "loading a module from checkpoint '" + dir + "'";
  detail::check_same_parameters(m.comm(), what, std::as_const(module));
  detail::on_every_rank(m.comm(), what, [&] { load_module(dir, module); });
}

}  // namespace dimsum::dist
