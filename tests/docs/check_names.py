#!/usr/bin/python3
"""The docs name only headers and names that exist.

For README.md and docs/*.md (CHANGELOG.md names removed things on purpose):

- every header `<dimsum/....hpp>` and every path `include/dimsum/....hpp` is a
  file under include/;
- every qualified name that starts with `dimsum::` or with one of dimsum's
  namespaces (`nn::`, `grad::`, `dist::`, `optim::`, `kernels::`, `plan::`,
  `init::`; the examples' own `seeds::` is not dimsum's), template arguments dropped (`dimsum::tensor<float,
  a>::from_extents` is `dimsum::tensor::from_extents`), has each of its parts
  declared in include/: an identifier of the headers' code (comments and
  string literals left out), unless the doc quotes text that occurs as it
  is in include/ (an error message: "needs grad::vars q, k and v"). A function, type, member, namespace or macro
  argument named in a doc and then renamed or removed from the headers is
  reported with the doc's file and line.

    check_names.py <source dir>        check the docs
    check_names.py --self-test         check that a wrong header and a wrong
                                       name in a doc are reported
"""
import os
import re
import sys
import tempfile

NAMESPACES = ("dimsum", "nn", "grad", "dist", "optim", "kernels", "plan", "init")
HEADER = re.compile(r"<(dimsum/[A-Za-z0-9_./-]+\.hpp)>|\binclude/(dimsum/[A-Za-z0-9_./-]+\.hpp)")
# A qualified name: not preceded by a word character, `::` or `.` (torch::nn::, x.nn::).
QUALIFIED = re.compile(r"(?<![\w:.])((?:%s)(?:::~?[A-Za-z_]\w*)+)" % "|".join(NAMESPACES))


def code_identifiers(root):
    """Every identifier in the code of include/ (comments, literals and
    #include lines removed), and the headers' whole text."""
    names, text = set(), []
    token = re.compile(r"#\s*include[^\n]*|//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|[A-Za-z_]\w*", re.S)
    for folder, _, files in os.walk(os.path.join(root, "include")):
        for f in files:
            if f.endswith(".hpp"):
                text.append(open(os.path.join(folder, f), encoding="utf-8").read())
                for m in token.finditer(text[-1]):
                    t = m.group(0)
                    if t[0].isalpha() or t[0] == "_":
                        names.add(t)
    return names, "\n".join(text)


def drop_template_arguments(line):
    """`a<b, c<d>>::e` -> `a::e`: removes balanced <...> that follow an identifier."""
    out, depth = [], 0
    for i, c in enumerate(line):
        if c == "<" and (depth > 0 or (i > 0 and (line[i - 1].isalnum() or line[i - 1] == "_"))):
            depth += 1
            continue
        if c == ">" and depth > 0:
            depth -= 1
            continue
        if depth == 0:
            out.append(c)
    return "".join(out) if depth == 0 else line


def check(root, docs):
    names, text = code_identifiers(root)
    problems = []
    for doc in docs:
        rel = os.path.relpath(doc, root)
        for n, line in enumerate(open(doc, encoding="utf-8"), 1):
            for m in HEADER.finditer(line):
                header = m.group(1) or m.group(2)
                if not os.path.isfile(os.path.join(root, "include", header)):
                    problems.append(f"{rel}:{n}: header <{header}> does not exist under include/")
            for m in QUALIFIED.finditer(drop_template_arguments(line)):
                parts = m.group(1).split("::")
                missing = [p for p in parts[1:] if p.lstrip("~") not in names]
                if missing and m.group(1) not in text:
                    problems.append(f"{rel}:{n}: {m.group(1)}: no '{missing[0]}' in include/")
    return problems


def docs_of(root):
    docs = [os.path.join(root, "README.md")]
    folder = os.path.join(root, "docs")
    docs += sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".md"))
    return docs


def self_test():
    """A doc with one wrong header and one wrong name gives exactly those two reports."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "include", "dimsum", "ops"))
        open(os.path.join(root, "include", "dimsum", "ops", "softmax.hpp"), "w").write(
            "#include <dimsum/ops/softmx_impl.hpp>\n"
            "namespace dimsum {\n// softmx in a comment does not declare it\n"
            "template <class D> auto softmax(int x) { return \"kernels::softmx\"; }\n}\n")
        doc = os.path.join(root, "doc.md")
        open(doc, "w").write("#include <dimsum/ops/softmax.hpp>\n#include <dimsum/ops/softmx.hpp>\n"
                             "`dimsum::softmax<posn>(x)` and `dimsum::softmx<posn>(x)`; torch::nn::Softmx\n"
                             "`nn::softmx_impl` is only in an #include line\n")
        got = check(root, [doc])
        want = ["doc.md:2: header <dimsum/ops/softmx.hpp> does not exist under include/",
                "doc.md:3: dimsum::softmx: no 'softmx' in include/",
                "doc.md:4: nn::softmx_impl: no 'softmx_impl' in include/"]
        if got != want:
            print("self-test failed: expected\n  " + "\n  ".join(want) + "\ngot\n  " + "\n  ".join(got))
            return 1
    print("self-test: a wrong header and a wrong name are reported")
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    docs = docs_of(root)
    problems = check(root, docs)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} names in the docs that include/ does not have")
        return 1
    print(f"every header and dimsum name in {len(docs)} docs exists in include/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
