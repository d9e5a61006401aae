// The attention heatmap SVG: well-formed XML, one cell per (query, key)
// pair, every token label on both axes, labels escaped.
#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include <dimsum/dimsum.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(q_token);
DIMSUM_DIM(k_token);

// A small XML well-formedness check: tags nest and close, attribute values
// are quoted, entities are the five XML ones. Returns "" when well-formed.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  std::size_t i = 0;
  if (s.rfind("<?xml", 0) == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    if (s[i] == '&') {
      const auto semi = s.find(';', i);
      const std::string ent = s.substr(i, semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
        return "bad entity " + ent;
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      ++i;
      continue;
    }
    const auto end = s.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    // attributes: name="value" pairs only
    static const std::regex attrs(R"(^[a-zA-Z:-]+(\s+[a-zA-Z:-]+="[^"<]*")*\s*/?$)");
    if (!std::regex_match(tag, attrs)) return "malformed tag <" + tag + ">";
    if (!self_closing) open.push_back(name);
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("heatmap: a well-formed SVG with one cell per (query, key) pair", "[heatmap]") {
  dimsum::tensor<float, q_token, k_token> p(q_token{3}, k_token{4});
  test::fill_pattern(p);
  const std::vector<std::string> rows{"Your", "journey", "<starts>"}, cols{"a", "b&c", "d", "e"};
  const std::string svg = dimsum::heatmap_svg(p, rows, cols, "head 0");
  CHECK(xml_problem(svg) == "");
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(count(svg, "<rect class=\"cell\"") == 3 * 4);
  CHECK(count(svg, "class=\"row-label\"") == 3);
  CHECK(count(svg, "class=\"col-label\"") == 4);
  CHECK(svg.find("&lt;starts&gt;") != std::string::npos);
  CHECK(svg.find("b&amp;c") != std::string::npos);
  CHECK(svg.find("journey -&gt; d: ") != std::string::npos);  // a cell's tooltip names its pair
}

TEST_CASE("heatmap: label counts must match the extents", "[heatmap]") {
  dimsum::tensor<float, q_token, k_token> p(q_token{2}, k_token{2});
  REQUIRE_THROWS_WITH(dimsum::heatmap_svg(p, {"a"}, {"a", "b"}),
                      Catch::Contains("'q_token' of extent 2") && Catch::Contains("1 row labels"));
}

TEST_CASE("heatmap: the example's 6x6 shape, uniform weights", "[heatmap]") {
  dimsum::tensor<float, q_token, k_token> p(q_token{6}, k_token{6});
  p.fill(1.0f / 6);
  const std::string svg = dimsum::heatmap_svg(p, {"1", "2", "3", "4", "5", "6"}, {"1", "2", "3", "4", "5", "6"});
  CHECK(xml_problem(svg) == "");
  CHECK(count(svg, "<rect class=\"cell\"") == 36);
}

TEST_CASE("heatmap: a file that cannot be written is an error", "[heatmap]") {
  dimsum::tensor<float, q_token, k_token> p(q_token{1}, k_token{1});
  REQUIRE_THROWS_WITH(dimsum::save_heatmap_svg("/nonexistent-dir/x.svg", p, {"a"}, {"b"}),
                      Catch::Contains("cannot write '/nonexistent-dir/x.svg'"));
}
