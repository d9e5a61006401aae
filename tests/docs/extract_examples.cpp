// Turns the ```cpp blocks of a markdown file into one translation unit, the
// way docs/reference.md promises its examples compile and run: the first
// block is the prelude (namespace scope); a block whose first line is
// "// namespace scope" stays at namespace scope; every other block becomes
// the body of a function that main() calls in order.
//
//   extract_examples <in.md> <out.cpp>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: extract_examples <in.md> <out.cpp>\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 1;
  }
  std::vector<std::string> blocks;
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "```cpp") {
      inside = true;
      block.clear();
    } else if (inside && line == "```") {
      inside = false;
      blocks.push_back(block);
    } else if (inside) {
      block += line + "\n";
    }
  }
  if (blocks.empty()) {
    std::cerr << "no ```cpp blocks in " << argv[1] << "\n";
    return 1;
  }
  std::ostringstream out, calls;
  out << "// Generated from " << argv[1] << " by tests/docs/extract_examples.cpp.\n" << blocks[0];
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].rfind("// namespace scope", 0) == 0) {
      out << blocks[i];
    } else {
      out << "void example_" << i << "() {\n" << blocks[i] << "}\n";
      calls << "  example_" << i << "();\n";
    }
  }
  out << "int main() {\n" << calls.str() << "}\n";
  std::ofstream(argv[2]) << out.str();
  return 0;
}
