#!/usr/bin/env python3
"""No numaaff::detail type in a public signature.

Reads every public header (include/numaaff/*.hpp), drops comments, string literals, the
`namespace detail { ... }` blocks, function bodies and the private and protected parts of
classes, and fails if `detail::` is left anywhere: in a parameter or return type, a public
member, a base class, an alias or a default argument. Usage: check_public_signatures.py
INCLUDE_DIR.
"""
import pathlib
import re
import sys


def strip_comments_and_strings(text):
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append("\n" * text.count("\n", i, n if j < 0 else j))
            i = n if j < 0 else j + 2
        elif text[i] == '"' or (text[i] == "'" and not text[i - 1].isalnum()):
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(q + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(text) - 1


def blank(text, a, b):
    """Replaces text[a:b] by spaces, keeping the line breaks (line numbers stay right)."""
    return text[:a] + re.sub(r"[^\n]", " ", text[a:b]) + text[b:]


def drop_detail_namespaces(text):
    for m in reversed(list(re.finditer(r"namespace\s+(numaaff::)?detail\s*\{", text))):
        text = blank(text, m.start(), matching_brace(text, m.end() - 1) + 1)
    return text


def drop_bodies(text):
    """Function bodies and initialiser bodies: a `{` after `)`, `) const`, `noexcept`, `-> T`..."""
    k = 0
    while True:
        m = re.compile(r"\)\s*(const\s*)?(noexcept(\([^)]*\))?\s*)?(override\s*)?(final\s*)?(->\s*[\w:<>,\s*&]+)?\{").search(text, k)
        if not m:
            return text
        open_at = m.end() - 1
        close = matching_brace(text, open_at)
        text = blank(text, open_at, close + 1)
        k = open_at + 1


def drop_initialisers(text):
    """Constructors' member initialiser lists: `) noexcept : a_(x), b_(y) {`."""
    return re.sub(r"\)(\s*noexcept)?\s*:(?!:)[^;{]*\{", lambda m: ")" + re.sub(r"[^\n]", " ", m.group(0)[1:-1]) + "{", text)


def drop_non_public(text, private):
    """In each class or struct body, the parts after private: or protected: up to public:;
    adds (class, member) to `private` for each member function declared there."""
    for m in reversed(list(re.finditer(r"\b(class|struct)\s+(\w+)[^;{(]*\{", text))):
        open_at = m.end() - 1
        close = matching_brace(text, open_at)
        body = text[open_at:close]
        default_private = m.group(1) == "class"
        pieces = re.split(r"\b(public|private|protected)\s*:", body)
        keep_private = default_private
        rebuilt = []
        for idx, piece in enumerate(pieces):
            if idx % 2 == 1:
                keep_private = piece != "public"
                rebuilt.append(" " * (len(piece) + 1))
                continue
            if keep_private:
                private.update((m.group(2), name) for name in re.findall(r"(\w+)\s*\(", piece))
            rebuilt.append(re.sub(r"[^\n]", " ", piece) if keep_private else piece)
        text = text[:open_at] + "".join(rebuilt) + text[close:]
    return text


def main():
    include = pathlib.Path(sys.argv[1]) / "numaaff"
    problems = []
    for header in sorted(include.glob("*.hpp")):
        text = strip_comments_and_strings(header.read_text())
        private = set()
        text = drop_non_public(drop_bodies(drop_initialisers(drop_detail_namespaces(text))), private)
        for number, line in enumerate(text.splitlines(), 1):
            if "detail::" not in line:
                continue
            # The out-of-class definition of a private member: not a public signature.
            member = re.search(r"\b(\w+)::(\w+)\s*\(", line)
            if member and (member.group(1), member.group(2)) in private:
                continue
            problems.append(f"{header.name}:{number}: {line.strip()}")
    for p in problems:
        print(p)
    print(f"check_public_signatures: {len(problems)} public declaration(s) naming numaaff::detail")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
