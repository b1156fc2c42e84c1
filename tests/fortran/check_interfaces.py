#!/usr/bin/env python3
"""Compares the Fortran module's interfaces with numaaff.h, so that the two cannot drift apart.

usage: check_interfaces.py [numaaff.h file.f90...]   (defaults: this checkout's header and fortran/*.f90)

From the header it reads every `NUMAAFF_C_API <ret> <name>(<params>)` declaration, every static
inline function (these have no symbol to bind to: the Fortran form is a module procedure of the
same name), every `#define NUMAAFF_<NAME> <integer>` and every `typedef struct <name> {...} <name>`.
From the Fortran files it reads the bind(C) interfaces (keyed by their binding name, so a
Fortran-side `numaaff_x_c` wrapped by a module procedure counts), the module procedures, the
module-level parameters, the bind(C) derived types and the public statements. It reports:

  1. a C function with no Fortran interface (or one that is not public, directly or through a
     public module procedure of the C name);
  2. a bind(C, name="numaaff_...") interface naming no C function;
  3. a different argument count;
  4. an obvious kind mismatch: int/unsigned <-> c_int, size_t <-> c_size_t, (unsigned) long long
     <-> c_long_long, double <-> c_double, char <-> c_char, a struct <-> its bind(C) type; a
     pointer <-> type(c_ptr) by value, or a by-reference argument (scalar or array) of the
     pointee's kind; a by-value C argument <-> `value` (bind(C) interfaces only: a module
     procedure passes arguments its own way); a const pointer <-> no intent(out); the return
     type (void <-> subroutine);
  5. a NUMAAFF_* integer constant with no public Fortran parameter of the same lower-case name
     and value;
  6. a bind(C) type whose members differ from the C struct of the same name (names, order,
     count, kinds), or a C struct with no such type.

Exit status 0 when everything matches, 1 with one line per problem otherwise, 2 for bad usage.
The Fortran parser knows the subset the module uses: free form, declarations with `::`,
`end function`/`end subroutine`; anything it cannot read is reported rather than passed.
"""

import os
import re
import sys

# ---- C side ------------------------------------------------------------------------------

# C scalar types -> (Fortran type, kind). Fortran has no unsigned kinds: the unsigned types map
# to the signed kind of the same size, as the module documents.
C_SCALARS = {
    "int": ("integer", "c_int"),
    "unsigned": ("integer", "c_int"),
    "unsigned int": ("integer", "c_int"),
    "size_t": ("integer", "c_size_t"),
    "long": ("integer", "c_long"),
    "unsigned long": ("integer", "c_long"),
    "long long": ("integer", "c_long_long"),
    "unsigned long long": ("integer", "c_long_long"),
    "double": ("real", "c_double"),
    "float": ("real", "c_float"),
    "char": ("character", "c_char"),
}


def strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


class CType:
    """A C parameter or return type: base name (const removed), pointer depth, constness."""

    def __init__(self, words):
        self.const = "const" in words
        stars = sum(w.count("*") for w in words)
        base = [w.replace("*", "") for w in words if w not in ("const", "struct")]
        self.base = " ".join(w for w in base if w)
        self.pointers = stars

    def __str__(self):
        return ("const " if self.const else "") + self.base + "*" * self.pointers


C_TYPE_WORDS = {"const", "volatile", "struct", "signed", "unsigned", "short", "long", "int", "char", "float",
                "double", "void", "size_t"}


def parse_c_param(text):
    """'const int* owners' -> (CType, 'owners'); 'size_t' -> (CType, None); 'void' -> None."""
    words = re.findall(r"[A-Za-z_]\w*|\*", text)
    if words in ([], ["void"]):
        return None
    name = None
    if len(words) >= 2 and words[-1] != "*" and words[-1] not in C_TYPE_WORDS:
        name = words.pop()
    return CType(words), name


