"""Every documented example is a test, in docs/ as in the README (tests/test_readme.py runs the
README's tour):

- docs/cli.md is the output of the generator (`python -m sumo_cli.cli.docgen > docs/cli.md`), so the
  CLI reference cannot drift from the code;
- every `sumo ...` line in a ```bash block of README.md and docs/*.md parses against the CLI's
  command tree (the subcommand and every option exist, values have their types), without running;
- every command of docs/performance.md's table parses (a `sumo` line) or names a module that exists
  (a `python -m` line);
- a ```bash block right after the line `<!-- runnable -->` in docs/*.md runs, line by line, at small
  settings (test_readme's substitutions), in a fresh shell in a new folder with the shipped agents;
- every relative link of README.md and docs/*.md points at a file and heading that exist.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sumo_cli.cli import docgen
from test_readme import ACTIVATE, SMALL, fresh_shell_env

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
RUNNABLE = "<!-- runnable -->"
BLOCK = re.compile(r"^(<!-- runnable -->\n)?```bash\n(.*?)^```", re.S | re.M)
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")


def bash_blocks(text: str) -> list[tuple[bool, str]]:
    """(runnable, body) of every ```bash block."""
    return [(bool(m.group(1)), m.group(2)) for m in BLOCK.finditer(text)]


def sumo_part(command: str) -> str | None:
    """The `sumo ...` part of one shell command (leading VAR=value assignments dropped), if any."""
    words = command.strip().split(" ")
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    line = " ".join(words).strip()
    return line if line.startswith("sumo ") or line == "sumo" else None


def sumo_lines(block: str) -> list[str]:
    """Every `sumo` command of a block: one per line, or per part of a line joined by &&."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            cmd = sumo_part(part)
            if cmd:
                found.append(cmd)
    return found


def documented_commands() -> list[tuple[str, str]]:
    return [(page.relative_to(ROOT).as_posix(), cmd) for page in PAGES
            for _, block in bash_blocks(page.read_text()) for cmd in sumo_lines(block)]


def check_parses(cmd: str) -> None:
    words = [w for w in shlex.split(cmd) if w not in ("--help", "--version")]
    if words == ["sumo"]:
        return
    try:
        docgen.resolve(words)
    except docgen.usage_errors() as exc:
        pytest.fail(f"`{cmd}` does not parse: {exc.format_message()}")


def test_cli_reference_is_generated():
    committed = (DOCS / "cli.md").read_text()
    assert committed == docgen.render(), (
        "docs/cli.md differs from the CLI: regenerate it with `python -m sumo_cli.cli.docgen > docs/cli.md`")


def test_documented_commands_are_found():
    pages = {page for page, _ in documented_commands()}
    assert {"README.md", "docs/method.md"} <= pages
    assert any(runnable for page in PAGES[1:] for runnable, _ in bash_blocks(page.read_text()))


@pytest.mark.parametrize(("page", "cmd"), documented_commands(), ids=lambda v: v[:60])
def test_documented_command_parses(page, cmd):
    check_parses(cmd)


def test_a_wrong_command_does_not_parse():
    """The check above would catch a renamed option or command."""
    for bad in ("sumo play ant-mlp bug-mlp --roundz 3", "sumo plya ant-mlp bug-mlp", "sumo play ant-mlp",
                "sumo play ant-mlp bug-mlp --rounds many"):
        with pytest.raises(docgen.usage_errors()):
            docgen.resolve(shlex.split(bad))


def test_runnable_marks_a_bash_block():
    """A `<!-- runnable -->` line that is not right before a ```bash block would be ignored."""
    for page in PAGES[1:]:
        text = page.read_text()
        marks = text.count(RUNNABLE)
        assert marks == sum(runnable for runnable, _ in bash_blocks(text)), page


def test_performance_commands_exist():
    """Each row of docs/performance.md's table names the command that measures it, and it exists."""
    rows = [line for line in (DOCS / "performance.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| ratio")]
    assert len(rows) >= 10
    for row in rows:
        cell = row.split(" | ")[1]
        spans = re.findall(r"`([^`]+)`", cell)
        assert spans, f"no command in: {row[:80]}"
        for span in spans:
            cmd = sumo_part(span)
            if cmd:
                check_parses(cmd)
            elif " -m " in f" {span}":
                module = span.split(" -m ", 1)[1].split()[0]
                assert importlib.util.find_spec(module), f"no module {module}: {row[:80]}"
            elif span.startswith("--"):
                continue  # an option of the command before it
            else:
                assert (ROOT / span).exists(), f"no {span}: {row[:80]}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    found = {slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"', text))


def test_links_resolve():
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.name}: link to a missing file {target}"
            if anchor and dest.suffix == ".md":
                assert anchor in anchors(dest), f"{page.name}: link to a missing heading {target}"


def test_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def runnable_pages() -> list[Path]:
    return [p for p in PAGES[1:] if any(r for r, _ in bash_blocks(p.read_text()))]


@pytest.mark.slow
@pytest.mark.parametrize("page", runnable_pages(), ids=lambda p: p.name)
def test_runnable_docs_blocks_run(page, tmp_path):
    """The runnable blocks of a page, in order, each line pasted into a fresh shell after the
    set-up, in one new folder (so a block may use what the one before it trained)."""
    (tmp_path / ".venv").symlink_to(sys.prefix)
    for runnable, block in bash_blocks(page.read_text()):
        if not runnable:
            continue
        for cmd in sumo_lines(block):
            for pattern, small in SMALL:
                cmd = re.sub(pattern, small, cmd)
            proc = subprocess.run(["bash", "-c", f"{ACTIVATE} && {cmd}"], cwd=tmp_path, env=fresh_shell_env(),
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"{page.name} command failed: {cmd}\n{proc.stderr[-3000:]}"
