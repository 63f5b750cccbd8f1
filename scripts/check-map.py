#!/usr/bin/env python3
"""The map's crate table against the crate graph: ARCHITECTURE.md's table "crate | may import
(Spools crates) | imports nothing from" must name, for every workspace crate, exactly the
Spools crates its Cargo.toml lists under [dependencies] (from `cargo metadata`), and the
table must have a row for every crate. Also the rule the table cannot show: what a rank links
(the facade and the three front doors: spools-py, spools-c, spools-mpi) never reaches the
launcher (spools-launch), not even through another crate. Run by scripts/test.sh.

    python3 scripts/check-map.py
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def table(path):
    """crate -> set of Spools crates its row says it may import."""
    rows, inside = {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("| crate | may import"):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            name = re.match(r"`([a-z-]+)`", cells[0]).group(1)
            rows[name] = set(re.findall(r"`(spools(?:-[a-z]+)?)`", cells[1]))
    return rows


def graph():
    """crate -> set of workspace crates listed under its [dependencies]."""
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    members = {p["name"] for p in meta["packages"]}
    return {p["name"]: {d["name"] for d in p["dependencies"] if d["kind"] is None and d["name"] in members}
            for p in meta["packages"]}


def main():
    said, real = table(os.path.join(ROOT, "ARCHITECTURE.md")), graph()
    wrong = []
    for name in sorted(set(said) | set(real)):
        if name not in said:
            wrong.append(f"{name}: no row in ARCHITECTURE.md's crate table")
        elif name not in real:
            wrong.append(f"{name}: a row in the table, but no such workspace crate")
        elif said[name] != real[name]:
            extra, missing = sorted(said[name] - real[name]), sorted(real[name] - said[name])
            wrong.append(f"{name}: the table says {sorted(said[name])}, Cargo.toml lists {sorted(real[name])}"
                         + (f" (not listed: {extra})" if extra else "") + (f" (not in the table: {missing})" if missing else ""))
    for rank_crate in ("spools", "spools-py", "spools-c", "spools-mpi"):
        seen, todo = set(), [rank_crate]
        while todo:
            c = todo.pop()
            for d in real.get(c, ()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        if "spools-launch" in seen:
            wrong.append(f"{rank_crate} links spools-launch: a rank must never link the launcher")
    for w in wrong:
        print(w)
    print(f"the crate table: {len(said)} rows, {len(real)} crates, {len(wrong)} difference(s)")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
