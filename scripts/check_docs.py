#!/usr/bin/env python3
"""Checks the product manual and the source comments.

    scripts/check_docs.py [REPO_ROOT]

Fails (exit code 1, one `file:line: problem` per finding on stdout) on:

- a dead relative link in README.md or docs/*.md: a markdown link `[text](path)` or
  `[text](path#anchor)` whose path does not exist in the repository, or whose anchor names no
  heading of a markdown file (GitHub's heading ids); http:, https:, mailto: and pure
  `#anchor` links are not checked;
- words that point outside the product, in README.md, docs/, bench/README.md, and in the
  comments of the sources under common/, engine/, transport/, graph/, cmd/, tests/, bench/ and
  scripts/: the patterns SESSION, ISSUE and HASH_REF below, and the name of a markdown file the
  repository does not contain (MARKDOWN_NAME: a document the reader cannot open).

Only comments are checked in sources, so code (including C++ preprocessor lines and string
literals) never trips it. Exit code 0 when nothing is found; 2 for a bad argument.
"""

import os
import re
import sys

# Documents whose links are checked, relative to the root (plus every docs/*.md).
LINKED_DOCS = ["README.md"]
# Documents checked for the words below, besides docs/ (whole folder, markdown files).
WORD_DOCS = ["README.md", "bench/README.md"]
SOURCE_DIRS = ["common", "engine", "transport", "graph", "cmd", "tests", "bench", "scripts"]
SKIP_DIRS = {".git", "__pycache__", "node_modules", "target"}
C_LIKE = {".cpp", ".hpp", ".h", ".cc", ".c", ".cxx", ".hxx", ".ipp", ".java", ".js", ".rs"}
HASH_COMMENT = {".py", ".sh", ".cmake", ".toml", ".txt", ".yml", ".yaml", ".bash"}
# Scripts without a suffix whose first line names one of these interpreters use # comments.
HASH_INTERPRETERS = ("python", "sh", "bash")
# A project document's name (by convention in capitals, like README.md) in prose or a comment,
# outside URLs; checked against every markdown file in the repository. Lower-case names are
# files programs write (a results table), not documents.
MARKDOWN_NAME = re.compile(r"(?<![\w.-])[\w./-]*?([A-Z][A-Z0-9_-]*\.md)\b")
URL = re.compile(r"\w+://\S+")
KNOWN_MARKDOWN = set()  # basenames of the repository's markdown files, filled by main()