def split_top(text, sep=","):
    """Splits at `sep` outside parentheses and quotes."""
    parts, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def parse_header(path):
    raw = open(path, encoding="utf-8").read()
    constants = {}
    # `#define NUMAAFF_X 3`, `(-1)`, `0x10u`, with an optional trailing comment; not the macros
    # without a value or with another one (NUMAAFF_C_API).
    define = (r"^[ \t]*#[ \t]*define[ \t]+(NUMAAFF_\w+)[ \t]+\(?[ \t]*([-+]?(?:0x[0-9a-fA-F]+|\d+))[uUlL]*"
              r"[ \t]*\)?[ \t]*(?:/[*/].*)?$")
    for m in re.finditer(define, raw, flags=re.M):
        constants[m.group(1).lower()] = int(m.group(2), 0)
    text = strip_c_comments(raw)
    text = re.sub(r"^[ \t]*#.*$", " ", text, flags=re.M)  # other directives
    flat = re.sub(r"\s+", " ", text)

    functions = {}
    for m in re.finditer(r"NUMAAFF_C_API ([^;{}()]*?)\b(\w+) ?\(([^()]*)\)", flat):
        functions[m.group(2)] = make_function(m.group(2), m.group(1), m.group(3), inline=False)
    for m in re.finditer(r"static inline ([^;{}()]*?)\b(\w+) ?\(([^()]*)\) ?(?:\w+ ?)?\{", flat):
        functions[m.group(2)] = make_function(m.group(2), m.group(1), m.group(3), inline=True)

    structs = {}
    for m in re.finditer(r"typedef struct (\w+) ?\{([^{}]*)\} ?(\w+) ?;", flat):
        members = []
        for decl in m.group(2).split(";"):
            decl = decl.strip()
            if not decl:
                continue
            first, *rest = split_top(decl)
            ctype, name = parse_c_param(first)
            members.append((name, ctype))
            for extra in rest:  # `int a, b;`
                stars = extra.count("*")
                members.append((extra.replace("*", "").strip(), CType(ctype.base.split() + ["*"] * stars)))
        structs[m.group(3)] = members
    return functions, constants, structs


def make_function(name, ret, params, inline):
    args = []
    for p in split_top(params):
        parsed = parse_c_param(p)
        if parsed is not None:
            args.append(parsed)
    return {"name": name, "ret": CType(ret.split()), "args": args, "inline": inline}


# ---- Fortran side ------------------------------------------------------------------------

def fortran_statements(path):
    """Free-form source as (line number, statement) pairs: comments (and directives) removed,
    continuations joined, `;` split."""
    out, pending, start = [], "", None
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        code, quote = "", None
        for ch in line.rstrip("\n"):
            if quote:
                code += ch
                if ch == quote:
                    quote = None
            elif ch in "'\"":
                quote = ch
                code += ch
            elif ch == "!":
                break
            else:
                code += ch
        code = code.strip()
        if pending and code.startswith("&"):
            code = code[1:].lstrip()
        if start is None:
            start = number
        if code.endswith("&"):
            pending += code[:-1] + " "
            continue
        pending += code
        for stmt in split_top(pending, ";"):
            if stmt.strip():
                out.append((start, stmt.strip()))
        pending, start = "", None
    return out


TYPE_SPEC = r"(integer|real|complex|logical|character|type|class)\s*(\([^()]*(?:\([^()]*\)[^()]*)*\))?"


def parse_type_spec(spec, paren):
    """('integer', '(kind=c_int)') -> ('integer', 'c_int'); ('type', '(c_ptr)') -> ('type', 'c_ptr')."""
    kind = None
    if paren:
        for item in split_top(paren.strip()[1:-1]):
            item = item.strip().lower()
            if item.startswith("kind="):
                kind = item[5:].strip()
            elif "=" not in item and kind is None:
                kind = item
    return spec.lower(), kind


def parse_declaration(stmt):
    """`integer(c_int), value :: a, b(*)` -> [(name, {type, kind, attrs, array, init})], else None."""
    m = re.match(r"^" + TYPE_SPEC + r"\s*((?:,\s*[^:]*?)?)\s*::\s*(.*)$", stmt, flags=re.I)
    if not m:
        return None
    ftype, kind = parse_type_spec(m.group(1), m.group(2))
    attrs = [a.strip().lower().replace(" ", "") for a in split_top(m.group(3)) if a.strip()]
    entities = []
    for ent in split_top(m.group(4)):
        ent = ent.strip()
        init = None
        if "=" in ent and "=>" not in ent:
            ent, init = ent.split("=", 1)
            ent, init = ent.strip(), init.strip()
        em = re.match(r"^(\w+)\s*(\(.*\))?", ent)
        if not em:
            continue
        array = bool(em.group(2)) or any(a.startswith("dimension") for a in attrs)
        entities.append((em.group(1).lower(), {"type": ftype, "kind": kind, "attrs": attrs, "array": array,
                                                "init": init}))
    return entities


class Procedure:
    def __init__(self, name, args, prefix, result, bind_name, where, in_interface, module):
        self.name, self.args, self.prefix, self.result = name, args, prefix, result
        self.bind_name, self.where, self.in_interface, self.module = bind_name, where, in_interface, module
        self.decls = {}
        self.is_function = prefix is not None

    def return_decl(self):
        if self.prefix and self.prefix[0]:
            return {"type": self.prefix[0], "kind": self.prefix[1], "attrs": [], "array": False}
        return self.decls.get(self.result or self.name)


