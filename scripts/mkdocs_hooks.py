"""MkDocs hook (mkdocs.yml ``hooks:``): the pages under docs/ link the project's other files (figures and summaries
in measurements/, experiment files, scripts) by their relative paths, so that the links work where the Markdown is
read in the repository. For the built site, each such target that exists is copied into the site under ``repo/``
and the link resolves to the copy; a target that does not exist stays an unresolved link, which
``mkdocs build --strict`` refuses, as it refuses a broken link between pages. So does a link to a file at the
project's top (README.md, the pointers left where pages were moved from): a page links the page instead. Markdown
files outside docs/ are copied as they are (raw text), not rendered."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

# Inline links and images, [text](target "title") / ![alt](target), and HTML src="..." / href="...".
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|(?:src|href)=\"([^\"]+)\"")
COPY_FOLDER = "repo"


class RepositoryFile(File):
    """A project file outside docs/, copied into the site as it is (a Markdown file is not made a page)."""

    def is_documentation_page(self) -> bool:
        return False


def link_targets(markdown: str) -> set[str]:
    """The relative paths (no scheme, not absolute, not only an anchor) that ``markdown`` links or embeds."""
    targets = set()
    for match in LINK.finditer(markdown):
        parts = urlsplit(match.group(1) or match.group(2))
        if not parts.scheme and not parts.netloc and parts.path and not parts.path.startswith("/"):
            targets.add(unquote(parts.path))
    return targets


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Register every existing project file outside docs/ that ``page`` links, under the path MkDocs resolves the
    link to (``../measurements/…``, relative to docs/); static files are copied after every page is read."""
    docs = Path(config.docs_dir).resolve()
    project = Path(config.config_file_path).resolve().parent
    for target in link_targets(markdown):
        uri = posixpath.normpath(posixpath.join(posixpath.dirname(page.file.src_uri), target))
        if not uri.startswith("../") or files.get_file_from_path(uri) is not None:
            continue
        path = (docs / uri).resolve()
        if not path.is_file() or project not in path.parents or path.parent == project:
            continue  # left unresolved: the strict build names the link
        copy = RepositoryFile(
            uri,
            src_dir=str(docs),
            dest_dir=config.site_dir,
            use_directory_urls=config.use_directory_urls,
            dest_uri=f"{COPY_FOLDER}/{path.relative_to(project).as_posix()}",
            inclusion=InclusionLevel.INCLUDED,
        )
        files.append(copy)
    return markdown