# The word, then a number (with a space, a dash or a '#' between, any case). The word alone,
# as in a ZeroMQ session or a session field, is fine.
SESSION = re.compile(r"\bsession[ \t]*[-#]?[ \t]*\d+", re.IGNORECASE)
ISSUE = re.compile(r"\bissue[ \t]*[-#]?[ \t]*\d+", re.IGNORECASE)
# A tracker reference: a '#' right after a space, '(' or the line's start, digits, then not a
# word character or a dot. Markdown headings have a space after their '#'s; preprocessor lines
# have a letter.
HASH_REF = re.compile(r"(?:^|(?<=[\s(\[,;]))#\d+\b(?![.\w])")
MARKDOWN_LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE_LINK = re.compile(r"!\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def word_problems(text, hash_refs=True):
    """The forbidden words in one piece of prose. `hash_refs`: also look for HASH_REF (not in
    markdown code, where a '#' and a number are a program's output, e.g. a checkpoint's)."""
    problems = []
    for pattern, what in ((SESSION, "a session number"), (ISSUE, "an issue number")):
        for m in pattern.finditer(text):
            problems.append(f"{what} ('{m.group(0).strip()}'): describe the product, not its history")
    if hash_refs:
        for m in HASH_REF.finditer(text):
            problems.append(f"an issue reference ('{m.group(0)}'): describe the product, not its history")
    for m in MARKDOWN_NAME.finditer(URL.sub("", text)):
        if m.group(1) not in KNOWN_MARKDOWN:
            problems.append(f"'{m.group(0)}' is not in the repository: do not refer to it")
    return problems


def markdown_lines(path):
    """(line number, text) of every line of a markdown file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return list(enumerate(f.read().split("\n"), start=1))


def heading_ids(path):
    """The anchors GitHub gives a markdown file's headings: lower case, punctuation dropped,
    spaces as '-', a repeated id suffixed -1, -2, ..."""
    ids, seen, in_fence = set(), {}, False
    for _, line in markdown_lines(path):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        ids.add(slug if n == 0 else f"{slug}-{n}")
    return ids


def check_links(root, rel, findings):
    path = os.path.join(root, rel)
    base = os.path.dirname(path)
    in_fence = False
    for number, line in markdown_lines(path):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        # Inline code spans are not links.
        prose = re.sub(r"`[^`]*`", "", line)
        for pattern in (MARKDOWN_LINK, IMAGE_LINK):
            for m in pattern.finditer(prose):
                target = m.group(1).strip("<>")
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
                    continue  # http:, https:, mailto: ... and anchors within the page
                file_part = target.split("#", 1)[0].split("?", 1)[0]
                if not file_part:
                    continue
                resolved = os.path.normpath(os.path.join(base, file_part))
                if not resolved.startswith(os.path.normpath(root)):
                    findings.append((rel, number, f"link '{target}' leads outside the repository"))
                elif not os.path.exists(resolved):
                    findings.append((rel, number, f"dead link '{target}': no such file"))
                elif "#" in target and resolved.endswith(".md") and os.path.isfile(resolved):
                    anchor = target.split("#", 1)[1]
                    if anchor not in heading_ids(resolved):
                        findings.append((rel, number, f"dead link '{target}': no heading with that anchor"))


def check_markdown_words(root, rel, findings):
    in_fence = False
    for number, line in markdown_lines(os.path.join(root, rel)):
        if FENCE.match(line):
            in_fence = not in_fence
        for problem in word_problems(line, hash_refs=False):
            findings.append((rel, number, problem))
        if not in_fence:
            for problem in word_problems(re.sub(r"`[^`]*`", "", line), hash_refs=True):
                if problem.startswith("an issue reference"):
                    findings.append((rel, number, problem))


def comment_style(path):
    ext = os.path.splitext(path)[1].lower()
    if ext in C_LIKE:
        return "c"
    name = os.path.basename(path)
    if ext in HASH_COMMENT or name == "CMakeLists.txt":
        return "hash"
    if ext == "":
        try:
            with open(path, "rb") as f:
                first = f.readline(200)
        except OSError:
            return None
        if first.startswith(b"#!") and any(i.encode() in first for i in HASH_INTERPRETERS):
            return "hash"
    if ext == ".md":
        return "markdown"
    return None


def c_comments(text):
    """(line number, comment text) of every // and /* */ comment, skipping string and
    character literals (raw strings included) so their contents never count as comments."""
    out = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i + 2:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end + 2
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            if open_paren < 0 or open_paren - i > 20:
                i += 1
                continue
            delim = text[i + 2:open_paren]
            close = text.find(")" + delim + '"', open_paren)
            close = n if close < 0 else close + len(delim) + 2
            line += text.count("\n", i, close)
            i = close
        elif c in "\"'":
            # A ' between digits is a digit separator (1'000), not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum():
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


def hash_comments(text):
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        # A '#' inside a string is rare in these scripts; the comment starts at the first '#'
        # outside quotes.
        quote = None
        for k, ch in enumerate(line):
            if quote:
                if ch == "\\":
                    continue
                if ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                out.append((number, line[k + 1:]))
                break
    return out


def python_docstrings(text):
    """Lines of triple-quoted strings in a Python file: its docstrings are its comments."""
    out = []
    for m in re.finditer(r'("""|\'\'\')(.*?)\1', text, re.DOTALL):
        first = text.count("\n", 0, m.start()) + 1
        for k, part in enumerate(m.group(2).split("\n")):
            out.append((first + k, part))
    return out


def check_source(root, rel, findings):
    path = os.path.join(root, rel)
    style = comment_style(path)
    if style is None:
        return
    if style == "markdown":  # a folder's README: checked as a document
        check_markdown_words(root, rel, findings)
        return
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return
    if style == "c":
        comments = c_comments(text)
    else:
        comments = hash_comments(text)
        if rel.endswith(".py") or text.startswith("#!/usr/bin/env python"):
            comments += python_docstrings(text)
    for number, comment in comments:
        for problem in word_problems(comment):
            findings.append((rel, number, problem))


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(__file__), ".."))
    if not os.path.isfile(os.path.join(root, "README.md")):
        print(f"check_docs: {root} is not the repository's root (no README.md)", file=sys.stderr)
        return 2
    this_file = os.path.relpath(os.path.abspath(__file__), root)
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        KNOWN_MARKDOWN.update(name for name in files if name.endswith(".md"))

    findings = []
    docs = sorted(
        os.path.join("docs", name)
        for name in os.listdir(os.path.join(root, "docs"))
        if name.endswith(".md")
    ) if os.path.isdir(os.path.join(root, "docs")) else []
    for rel in LINKED_DOCS + docs:
        if os.path.isfile(os.path.join(root, rel)):
            check_links(root, rel, findings)
    for rel in WORD_DOCS + docs:
        if os.path.isfile(os.path.join(root, rel)):
            check_markdown_words(root, rel, findings)
    for top in SOURCE_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
            for name in sorted(files):
                rel = os.path.relpath(os.path.join(folder, name), root)
                if rel in (this_file, "bench/README.md"):
                    continue  # bench/README.md is checked as a document above
                check_source(root, rel, findings)

    for rel, number, problem in findings:
        print(f"{rel}:{number}: {problem}")
    if findings:
        print(f"check_docs: {len(findings)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
