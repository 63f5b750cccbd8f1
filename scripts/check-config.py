#!/usr/bin/env python3
"""One configuration: `Config::load()` (which reads the environment and the config file)
is called only where a program or a runtime starts; every layer below reads the
configuration its runtime started with (`Communicator::config`, `Worker::config`, or a
value passed down), so that what `init_with` was given is what every layer uses. Run by
scripts/test.sh; fails naming any other call.

    python3 scripts/check-config.py
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# Where a configuration is first read, and why each may.
STARTS = {
    "crates/spools/src/world.rs": "init(): the runtime starts",
    "crates/spools/src/shared.rs": "joining a job as a rank: the runtime starts",
    "crates/spools-bench/src/session.rs": "a benchmark program starts",
    "crates/spools-cli/src/run.rs": "spools run, and the jobs the CLI launches itself",
    "crates/spools-c/src/world.rs": "spools_config_string(NULL): the configuration before init",
}


def main():
    found = []
    for dp, _, fs in os.walk(os.path.join(ROOT, "crates")):
        if f"{os.sep}src" not in dp:
            continue
        for f in fs:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dp, f)
            rel = os.path.relpath(path, ROOT)
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                code = line.split("//", 1)[0]
                if re.search(r"\bConfig::load\(", code) and rel not in STARTS:
                    found.append(f"{rel}:{n}: {line.strip()}")
    for f in found:
        print(f"Config::load() outside a program's start (read the runtime's configuration instead): {f}")
    print(f"Config::load(): {len(found)} call(s) outside the {len(STARTS)} starts")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