def parse_fortran(paths):
    interfaces, procedures, parameters, types, publics, problems = [], [], {}, {}, {}, []
    for path in paths:
        module, depth_proc, in_interface, in_type, current, contains = None, [], False, None, None, False
        for number, stmt in fortran_statements(path):
            low = stmt.lower()
            where = "%s:%d" % (os.path.basename(path), number)
            m = re.match(r"^module\s+(\w+)\s*$", low)
            if m and not low.startswith("module procedure"):
                module = m.group(1)
                publics.setdefault(module, {"default": "public", "names": set()})
                contains = False
                continue
            if re.match(r"^end\s*module\b", low):
                module = None
                continue
            if in_type is not None:
                if re.match(r"^end\s*type\b", low):
                    in_type = None
                    continue
                decl = parse_declaration(stmt)
                if decl is None:
                    problems.append("%s: cannot read this member of type %s: %s" % (where, in_type["name"], stmt))
                else:
                    in_type["members"].extend(decl)
                continue
            m = re.match(r"^type\s*(,\s*[^:]*)?::\s*(\w+)\s*$", low) or re.match(r"^type\s+(\w+)\s*$", low)
            if m and not re.match(r"^type\s*\(", low):
                attrs = m.group(1) if m.lastindex == 2 else ""
                name = m.group(m.lastindex)
                in_type = {"name": name, "bind_c": bool(re.search(r"bind\s*\(\s*c\s*\)", attrs or "")),
                           "members": [], "where": where, "module": module}
                types[name] = in_type
                continue
            if re.match(r"^(abstract\s+)?interface\b", low):
                in_interface = True
                continue
            if re.match(r"^end\s*interface\b", low):
                in_interface = False
                continue
            if low == "contains":
                if not depth_proc:
                    contains = True
                continue
            pm = re.match(r"^(?:(?:pure|elemental|recursive|impure|module)\s+)*(?:" + TYPE_SPEC + r"\s+)?"
                          r"(?:(?:pure|elemental|recursive|impure)\s+)*(function|subroutine)\s+(\w+)\s*"
                          r"(\([^()]*\))?(.*)$", stmt, flags=re.I)
            if pm and not re.match(r"^end\b", low):
                kind_prefix = None
                if pm.group(3).lower() == "function":
                    kind_prefix = parse_type_spec(pm.group(1), pm.group(2)) if pm.group(1) else (None, None)
                name = pm.group(4).lower()
                args = [a.strip().lower() for a in (pm.group(5) or "()")[1:-1].split(",") if a.strip()]
                tail = pm.group(6)
                rm = re.search(r"result\s*\(\s*(\w+)\s*\)", tail, flags=re.I)
                bm = re.search(r"bind\s*\(\s*c\s*(?:,\s*name\s*=\s*(['\"])(.*?)\1)?\s*\)", tail, flags=re.I)
                bind_name = None
                if bm:
                    bind_name = bm.group(2) if bm.group(2) is not None else name
                proc = Procedure(name, args, kind_prefix, rm.group(1).lower() if rm else None, bind_name, where,
                                 in_interface, module)
                if not depth_proc:
                    if in_interface:
                        interfaces.append(proc)
                    elif contains:
                        procedures.append(proc)
                    current = proc
                depth_proc.append(proc)
                continue
            if depth_proc and re.match(r"^end\s*(function|subroutine)?\s*(\w+)?\s*$", low) and \
                    not re.match(r"^end\s*(do|if|select|associate|block|where|forall|critical)\b", low):
                depth_proc.pop()
                if not depth_proc:
                    current = None
                continue
            if current is not None and len(depth_proc) == 1:
                decl = parse_declaration(stmt)
                if decl:
                    for name, d in decl:
                        current.decls.setdefault(name, d)
                continue
            if module and not depth_proc and not in_interface:
                am = re.match(r"^(public|private)\s*(?:::\s*(.*))?$", low)
                if am:
                    if am.group(2) is None:
                        publics[module]["default"] = am.group(1)
                    elif am.group(1) == "public":
                        publics[module]["names"].update(n.strip() for n in am.group(2).split(",") if n.strip())
                    continue
                decl = parse_declaration(stmt)
                if decl:
                    for name, d in decl:
                        if "parameter" in d["attrs"]:
                            if "public" in d["attrs"]:
                                publics[module]["names"].add(name)
                            parameters[name] = dict(d, where=where, module=module)
    return interfaces, procedures, parameters, types, publics, problems


