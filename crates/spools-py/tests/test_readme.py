"""The README's Python example is examples/python/tour.py, word for word, and it runs."""

import pytest

from conftest import REPO


def readme_block():
    text = (REPO / "README.md").read_text()
    start = text.index("## Python")
    body = text.index("```python\n", start) + len("```python\n")
    return text[body : text.index("```", body)]


def test_tour_is_the_readme_block():
    tour = (REPO / "examples" / "python" / "tour.py").read_text()
    # The file adds a docstring in front of the README's code, nothing else.
    assert tour.endswith(readme_block())
    assert tour.startswith('"""') and tour.count('"""') == 2


@pytest.mark.parametrize("n", [1, 4])
def test_tour_runs(run, n):
    run(n, REPO / "examples" / "python" / "tour.py", timeout=180)
