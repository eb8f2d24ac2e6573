"""Reading the console blocks of a how-to page, so that a test runs the page's own
commands and compares what they print with what the page shows.

In a ```` ```console ```` block, a line starting with ``$ `` is a command (a line
ending in ``\\`` continues on the next one); every other line is expected output:
``...`` stands for any lines, and a line ending in ``...`` is a prefix.
"""

from __future__ import annotations

import re

_CONSOLE = re.compile(r"^```console\n(.*?)^```", re.S | re.M)


def blocks(text: str) -> list[tuple[list[str], list[str]]]:
    """``(commands, expected output lines)`` per console block; continuations joined."""
    return [console_block(match[1]) for match in _CONSOLE.finditer(text)]


def console_block(body: str) -> tuple[list[str], list[str]]:
    """``(commands, expected output lines)`` of one console block's text."""
    commands: list[str] = []
    expected: list[str] = []
    continued = False
    for line in body.splitlines():
        if continued:
            commands[-1] += "\n" + line
        elif line.startswith("$ "):
            commands.append(line[2:])
        else:
            expected.append(line)
        continued = line.endswith("\\")
    return commands, expected


def matches(expected: list[str], printed: str) -> list[str]:
    """The expected lines missing from ``printed`` (empty when all are there)."""
    lines = printed.splitlines()
    missing = []
    for want in expected:
        if want == "...":
            continue
        if want.endswith("..."):
            if not any(line.startswith(want[:-3]) for line in lines):
                missing.append(want)
        elif want not in lines:
            missing.append(want)
    return missing


# Every fence at the start of a line: its language, its attributes and its body.
_FENCE = re.compile(r"^```(?P<lang>\w*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^```[ \t]*$",
                    re.S | re.M)
_TITLE = re.compile(r'title="(?P<name>[^"]+)"')


def steps(text: str) -> list[tuple[str, str | tuple[list[str], list[str]]]]:
    """The page in order: ``("file:NAME", body)`` for a block titled ``NAME`` and
    ``("console", (commands, expected output))`` for a console block."""
    found: list[tuple[str, str | tuple[list[str], list[str]]]] = []
    for fence in _FENCE.finditer(text):
        title = _TITLE.search(fence["attrs"])
        if fence["lang"] == "console":
            found.append(("console", console_block(fence["body"])))
        elif title is not None:
            found.append((f"file:{title['name']}", fence["body"]))
    return found