def is_public(publics, module, name):
    p = publics.get(module)
    return p is None or p["default"] == "public" or name in p["names"]


# ---- comparison --------------------------------------------------------------------------

def expected_kind(ctype, structs):
    """(Fortran type, kind) for a C base type, or None when there is no rule."""
    if ctype.base in C_SCALARS:
        return C_SCALARS[ctype.base]
    if ctype.base in structs:
        return ("type", ctype.base)
    return None


def describe(d):
    if d is None:
        return "no declaration"
    text = "%s(%s)" % (d["type"], d["kind"])
    if "value" in d["attrs"]:
        text += ", value"
    if d["array"]:
        text += ", array"
    return text


def check_argument(fn, index, ctype, cname, d, structs, module_procedure):
    """Problems with Fortran declaration `d` of C argument `ctype`."""
    label = "%s argument %d (%s %s)" % (fn, index + 1, ctype, cname or "")
    if d is None:
        return ["%s: the Fortran argument has no declaration with `::`" % label]
    by_value = "value" in d["attrs"]
    intent = next((a for a in d["attrs"] if a.startswith("intent(")), "")
    if ctype.pointers == 0:
        want = expected_kind(ctype, structs)
        if want is None:
            return ["%s: no rule for C type `%s` in check_interfaces.py" % (label, ctype)]
        out = []
        if (d["type"], d["kind"]) != want:
            out.append("%s: C %s wants %s(%s), the Fortran is %s" % (label, ctype, want[0], want[1], describe(d)))
        if not by_value and not module_procedure:
            out.append("%s: C passes it by value, the Fortran lacks `value`" % label)
        if d["array"]:
            out.append("%s: C passes a scalar, the Fortran declares an array" % label)
        return out
    if (d["type"], d["kind"]) == ("type", "c_ptr"):
        if by_value or module_procedure or ctype.pointers > 1:  # void** is a c_ptr by reference
            return []
        return ["%s: type(c_ptr) without `value` passes a pointer to a pointer; C has %s" % (label, ctype)]
    if ctype.pointers > 1:
        return ["%s: C %s is a pointer to a pointer: give type(c_ptr) (by reference)" % (label, ctype)]
    out = []
    if by_value:
        out.append("%s: C passes a pointer, the Fortran passes %s by value" % (label, describe(d)))
    if ctype.base == "void":
        if d["type"] != "type" or d["kind"] != "*":
            out.append("%s: C void* wants type(c_ptr), value (or type(*)), the Fortran is %s" % (label, describe(d)))
    else:
        want = expected_kind(ctype, structs)
        if want is None:
            return ["%s: no rule for C type `%s` in check_interfaces.py" % (label, ctype)]
        if (d["type"], d["kind"]) != want:
            out.append("%s: C %s points to %s(%s), the Fortran is %s" % (label, ctype, want[0], want[1], describe(d)))
    if ctype.const and intent in ("intent(out)", "intent(inout)"):
        out.append("%s: C const pointer, the Fortran is %s" % (label, intent))
    return out


def check_return(fn, ret, proc, structs):
    if ret.base == "void" and ret.pointers == 0:
        return [] if not proc.is_function else ["%s: C returns void, the Fortran is a function" % fn]
    if not proc.is_function:
        return ["%s: C returns %s, the Fortran is a subroutine" % (fn, ret)]
    d = proc.return_decl()
    if d is None:
        return ["%s: the Fortran function's result has no type" % fn]
    if ret.pointers > 0:
        want = ("type", "c_ptr")
    else:
        want = expected_kind(ret, structs)
        if want is None:
            return ["%s: no rule for C return type `%s` in check_interfaces.py" % (fn, ret)]
    if (d["type"], d["kind"]) != want:
        return ["%s: C returns %s, wants %s(%s), the Fortran returns %s(%s)" % (fn, ret, want[0], want[1], d["type"],
                                                                              d["kind"])]
    return []


