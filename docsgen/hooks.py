"""MkDocs hooks (``mkdocs.yml``: ``hooks``): add the generated reference pages, and serve the repository files
the docs link to (``../examples/...``) from the site itself, so every link of the built site resolves."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

# MkDocs loads this file by its path: the checkout's docsgen and trialfleet are what the pages describe
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from docsgen.cli_reference import cli_reference
from docsgen.config_reference import config_reference

GENERATED = {"reference/config.md": config_reference, "reference/cli.md": cli_reference}
#: a Markdown link from a page in docs/ to a file of the repository outside it
_OUTSIDE = re.compile(r"\]\(\.\./((?:examples|bench)/[^)#\s]+)\)")
_REPO_DIR = "repo"


def on_files(files: Files, config: Any) -> Files:
    for src_uri, generate in GENERATED.items():
        files.append(File.generated(config, src_uri, content=generate()))
    docs = Path(config["docs_dir"])
    root = docs.parent
    linked = {m for page in docs.glob("*.md") for m in _OUTSIDE.findall(page.read_text(encoding="utf-8"))}
    for target in sorted(linked):
        files.append(File.generated(config, f"{_REPO_DIR}/{target}", abs_src_path=str(root / target)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """``../examples/x.yml`` from a page at the top of docs/ is ``repo/examples/x.yml`` in the site."""
    if "/" in page.file.src_uri:
        return markdown
    return _OUTSIDE.sub(lambda m: f"]({_REPO_DIR}/{m.group(1)})", markdown)
