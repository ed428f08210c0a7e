"""The README stays short and its links lead somewhere: at most 150 lines, every docs page it links exists
(each linked once), its test command is the one .ci/run runs, and every script has its one line."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_LINES = 150


def _doc_links(text: str) -> list[str]:
    """Markdown link targets inside docs/ (anchors dropped)."""
    return [target.split("#")[0] for target in re.findall(r"\]\((docs/[^)\s]+)\)", text)]


def test_readme_is_at_most_150_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, (f"README.md has {len(lines)} lines, at most {MAX_LINES}: move detail to "
                                     "a page under docs/ and link it")


def test_every_docs_page_the_readme_links_exists_and_is_linked_once():
    links = _doc_links(README.read_text())
    assert links, "README.md links no page under docs/"
    missing = [link for link in links if not (REPO / link).is_file()]
    assert missing == [], f"README.md links pages that do not exist: {missing}"
    twice = sorted({link for link in links if links.count(link) > 1})
    assert twice == [], f"README.md links these pages more than once: {twice}"


def test_doc_links_are_found():
    text = "see [the engines](docs/engines.md) and [x](docs/performance.md#prefix-reuse), not `docs/other.md`"
    assert _doc_links(text) == ["docs/engines.md", "docs/performance.md"]


def test_readme_test_command_is_what_ci_runs():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    command = [line for line in ci if line.strip() and not line.startswith("#")][-1]
    assert "pytest" in command
    assert command in README.read_text().splitlines(), f"README.md does not show .ci/run's test command: {command}"


def test_every_script_path_in_readme_and_docs_exists():
    pages = [README, *sorted((REPO / "docs").glob("*.md")), REPO / "scripts" / "experiments" / "README.md"]
    stale = sorted({f"{page.relative_to(REPO)}: {path}" for page in pages
                    for path in re.findall(r"scripts/[\w./-]+\.(?:py|sh)", page.read_text())
                    if not (REPO / path).is_file()})
    assert stale == [], f"these pages name scripts that are not there (moved? fix the path): {stale}"


def test_every_script_has_its_line():
    """What scripts/ keeps is named in docs/scripts.md; each experiment in scripts/experiments/README.md."""
    listed = (REPO / "docs" / "scripts.md").read_text()
    kept = [p for p in sorted((REPO / "scripts").iterdir()) if p.suffix in (".py", ".sh")]
    assert [p.name for p in kept if f"`scripts/{p.name}`" not in listed] == []
    experiments = REPO / "scripts" / "experiments"
    listed = (experiments / "README.md").read_text()
    assert [p.name for p in sorted(experiments.glob("*.py")) if f"`{p.name}`" not in listed] == []