def compare(header, f90s):
    functions, constants, structs = parse_header(header)
    interfaces, procedures, parameters, types, publics, problems = parse_fortran(f90s)
    if not functions:
        problems.append("%s: no NUMAAFF_C_API declaration found: the header's format changed" % header)

    by_bind = {}
    for itf in interfaces:
        if itf.bind_name is None:
            continue
        by_bind.setdefault(itf.bind_name, []).append(itf)
        if itf.bind_name.startswith("numaaff_") and itf.bind_name not in functions:
            problems.append("%s: interface %s binds to %s, which numaaff.h does not declare (2)" %
                            (itf.where, itf.name, itf.bind_name))
    module_procs = {p.name: p for p in procedures}

    for name, fn in sorted(functions.items()):
        if fn["inline"]:
            proc = module_procs.get(name)
            forms = [proc] if proc else []
            if not forms:
                problems.append("%s: static inline in numaaff.h, no Fortran module procedure of that name (1)" % name)
        else:
            forms = by_bind.get(name, [])
            if not forms:
                problems.append("%s: no Fortran interface with bind(C, name=\"%s\") (1)" % (name, name))
        for proc in forms:
            where = "%s: %s" % (proc.where, name)
            reachable = is_public(publics, proc.module, proc.name) or (
                name in module_procs and is_public(publics, module_procs[name].module, name))
            if not reachable:
                problems.append("%s: the Fortran form %s is not public (1)" % (where, proc.name))
            if len(proc.args) != len(fn["args"]):
                problems.append("%s: C takes %d argument(s), the Fortran %s takes %d (3)" %
                                (where, len(fn["args"]), proc.name, len(proc.args)))
                continue
            for i, ((ctype, cname), farg) in enumerate(zip(fn["args"], proc.args)):
                for p in check_argument(name, i, ctype, cname, proc.decls.get(farg), structs, fn["inline"]):
                    problems.append("%s: %s (4)" % (proc.where, p))
            for p in check_return(name, fn["ret"], proc, structs):
                problems.append("%s: %s (4)" % (proc.where, p))

    for name, value in sorted(constants.items()):
        p = parameters.get(name)
        if p is None:
            problems.append("%s: #define in numaaff.h, no Fortran parameter %s (5)" % (name.upper(), name))
            continue
        try:
            fvalue = int(re.sub(r"_\w+$", "", p["init"].replace(" ", "").strip("()")), 0)
        except (ValueError, AttributeError):
            fvalue = None
        if fvalue != value:
            problems.append("%s: parameter %s = %s, numaaff.h has %d (5)" % (p["where"], name, p["init"], value))
        if p["type"] != "integer" or p["kind"] != "c_int":
            problems.append("%s: parameter %s is %s, an integer constant wants integer(c_int) (5)" %
                            (p["where"], name, describe(p)))
        if not is_public(publics, p["module"], name):
            problems.append("%s: parameter %s is not public (5)" % (p["where"], name))

    for name, members in sorted(structs.items()):
        t = types.get(name)
        if t is None or not t["bind_c"]:
            problems.append("%s: struct in numaaff.h, no Fortran type, bind(C) :: %s (6)" % (name, name))
            continue
        cnames = [m[0] for m in members]
        fnames = [m[0] for m in t["members"]]
        if cnames != fnames:
            problems.append("%s: type %s has members (%s), the C struct (%s) (6)" %
                            (t["where"], name, ", ".join(fnames), ", ".join(cnames)))
            continue  # kinds are compared member by member once the members line up
        for (cname, ctype), (fname, d) in zip(members, t["members"]):
            want = ("type", "c_ptr") if ctype.pointers else expected_kind(ctype, structs)
            if want is None:
                problems.append("%s: %s%%%s: no rule for C type `%s` in check_interfaces.py (6)" %
                                (t["where"], name, cname, ctype))
            elif (d["type"], d["kind"]) != want or d["array"]:
                problems.append("%s: %s%%%s is %s, the C member %s %s wants %s(%s) (6)" %
                                (t["where"], name, fname, describe(d), ctype, cname, want[0], want[1]))
        if not is_public(publics, t["module"], name):
            problems.append("%s: type %s is not public (6)" % (t["where"], name))
    summary = "%d C functions (%d inline), %d constants, %d structs" % (
        len(functions), sum(f["inline"] for f in functions.values()), len(constants), len(structs))
    return problems, summary


def main(argv):
    if len(argv) == 1:
        root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
        header = os.path.join(root, "include", "numaaff", "numaaff.h")
        fdir = os.path.join(root, "fortran")
        f90s = sorted(os.path.join(fdir, f) for f in os.listdir(fdir) if f.endswith(".f90"))
    elif len(argv) >= 3:
        header, f90s = argv[1], argv[2:]
    else:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    problems, summary = compare(header, f90s)
    if problems:
        for p in problems:
            print(p)
        print("FAILED: %d problem(s) between %s and %s" % (len(problems), header, ", ".join(f90s)))
        return 1
    print("OK: %s match the Fortran interfaces in %s" % (summary, ", ".join(os.path.basename(f) for f in f90s)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
