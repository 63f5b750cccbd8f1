#!/usr/bin/env python3
"""No import cycle between the files of a crate: the check run by scripts/test.sh.

For each crate under crates/, the files of its module tree (from src/lib.rs or src/main.rs,
following `mod x;`) and the edges A -> B where something written in file A names an item
*defined* in file B:
- every `use` tree (groups, `self`, `as`, globs), at module level or inside a function;
- every path in code (`crate::a::b`, `super::x`, `self::y`, or a path whose first segment is
  a child module, an item or an imported name of the module);
- for a glob import `use m::*`, each identifier of A that m resolves.
Re-exports are followed to the defining file (a `mod.rs` that only re-exports a child is not
a node of the edge); a `pub use` is an edge only if the file also uses the name itself.
Comments, strings, char literals and lifetimes are skipped, so intra-doc links are not
edges. `mod x;` is not an edge.

A cycle is a strongly connected set of more than one file. The ones the project still has
are listed in scripts/file-cycles.allow (`crate: file, file, ...`); the check fails on a
cycle not listed there (new, grown or shrunk) and on a listed one that is gone, so the list
only shrinks, and an edit that removes a cycle removes its line.

    python3 scripts/file-cycles.py            # the check (exit 1 on a difference)
    python3 scripts/file-cycles.py --why      # also the names behind each edge of a cycle
    python3 scripts/file-cycles.py --no-tests # leaves out #[cfg(test)] modules
    python3 scripts/file-cycles.py --root DIR # another workspace (the tool's own tests)
"""
import os, re, sys
from collections import defaultdict

KEYWORD_ITEMS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union"}

def tokenize(src):
    toks = []  # (kind, text)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1; continue
        if src.startswith("//", i):
            j = src.find("\n", i); i = n if j < 0 else j; continue
        if src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i): depth += 1; i += 2
                elif src.startswith("*/", i): depth -= 1; i += 2
                else: i += 1
            continue
        m = re.match(r'(b|c)?r(#*)"', src[i:i+300]) if c in "bcr" else None
        if m:
            hashes = m.group(2); end = '"' + hashes
            j = src.find(end, i + m.end()); i = n if j < 0 else j + len(end)
            toks.append(("lit", "")); continue
        if c == '"' or (c in "bc" and i + 1 < n and src[i+1] == '"'):
            i += 1 if c == '"' else 2
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1; toks.append(("lit", "")); continue
        if c == "'" or (c == "b" and i + 1 < n and src[i+1] == "'"):
            k = i + (1 if c == "'" else 2)
            if k < n and src[k] == "\\":
                j = src.find("'", k + 2); i = j + 1; toks.append(("lit", "")); continue
            if k + 1 < n and src[k+1] == "'":
                i = k + 2; toks.append(("lit", "")); continue
            # lifetime / label
            m = re.match(r"'[A-Za-z_][A-Za-z0-9_]*", src[i:i+100])
            i += m.end() if m else 1; continue
        if c == "$" and src.startswith("$crate", i):
            toks.append(("id", "crate")); i += 6; continue
        m = re.match(r"(r#)?[A-Za-z_][A-Za-z0-9_]*", src[i:i+200])
        if m:
            t = m.group(0); toks.append(("id", t[2:] if t.startswith("r#") else t)); i += m.end(); continue
        m = re.match(r"[0-9][0-9A-Za-z_\.]*", src[i:i+100])
        if m:
            i += m.end(); toks.append(("lit", "")); continue
        if src.startswith("::", i):
            toks.append(("p", "::")); i += 2; continue
        toks.append(("p", c)); i += 1
    return toks


