// Turns docs/tutorial.md's ```cpp blocks into one translation unit that is
// compiled and run as a test (docs.tutorial). The tutorial's blocks build on
// one another within a chapter, so each chapter ("## " heading) becomes a
// namespace whose statements run in order in one function, and a block's
// first line may say how it is used:
//
//   (no marker)               statements, appended to the chapter's function
//   // own scope              statements in a { } of their own (a block that
//                             shows another way to compute a name)
//   // namespace scope        declarations at the chapter's namespace scope
//   // namespace scope, alone declarations in a namespace of their own (two
//                             alternative definitions of one function)
//   // excerpt: FILE...       a quotation of the named files: every line of
//                             the block (comments, "..." and blank lines
//                             aside) must occur in one of them, compared
//                             without whitespace and without "dimsum::";
//                             a line that does not becomes an #error
//   // not compiled: REASON   skipped (a mistake the text shows on purpose)
//
//   extract_tutorial <tutorial.md> <prelude.hpp> <source dir> <out.cpp>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string normalized(std::string s) {
  // drop a trailing // comment (not inside a string literal)
  bool in_string = false;
  for (std::size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] == '"' && (i == 0 || s[i - 1] != '\\')) in_string = !in_string;
    if (!in_string && s[i] == '/' && s[i + 1] == '/') {
      s.resize(i);
      break;
    }
  }
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\t') out += c;
  for (std::size_t p; (p = out.find("dimsum::")) != std::string::npos;) out.erase(p, 8);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string quoted(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The #error lines for the lines of an excerpt block not found in its files.
std::string check_excerpt(const std::string& marker, const std::string& body, const std::string& root) {
  std::istringstream names(marker.substr(std::string("// excerpt:").size()));
  std::vector<std::string> files, file_lines;
  for (std::string f; names >> f;) files.push_back(f);
  std::string errors;
  for (const auto& f : files) {
    std::ifstream in(root + "/" + f);
    if (!in) errors += "#error \"tutorial excerpt: cannot read " + quoted(f) + "\"\n";
    for (std::string l; std::getline(in, l);) file_lines.push_back(normalized(l));
  }
  std::istringstream lines(body);
  for (std::string l; std::getline(lines, l);) {
    const std::string n = normalized(l);
    if (n.empty() || n == "...") continue;
    bool found = false;
    for (const auto& fl : file_lines) found = found || fl.find(n) != std::string::npos;
    if (!found) errors += "#error \"tutorial excerpt line not found in " + quoted(marker.substr(11)) + ": " + quoted(l) + "\"\n";
  }
  return errors;
}

struct chapter {
  std::string title, scope, body;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: extract_tutorial <tutorial.md> <prelude.hpp> <source dir> <out.cpp>\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  std::ifstream prelude_in(argv[2]);
  if (!in || !prelude_in) {
    std::cerr << "cannot read " << argv[1] << " or " << argv[2] << "\n";
    return 1;
  }
  const std::string root = argv[3];
  std::vector<chapter> chapters(1);
  std::string line, block, errors;
  bool inside = false;
  std::size_t n_blocks = 0;
  while (std::getline(in, line)) {
    if (!inside && starts_with(line, "## ")) {
      chapters.push_back({line.substr(3), "", ""});
    } else if (!inside && line == "```cpp") {
      inside = true;
      block.clear();
    } else if (inside && line == "```") {
      inside = false;
      ++n_blocks;
      const std::string first = block.substr(0, block.find('\n'));
      const std::string rest = block.substr(block.find('\n') + 1);
      chapter& c = chapters.back();
      const std::string where = "// tutorial block " + std::to_string(n_blocks) + " (" + c.title + ")\n";
      if (starts_with(first, "// not compiled:")) {
        continue;
      } else if (starts_with(first, "// excerpt:")) {
        errors += check_excerpt(first, rest, root);
      } else if (first == "// namespace scope, alone") {
        c.scope += where + "namespace block_" + std::to_string(n_blocks) + " {\n" + rest + "}\n";
      } else if (starts_with(first, "// namespace scope")) {
        c.scope += where + rest;
      } else if (first == "// own scope") {
        c.body += where + "{\n" + rest + "}\n";
      } else {
        c.body += where + block;
      }
    } else if (inside) {
      block += line + "\n";
    }
  }
  if (n_blocks == 0) {
    std::cerr << "no ```cpp blocks in " << argv[1] << "\n";
    return 1;
  }
  std::ostringstream out, calls;
  out << "// Generated from " << argv[1] << " by tests/docs/extract_tutorial.cpp.\n"
      << prelude_in.rdbuf() << "\n" << errors;
  for (std::size_t i = 1; i < chapters.size(); ++i) {
    const chapter& c = chapters[i];
    if (c.scope.empty() && c.body.empty()) continue;
    out << "namespace tutorial_chapter_" << i << " {  // " << c.title << "\nusing namespace dimsum;\n"
        << c.scope << "void run() {\n" << c.body << "}\n}  // namespace tutorial_chapter_" << i << "\n";
    calls << "  tutorial_chapter_" << i << "::run();\n";
  }
  out << "int main() {\n" << calls.str() << "}\n";
  std::ofstream(argv[4]) << out.str();
  return 0;
}
