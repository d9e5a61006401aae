#!/usr/bin/env python3
"""Rewrites the "Every case" table of docs/diagnostics.md from the report
files the compile-fail harness writes (tests/compile_fail/check.cmake:
<build>/tests/compile_fail/report/<case>.tsv, one line "case KIND errors
lines first-error-line").

    tests/compile_fail/report_table.py BUILD_GCC BUILD_CLANG [docs/diagnostics.md]

Every case in tests/compile_fail/ must have a report in both build dirs
(a missing one is an error: the table would silently lose a row)."""
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parents[2]


def reports(build, kind):
    out = {}
    for f in (pathlib.Path(build) / "tests" / "compile_fail" / "report").glob("*.tsv"):
        case, k, errors, lines, first = f.read_text().rstrip("\n").split("\t", 4)
        if k != kind:
            sys.exit(f"{f}: compiled as {k}, expected {kind}")
        out[case] = (errors, lines, first)
    return out


def cell(first, source_root):
    for prefix in (source_root, str(root)):
        first = first.replace(prefix.rstrip("/") + "/", "")
    return "`" + first.replace("|", "\\|")[:220] + "`"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    gcc, clang = reports(sys.argv[1], "GCC"), reports(sys.argv[2], "CLANG")
    doc = pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 else root / "docs" / "diagnostics.md"
    cases = sorted(p.stem for p in (root / "tests" / "compile_fail").glob("*.cpp"))
    rows = ["| case | compiler | errors | lines | first error line |", "|---|---|---:|---:|---|"]
    for case in cases:
        for name, table, build in (("g++", gcc, sys.argv[1]), ("clang++-16", clang, sys.argv[2])):
            if case not in table:
                if case == "harness_sanity_wrong_message":  # fails on purpose: no report
                    continue
                sys.exit(f"no report for {case} in {build}")
            errors, lines, first = table[case]
            src = str(pathlib.Path(build).resolve().parent)
            rows.append(f"| {case} | {name} | {errors} | {lines} | {cell(first, src)} |")
    text = doc.read_text().split("\n")
    start = text.index("## Every case")
    head = next(i for i in range(start, len(text)) if text[i].startswith("| case | compiler"))
    end = head
    while end < len(text) and text[end].startswith("|"):
        end += 1
    doc.write_text("\n".join(text[:head] + rows + text[end:]))
    print(f"{doc}: {len(cases)} cases")


if __name__ == "__main__":
    main()