class Crate:
    def __init__(self, root_file, no_tests=False, macros=False):
        self.src_dir = os.path.dirname(root_file)
        self.no_tests, self.macros = no_tests, macros
        self.scope = defaultdict(lambda: defaultdict(list))  # mod -> name -> [entry]
        self.globs = defaultdict(list)     # mod -> [(origin_mod, segs)]
        self.mod_file = {}                 # mod path (tuple) -> file
        self.uses = []                     # (file, origin_mod, segs, alias, glob)
        self.code_paths = []               # (file, mod, segs)
        self.idents = defaultdict(set)     # file -> identifiers
        self.macro_defs = defaultdict(set) # name -> files
        self.macro_uses = defaultdict(set) # file -> names
        self.files = []
        self.in_use = defaultdict(lambda: defaultdict(int))
        self.id_count = defaultdict(lambda: defaultdict(int))
        self.load_file(root_file, (), os.path.dirname(root_file))

    # ---- module tree and items -------------------------------------------------------
    def load_file(self, path, modpath, child_dir):
        self.files.append(path); self.mod_file[modpath] = path
        toks = tokenize(open(path, encoding="utf-8").read())
        self.idents[path] = {t for k, t in toks if k == "id"}
        for j, (k, t) in enumerate(toks):
            # a use of a name: not a method or field (`.x`), not a declaration (`mod x`, `fn x`)
            if k == "id" and not (j > 0 and toks[j-1][1] in (".", "mod", "fn")):
                self.id_count[path][t] += 1
        self.parse(toks, path, modpath, child_dir)

    def parse(self, toks, path, modpath, child_dir):
        # stack entries: (kind, modpath, child_dir); kind 'mod' or 'blk'
        stack = [("mod", modpath, child_dir)]
        attrs = []  # text of attributes seen just before the next item
        i, n = 0, len(toks)
        def cur_mod():
            for k, m, d in reversed(stack):
                if k == "mod": return m, d
        while i < n:
            k, t = toks[i]
            at_mod_level = stack[-1][0] == "mod"
            if t == "#" and i + 1 < n and toks[i+1][1] in ("[", "!"):
                j = i + 1 + (toks[i+1][1] == "!")
                depth, s = 0, []
                while j < n:
                    if toks[j][1] == "[": depth += 1
                    elif toks[j][1] == "]":
                        depth -= 1
                        if depth == 0: break
                    s.append(toks[j][1]); j += 1
                attrs.append(" ".join(s)); i = j + 1; continue
            if t == "use" and k == "id":
                is_pub = i > 0 and (toks[i-1][1] == "pub" or (toks[i-1][1] == ")" and i > 3 and toks[i-3][1] == "pub") or (toks[i-1][1] == ")" and i > 4 and toks[i-4][1] == "pub"))
                j = i + 1; tree = []
                while j < n and toks[j][1] != ";": tree.append(toks[j]); j += 1
                m, _ = cur_mod()
                for k2, t2 in tree:
                    if k2 == "id": self.in_use[path][t2] += 1
                for segs, alias, glob in parse_use_tree(tree):
                    self.uses.append((path, m, segs, alias, glob, is_pub and at_mod_level))
                    if at_mod_level:
                        if glob: self.globs[m].append((m, segs))
                        else:
                            name = alias or segs[-1]
                            if name != "_": self.scope[m][name].append(("use", m, segs))
                attrs = []; i = j + 1; continue
            if t == "mod" and k == "id" and i + 2 < n and toks[i+1][0] == "id":
                name, nxt = toks[i+1][1], toks[i+2][1]
                is_test = any(re.search(r"\bcfg\b.*\btest\b", a) and "not" not in a for a in attrs)
                m, d = cur_mod()
                child = m + (name,)
                if self.no_tests and is_test:
                    # skip the module entirely
                    if nxt == ";": i += 3; attrs = []; continue
                    depth, j = 0, i + 2
                    while j < n:
                        if toks[j][1] == "{": depth += 1
                        elif toks[j][1] == "}":
                            depth -= 1
                            if depth == 0: break
                        j += 1
                    i = j + 1; attrs = []; continue
                if at_mod_level: self.scope[m][name].append(("mod", child))
                if nxt == ";":
                    for cand in (os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")):
                        if os.path.exists(cand):
                            base = os.path.basename(cand)
                            cd = os.path.dirname(cand) if base == "mod.rs" else os.path.join(d, name)
                            self.load_file(cand, child, cd); break
                    else:
                        print(f"warning: no file for mod {name} in {path}", file=sys.stderr)
                    i += 3; attrs = []; continue
                if nxt == "{":
                    self.mod_file[child] = path
                    stack.append(("mod", child, os.path.join(d, name)))
                    i += 3; attrs = []; continue
            if t == "macro_rules" and i + 2 < n and toks[i+1][1] == "!" and toks[i+2][0] == "id":
                self.macro_defs[toks[i+2][1]].add(path)
                m, _ = cur_mod()
                i += 3; attrs = []; continue
            if k == "id" and t in KEYWORD_ITEMS and at_mod_level and i + 1 < n and toks[i+1][0] == "id":
                name = toks[i+1][1]
                if not (t == "const" and name in ("fn", "unsafe", "async", "extern")):
                    if t == "static" and name == "mut": name = toks[i+2][1]
                    m, _ = cur_mod()
                    self.scope[m][name].append(("def", path))
            if k == "id" and i + 1 < n and toks[i+1][1] == "!" and i + 2 < n and toks[i+2][1] in ("(", "[", "{"):
                self.macro_uses[path].add(t)
            if not (k == "id" and t in ("pub", "crate", "super", "in", "self")) and t not in ("(", ")"):
                attrs = []
            if t == "{":
                stack.append(("blk", None, None))
            elif t == "}":
                if len(stack) > 1: stack.pop()
            # code paths: maximal a::b::c not preceded by '::'
            if k == "id" and i + 2 < n and toks[i+1][1] == "::" and toks[i+2][0] == "id" and \
                    not (i > 0 and toks[i-1][1] == "::") and t not in ("Self",):
                segs, j = [t], i + 1
                while j + 1 < n and toks[j][1] == "::" and toks[j+1][0] == "id":
                    segs.append(toks[j+1][1]); j += 2
                m, _ = cur_mod()
                self.code_paths.append((path, m, segs))
            i += 1

    # ---- resolution -----------------------------------------------------------------
    def resolve_name(self, m, name, seen, first=False):
        key = (m, name)
        if key in seen: return set()
        seen = seen | {key}
        out = set()
        for e in self.scope.get(m, {}).get(name, []):
            if e[0] == "def": out.add(("item", e[1]))
            elif e[0] == "mod": out.add(("mod", e[1]))
            else: out |= self.resolve_path(e[1], e[2], seen)
        if out: return out
        for origin, segs in self.globs.get(m, []):
            for tgt in self.resolve_path(origin, segs, seen):
                if tgt[0] == "mod": out |= self.resolve_name(tgt[1], name, seen)
        return out

    def resolve_path(self, m, segs, seen=frozenset()):
        s0 = segs[0]
        if s0 == "crate": cur, rest = {("mod", ())}, segs[1:]
        elif s0 in ("self", "super"):
            mm, rest = m, list(segs)
            while rest and rest[0] in ("self", "super"):
                if rest[0] == "super": mm = mm[:-1]
                rest = rest[1:]
            cur = {("mod", mm)}
        else:
            cur, rest = self.resolve_name(m, s0, seen, True), segs[1:]
        for seg in rest:
            mods = [c for c in cur if c[0] == "mod"]
            if not mods:
                break  # item reached: enum variant, associated item, method
            nxt = set()
            for _, mm in mods:
                r = self.resolve_name(mm, seg, seen)
                nxt |= r if r else {("modfile", mm)}
            items = {c for c in cur if c[0] == "item"}
            cur = nxt | items if not nxt else nxt
        return cur

    def file_of(self, tgt):
        if tgt[0] == "item": return tgt[1]
        if tgt[0] == "modfile": return self.mod_file.get(tgt[1])
        return None  # a module itself: no edge

    def edges(self):
        ev = defaultdict(set)  # (a, b) -> reasons
        def add(a, tgts, why):
            for t in tgts:
                b = self.file_of(t)
                if b and b != a: ev[(a, b)].add(why)
        for f, m, segs, alias, glob, is_pub in self.uses:
            if is_pub and not glob:
                name = alias or segs[-1]
                if self.id_count[f][name] <= self.in_use[f][name]:
                    continue  # a re-export only: transparent, not a dependency of this file
            if glob:
                for tgt in self.resolve_path(m, segs):
                    if tgt[0] == "mod":
                        for name in self.idents[f]:
                            add(f, self.resolve_name(tgt[1], name, frozenset()), "::".join(segs) + "::* " + name)
                    else:
                        add(f, {tgt}, "::".join(segs) + "::*")
            else:
                add(f, self.resolve_path(m, segs), "use " + "::".join(segs))
        for f, m, segs in self.code_paths:
            add(f, self.resolve_path(m, segs), "::".join(segs))
        if self.macros:
            for f, names in self.macro_uses.items():
                for nm in names:
                    defs = self.macro_defs.get(nm, set())
                    if len(defs) == 1 and f not in defs:
                        ev[(f, next(iter(defs)))].add(nm + "!")
        return ev


def parse_use_tree(toks):
    """[(segs, alias, glob)] from the tokens of a use tree."""
    out = []
    pos = [0]
    def parse(prefix):
        segs = list(prefix)
        while pos[0] < len(toks):
            k, t = toks[pos[0]]
            if t == "::": pos[0] += 1; continue
            if t == "{":
                pos[0] += 1
                while pos[0] < len(toks) and toks[pos[0]][1] != "}":
                    parse(segs)
                    if pos[0] < len(toks) and toks[pos[0]][1] == ",": pos[0] += 1
                pos[0] += 1; return
            if t == "*":
                out.append((segs, None, True)); pos[0] += 1; return
            if t in (",", "}"):
                break
            if k == "id" and t == "as":
                alias = toks[pos[0]+1][1]; pos[0] += 2
                out.append((segs, alias, False)); return
            if k == "id":
                if t == "self" and segs:
                    pos[0] += 1
                    if pos[0] < len(toks) and toks[pos[0]][1] == "as":
                        out.append((segs, toks[pos[0]+1][1], False)); pos[0] += 2
                    else:
                        out.append((segs, segs[-1], False))
                    return
                segs = segs + [t]; pos[0] += 1; continue
            pos[0] += 1  # stray punctuation (leading '::', pub(..) should not occur)
        if segs and segs != list(prefix):
            out.append((segs, None, False))
    parse([])
    return [(s, a, g) for s, a, g in out if s]


def sccs(nodes, adj):
    """Tarjan's strongly connected components with more than one node."""
    index, low, on, st, res, c = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(100000)
    def strong(v):
        index[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in adj.get(v, ()):
            if w not in index: strong(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            res.append(comp)
    for v in nodes:
        if v not in index: strong(v)
    return [s for s in res if len(s) > 1]


def crate_cycles(root, name, no_tests=False, why=False):
    """(cycles as sorted tuples of src-relative paths, report lines) of one crate."""
    src = os.path.join(root, "crates", name, "src")
    top = next((os.path.join(src, r) for r in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, r))), None)
    if not top:
        return [], []
    cr = Crate(top, no_tests)
    ev = cr.edges()
    adj = defaultdict(set)
    for a, b in ev: adj[a].add(b)
    rel = lambda f: os.path.relpath(f, src)
    lines, cycles = [], []
    on_disk = {os.path.join(dp, f) for dp, _, fs in os.walk(src) for f in fs if f.endswith(".rs")}
    orphan = sorted(rel(f) for f in on_disk - set(cr.files))
    if orphan:
        lines.append(f"{name}: files outside the module tree: {', '.join(orphan)}")
    for comp in sccs(sorted(cr.files), adj):
        cycles.append(tuple(sorted(rel(f) for f in comp)))
        if why:
            cs = set(comp)
            lines.append(f"{name}: cycle of {len(comp)}")
            for (a, b), reasons in sorted(ev.items()):
                if a in cs and b in cs:
                    lines.append(f"    {rel(a)} -> {rel(b)}: " + "; ".join(sorted(reasons)[:6]) + (" ..." if len(reasons) > 6 else ""))
    return sorted(cycles), lines


def read_allowed(path):
    allowed = set()
    if not os.path.exists(path):
        return allowed
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            name, files = line.split(":", 1)
            allowed.add((name.strip(), tuple(sorted(f.strip() for f in files.split(",")))))
    return allowed


def main():
    argv = sys.argv[1:]
    root = argv[argv.index("--root") + 1] if "--root" in argv else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    allow = argv[argv.index("--allow") + 1] if "--allow" in argv else os.path.join(root, "scripts", "file-cycles.allow")
    found, files, report = set(), 0, []
    for name in sorted(os.listdir(os.path.join(root, "crates"))):
        cycles, lines = crate_cycles(root, name, "--no-tests" in argv, "--why" in argv)
        report += lines
        found |= {(name, c) for c in cycles}
        files += sum(len(c) for c in cycles)
    allowed = read_allowed(allow)
    for line in report:
        print(line)
    new, gone = sorted(found - allowed), sorted(allowed - found)
    for name, c in new:
        print(f"cycle not in {os.path.relpath(allow, root)}: {name}: {', '.join(c)}")
    for name, c in gone:
        print(f"listed but gone (remove its line from {os.path.relpath(allow, root)}): {name}: {', '.join(c)}")
    print(f"{len(found)} file cycle(s) in {len({n for n, _ in found})} crate(s), {files} files; {len(allowed)} listed")
    sys.exit(1 if new or gone or any("outside the module tree" in l for l in report) else 0)


if __name__ == "__main__":
    main()
