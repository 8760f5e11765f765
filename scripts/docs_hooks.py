"""MkDocs hook: the HTTP API reference page is rendered from the OpenAPI description
the web process serves (web/openapi.py), so the docs cannot drift from the routes.

docs/api-reference.md holds a marker line; the page's Markdown is built at build
time from `web.openapi.document()`, grouped by API, one section per operation.
"""

import re
import sys
from pathlib import Path

MARKER = "<!-- openapi-reference -->"
ROOT = Path(__file__).resolve().parents[1]
GROUPS = (
    ("/v1/admin/", "Admin API (operator token)"),
    ("/v1/checkout", "Checkout (operator token)"),
    ("/v1/webhooks/", "Provider webhooks"),
    ("/v1/panel/", "Panel API (operator session)"),
    ("/v1/", "Other"),
)
SPEC_REFERENCE = re.compile(r"\s*\(SPEC [\d.]+\)|SPEC [\d.]+:\s*")


def on_page_markdown(markdown, page, config, files):
    if MARKER not in markdown:
        return markdown
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from web import openapi

    return markdown.replace(MARKER, render(openapi.document()))


def render(document):
    lines = []
    paths = document["paths"]
    for prefix, title in GROUPS:
        chosen = [path for path in paths if path.startswith(prefix) and _group_of(path) == prefix]
        if not chosen:
            continue
        lines += [f"## {title}", ""]
        for path in chosen:
            for method, operation in paths[path].items():
                lines += _operation(method, path, operation)
    return "\n".join(lines)


def _group_of(path):
    return next(prefix for prefix, _ in GROUPS if path.startswith(prefix))


def _operation(method, path, operation):
    lines = [f"### `{method.upper()} {path}`", "", _text(operation.get("summary", "")), ""]
    security = [name for requirement in operation.get("security", []) for name in requirement]
    if security:
        lines += ["Authentication: " + ", ".join(f"`{name}`" for name in security), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | required | type | description |", "| - | - | - | - | - |"]
        for parameter in parameters:
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']} | {'yes' if parameter.get('required') else 'no'} "
                f"| {_type(parameter.get('schema', {}))} | {_cell(parameter.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += [f"Request body (`{media}`):", ""] + _properties(content.get("schema", {}))
    lines += ["| status | answer |", "| - | - |"]
    for status, response in operation.get("responses", {}).items():
        answer = _cell(response.get("description", ""))
        schema = next(iter(response.get("content", {}).values()), {}).get("schema")
        fields = sorted((schema or {}).get("properties", {}))
        if fields:
            answer += " — " + ", ".join(f"`{name}`" for name in fields)
        lines.append(f"| {status} | {answer} |")
    return lines + [""]


def _properties(schema):
    properties = schema.get("properties", {})
    if not properties:
        return [f"{_type(schema)}", ""]
    required = set(schema.get("required", []))
    lines = ["| field | required | type | description |", "| - | - | - | - |"]
    for name, field in properties.items():
        needed = "yes" if name in required else "no"
        lines.append(f"| `{name}` | {needed} | {_type(field)} | {_cell(field.get('description', ''))} |")
    return lines + [""]


def _type(schema):
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    kind = schema.get("type", "any")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if "enum" in schema:
        kind += ": " + ", ".join(f"`{value}`" for value in schema["enum"] if value is not None)
    if kind.startswith("array") and "items" in schema:
        kind += " of " + _type(schema["items"])
    bounds = [f"{key} {schema[key]}" for key in ("minimum", "maximum", "minLength", "maxLength") if key in schema]
    return _cell(kind + (f" ({', '.join(bounds)})" if bounds else ""))


def _text(text):
    return SPEC_REFERENCE.sub("", text)


def _cell(text):
    return _text(str(text)).replace("|", "\\|").replace("\n", " ")
