"""The file-cycle check finds cycles made every way a Rust file names another, and no cycle
where a file only re-exports, mentions a name in a comment or string, or declares a module.

    python3 scripts/tests/test_file_cycles.py
"""
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "file-cycles.py")


def check(files, allow=""):
    """(exit status, output) of the tool over one crate `toy` made of `files`."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            full = os.path.join(root, "crates", "toy", "src", path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        with open(os.path.join(root, "allow"), "w", encoding="utf-8") as f:
            f.write(allow)
        r = subprocess.run([sys.executable, TOOL, "--root", root, "--allow", os.path.join(root, "allow")],
                           capture_output=True, text=True, check=False)
        return r.returncode, r.stdout


class FileCycles(unittest.TestCase):
    def assert_cycle(self, files, members):
        rc, out = check(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("cycle not in", out)
        self.assertIn(f"toy: {', '.join(sorted(members))}", out)

    def assert_none(self, files):
        rc, out = check(files)
        self.assertEqual(rc, 0, out)
        self.assertIn("0 file cycle(s)", out)

    def test_use_crate(self):
        self.assert_cycle({"lib.rs": "mod a;\nmod b;\n",
                           "a.rs": "use crate::b::B;\npub struct A;\n",
                           "b.rs": "use crate::a::A;\npub struct B;\n"}, ["a.rs", "b.rs"])

    def test_super_and_self_paths_in_code(self):
        self.assert_cycle({"lib.rs": "mod m;\n",
                           "m/mod.rs": "mod c;\npub const X: u8 = self::c::Y;\n",
                           "m/c.rs": "pub const Y: u8 = 1;\nfn f() -> u8 { super::X }\n"},
                          ["m/c.rs", "m/mod.rs"])

    def test_imported_name_and_use_inside_a_function(self):
        self.assert_cycle({"lib.rs": "mod a;\nmod b;\nuse a::A;\npub fn g() -> A { b::make() }\n",
                           "a.rs": "pub struct A;\npub fn h() { use crate::g; g(); }\n",
                           "b.rs": "pub fn make() -> crate::a::A { crate::a::A }\n"},
                          ["a.rs", "b.rs", "lib.rs"])

    def test_glob_import(self):
        self.assert_cycle({"lib.rs": "mod a;\nmod b;\n",
                           "a.rs": "use crate::b::*;\npub struct A(B);\n",
                           "b.rs": "pub struct B;\nfn f(_: crate::a::A) {}\n"}, ["a.rs", "b.rs"])

    def test_reexport_through_a_parent_is_followed_to_the_definition(self):
        # c.rs names `m::Leaf`, which m/mod.rs only re-exports from m/leaf.rs: c -> leaf,
        # and the parent's re-export is no edge, so nothing cycles.
        self.assert_none({"lib.rs": "mod m;\nmod c;\n",
                          "m/mod.rs": "mod leaf;\npub use leaf::Leaf;\npub fn f() { crate::c::g() }\n",
                          "m/leaf.rs": "pub struct Leaf;\n",
                          "c.rs": "use crate::m::Leaf;\npub fn g() { let _ = Leaf; }\n"})

    def test_comments_strings_and_mod_declarations_are_no_edges(self):
        self.assert_none({"lib.rs": "mod a;\nmod b;\n",
                          "a.rs": "/// See [`crate::b::B`].\npub struct A;\nconst S: &str = \"crate::b::B\";\n",
                          "b.rs": "use crate::a::A;\npub struct B(A);\n"})

    def test_listed_cycle_passes_and_a_gone_one_fails(self):
        files = {"lib.rs": "mod a;\nmod b;\n",
                 "a.rs": "use crate::b::B;\npub struct A;\n",
                 "b.rs": "use crate::a::A;\npub struct B;\n"}
        rc, out = check(files, allow="toy: a.rs, b.rs\n")
        self.assertEqual(rc, 0, out)
        rc, out = check({"lib.rs": "mod a;\n", "a.rs": "pub struct A;\n"}, allow="toy: a.rs, b.rs\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("listed but gone", out)

    def test_file_outside_the_module_tree_fails(self):
        rc, out = check({"lib.rs": "mod a;\n", "a.rs": "", "stray.rs": ""})
        self.assertEqual(rc, 1, out)
        self.assertIn("stray.rs", out)


if __name__ == "__main__":
    unittest.main()
