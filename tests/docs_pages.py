"""The README and the pages of docs/ as the tests read them: a page's headings and sections, its
code blocks, and the commands it gives (issue 41). Pages are named by their path in the
repository: ``README.md``, ``docs/monitoring.md``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.shared import REPO

#: Blocks whose every line is a command (a ``#`` comment line apart).
SHELL_LANGS = frozenset({"sh", "bash", "shell"})
FENCE = re.compile(r"^```(\S*)\s*$")
HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")


def pages() -> list[str]:
    """The README, then every page of docs/."""
    return ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]


def page_text(page: str) -> str:
    return (REPO / page).read_text()


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    #: The page's line number (from 1) of the block's first line inside the fence.
    line: int


def blocks(text: str) -> list[Block]:
    """The fenced code blocks, in order."""
    found: list[Block] = []
    lang: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(text.split("\n"), 1):
        fence = FENCE.match(line)
        if lang is None and fence:
            lang, start, body = fence.group(1), number + 1, []
        elif lang is not None and line.rstrip() == "```":
            found.append(Block(lang, "\n".join(body) + "\n", start))
            lang = None
        elif lang is not None:
            body.append(line)
    return found


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line index from 0, level, title) of every heading outside code blocks."""
    found: list[tuple[int, int, str]] = []
    inside = False
    for index, line in enumerate(text.split("\n")):
        if FENCE.match(line):
            inside = not inside
        elif not inside and (match := HEADING.match(line)):
            found.append((index, len(match.group(1)), match.group(2)))
    return found


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, each
    space a ``-``."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated one gets ``-1``, ``-2``, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for _, _, title in headings(text):
        base = slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def doc_section(page: str, heading: str) -> str:
    """The text under the heading whose title is ``heading`` (without its ``#``s), up to the next
    heading of the same or a higher level."""
    text = page_text(page)
    lines = text.split("\n")
    found = headings(text)
    for position, (index, level, title) in enumerate(found):
        if title == heading:
            end = next((i for i, lv, _ in found[position + 1 :] if lv <= level), len(lines))
            return "\n".join(lines[index + 1 : end])
    raise KeyError(f"{page} has no heading {heading!r}")


@dataclass(frozen=True)
class Command:
    page: str
    #: The page's line number (from 1).
    line: int
    #: As written, without a trailing ``# comment`` or the ``$ `` prompt.
    text: str
    #: The lines shown after a ``$ `` command as its output, or None (a shell block shows none).
    output: tuple[str, ...] | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def without_comment(line: str) -> str:
    """``line`` without a trailing `` # ...`` (a ``#`` outside quotes after a space)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(page: str) -> list[Command]:
    """Every command ``page`` gives: each line of a ``sh``/``bash``/``shell`` block, and each
    ``$ `` line of any other block (``console``, or none) with the lines after it as its output."""
    found: list[Command] = []
    for block in blocks(page_text(page)):
        lines = block.body.rstrip("\n").split("\n")
        if block.lang in SHELL_LANGS:
            for offset, line in enumerate(lines):
                text = without_comment(line)
                if text:
                    found.append(Command(page, block.line + offset, text, None))
            continue
        prompts = [i for i, line in enumerate(lines) if line.startswith("$ ")]
        for position, i in enumerate(prompts):
            end = prompts[position + 1] if position + 1 < len(prompts) else len(lines)
            found.append(Command(page, block.line + i, lines[i][2:].strip(), tuple(lines[i + 1 : end])))
    return found


def all_commands() -> list[Command]:
    return [command for page in pages() for command in commands(page)]


def defined_tests(path: Path) -> set[str]:
    """Names of the test functions a test file defines (read, not imported)."""
    return set(re.findall(r"^(?:async )?def (test_\w+)\(", path.read_text(), re.M))
