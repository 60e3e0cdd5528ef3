"""``report.html``: report.md as one self-contained page, its charts inline as SVG.

The page is well-formed XHTML markup (every tag closed, entities escaped) so an XML parser can check it, and it
references nothing outside itself: a user can open it from disk, attach it to a ticket or mail it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

import markdown

STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; max-width: 1180px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
tr:nth-child(even) td { background: #fafafa; }
code { background: #f3f3f3; padding: 0 0.25em; border-radius: 3px; font-size: 0.92em; }
blockquote { border-left: 4px solid #d62728; margin: 1em 0; padding: 0.2em 1em; background: #fff5f5; }
figure { margin: 1em 0; }
figure svg { max-width: 100%; height: auto; }
.generated { color: #777; font-size: 0.85em; }
"""

_IMG = re.compile(r'<img alt="([^"]*)" src="([^"]+)" />')


def _inline_svg(svg: str) -> str:
    """An SVG document as an element to put inside HTML (no XML declaration or DOCTYPE)."""
    start = svg.find("<svg")
    return svg[start:].strip() if start >= 0 else ""


def render_html(report_md: str, charts: Mapping[str, str], *, title: str, note: str = "") -> str:
    """The page for ``report_md``; each ``![alt](name)`` whose ``name`` is in ``charts`` becomes that SVG inline.

    An image not in ``charts`` is left out with its alt text (the page must not depend on files beside it)."""
    body = markdown.markdown(report_md, extensions=["tables"], output_format="xhtml")

    def inline(m: re.Match[str]) -> str:
        alt, src = html.unescape(m.group(1)), html.unescape(m.group(2))
        svg = charts.get(src)
        if svg is None:
            return f"<em>[{html.escape(alt)}: not embedded]</em>"
        return f'<figure role="img" aria-label="{html.escape(alt)}">{_inline_svg(svg)}</figure>'

    body = _IMG.sub(inline, body)
    body = body.replace("<p><figure", "<figure").replace("</figure></p>", "</figure>")
    foot = f'<p class="generated">{html.escape(note)}</p>' if note else ""
    return (
        "<!DOCTYPE html>\n"
        '<html xmlns="http://www.w3.org/1999/xhtml" lang="en">\n'
        '<head><meta charset="utf-8" /><meta name="viewport" content="width=device-width, initial-scale=1" />'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
        f"<body>\n{body}\n{foot}\n</body>\n</html>\n"
    )
