"""What the HTTP client lets through: the API root it is given (written to the manifest, so
no credentials), the shape of the answers it scores, and server text it may quote in errors
(the API key masked)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import SplitResult, urlsplit

from imprint.errors import ConfigError, ImprintError


class APIError(ImprintError):
    """The server refused or kept failing; the message says which request and why."""


KEY_HINT = "put the key in an environment variable and name it with --api-key-env"


def check_api_base(url: str) -> str:
    """``url`` when it is an http(s) API root without credentials, path parameters (``;k=v``),
    query or fragment.

    Otherwise a :class:`ConfigError` quoting the URL with anything secret masked: the URL is
    written to ``manifest.json`` and logs, and request paths are appended to it.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (parsing the port validates it)
    except ValueError as err:
        # urllib's message quotes the URL's parts: leave it out when something was masked
        masked = bool(re.search(r"[@?#;]", url))
        raise ConfigError(
            f"api_base {_redact_url(url)!r} is not a valid URL "
            + (f"(its host or port does not parse); {KEY_HINT}" if masked else f"({err})")
        ) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        # quoted as typed, not rebuilt: without '://', urlsplit reads 'user' of 'user:pw@host'
        # (or 'localhost' of 'localhost:8000') as the scheme, and the rest as the path
        raise ConfigError(
            "api_base must be an http(s) URL ending at the API root, e.g. "
            f"http://127.0.0.1:8000/v1; got {_redact_unparsed(url)!r}"
        )
    shown = _redact_url(url, parts)
    if "@" in parts.netloc:
        raise ConfigError(
            f"api_base {shown!r} carries credentials (user:password@), which would be written "
            f"to manifest.json: remove them and {KEY_HINT} (the key goes in a Bearer header)"
        )
    if ";" in parts.path:  # path parameters: a token there would be in every request URL
        raise ConfigError(
            f"api_base {shown!r} has path parameters (;...): a key there would be written to "
            "manifest.json and sent in every request URL, so give the root only "
            f"(e.g. http://127.0.0.1:8000/v1); {KEY_HINT}"
        )
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise ConfigError(
            f"api_base {shown!r} has a query or fragment: a key there would be written to "
            "manifest.json, and request paths go after the API root, so give the root only "
            f"(e.g. http://127.0.0.1:8000/v1); {KEY_HINT}"
        )
    return url


def _redact_url(url: str, parts: SplitResult | None = None) -> str:
    """``url`` with user info, path parameters, query and fragment replaced by ``***`` (safe
    to print)."""
    if parts is None:  # unparsable: keep only what precedes any credential, parameter or query
        return re.split(r"[@?#;]", url, maxsplit=1)[0] + (
            "***" if re.search(r"[@?#;]", url) else ""
        )
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    path = parts.path.split(";", 1)[0] + (";***" if ";" in parts.path else "")
    shown = f"{parts.scheme}://{netloc}{path}"
    return shown + ("?***" if parts.query else "") + ("#***" if parts.fragment else "")


def _redact_unparsed(url: str) -> str:
    """``url`` as given, with its user info (up to the last ``@`` before the path, with or
    without a scheme or ``//``) and any path parameters, query or fragment replaced by ``***``."""
    shown = re.sub(r"^((?:[^:/?#@]*:)?//)?[^/?#]*@", r"\1***@", url)
    cut = re.split(r"[?#;]", shown, maxsplit=1)
    return cut[0] + ("***" if len(cut) > 1 else "")


#: secrets shorter than this are masked as whole tokens only (see :func:`mask_secret`)
SHORT_SECRET = 8


def mask_secret(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` replaced by ``***``; a long secret's first or last 8 characters
    are masked with the word around them too (servers often echo a truncated key).

    A secret shorter than :data:`SHORT_SECRET` characters (``x``, as a local server that checks
    no key is given) is masked only where it stands as a whole token, not inside other words:
    it guards nothing, and masking it as a substring would mangle the quoted server body."""
    if not secret:
        return text
    if len(secret) < SHORT_SECRET:
        return re.sub(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", "***", text)
    text = text.replace(secret, "***")
    if len(secret) >= 16:
        text = re.sub(re.escape(secret[:8]) + r"\S*", "***", text)
        text = re.sub(r"\S*" + re.escape(secret[-8:]), "***", text)
    return text


def snippet(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]


SHAPE_FIX = (
    "the server is not OpenAI-compatible here; fix or upgrade it, or put a compliant proxy in front"
)


def malformed_line(
    url: str, request: str, what: str, raw: bytes, seen: str, base_url: str, secret: str | None
) -> str:
    """The one line that stops a run whose ``request`` (e.g. "a black-box sampling request
    (n=4)") got 200 answers that are not OpenAI answers (``what``: :func:`read_answer`'s reason;
    ``seen``: "twice", "once"), quoting the last body's start (:func:`body_head`) and the fix."""
    return (
        f"{url} answered {request} with HTTP 200 but {what}, {seen}; {body_head(raw, secret)}; "
        "a malformed answer is a protocol error, not a transient one: not sent again, and not "
        f"stored; point --api-base at an OpenAI-compatible server's /v1 root (now {base_url}); "
        f"if it is one, its version or its route {urlsplit(url).path} is not supported "
        "(upgrade it, or put a compliant proxy in front)"
    )


def read_answer(
    raw: bytes, decode: Callable[[bytes], Any] = json.loads
) -> tuple[dict[str, Any], None] | tuple[None, str]:
    """(the JSON object, None) when a 200 body is a completions answer as far as its list of
    choice objects goes, else (None, what is wrong with it: not JSON, or the field it lacks).
    ``decode``: the JSON reader (gray-box: :func:`imprint.backends.alignment.decode_answer`)."""
    if not raw.strip():
        return None, "an empty body"
    try:
        data = decode(raw)
    except UnicodeDecodeError:
        return None, "a body that is not UTF-8 text"
    except ValueError:  # cut short, or not JSON at all (an HTML page, a proxy's message)
        return None, "a body that is not JSON"
    if not isinstance(data, dict):
        return None, f"JSON that is not an object ({_json_kind(data)})"
    if "choices" not in data:
        fields = ", ".join(json.dumps(k) for k in list(data)[:6]) + (
            ", ..." if len(data) > 6 else ""
        )
        return None, f'JSON without the field "choices" ({f"it has {fields}" if data else "{}"})'
    choices = data["choices"]
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        return None, f'JSON whose "choices" is not a list of objects (it is {short(choices, 40)})'
    return data, None


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def body_head(raw: bytes, secret: str | None, limit: int = 80) -> str:
    """A body's size and first ``limit`` characters as a Python literal, safe on one line
    (line breaks, control characters and quotes escaped, bytes that are not UTF-8 replaced), the
    key masked before the cut: ``body (1,234 bytes): '<html>\\r\\n<head>...'``."""
    text = raw[: 4 * limit + 2 * len(secret or "")].decode("utf-8", "replace")
    text = mask_secret(text, secret)
    cut = len(text) > limit or 4 * limit + 2 * len(secret or "") < len(raw)
    return f"body ({len(raw):,} bytes): {text[:limit]!r}{'...' if cut else ''}"


def short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def choice_index(choice: dict[str, Any], position: int) -> int:
    index = choice.get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else position


def usage_tokens(usage: Any) -> tuple[int, int] | str:
    """(prompt_tokens, completion_tokens) from a body's ``usage`` (absent or null: 0), or a
    description of what is wrong with it."""
    if usage is None:
        return 0, 0
    if not isinstance(usage, dict):
        return f'"usage" is {short(usage)}, not an object like {{"prompt_tokens": 12, ...}}'
    counts = []
    for field in ("prompt_tokens", "completion_tokens"):
        value = usage.get(field)
        if value is None:
            value = 0
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f'"usage.{field}" is {short(value)}, not a count of tokens (an integer >= 0)'
        counts.append(value)
    return counts[0], counts[1]


def choice_text(url: str, choice: dict[str, Any], i: int, chat: bool, quote: Any) -> str:
    """A choice's text; a missing or non-string text is an error, never scored as ``str``."""
    message = choice.get("message")
    value = message.get("content") if isinstance(message, dict) else None
    value = value if chat else choice.get("text")
    if isinstance(value, str):
        return value
    other = "completions" if chat else "chat"
    if ("text" in choice) if chat else ("message" in choice):
        fix = f"this is a {other} endpoint's answer: use --api-mode {other}"
    else:
        fix = (
            "the server gave no text for this sample (a refusal, a content filter, or tokens "
            "spent on hidden reasoning?); a missing text cannot be scored"
        )
    field = "message.content" if chat else "text"
    detail = f"choice {i} has {field} = {short(value)}"
    refusal = message.get("refusal") if isinstance(message, dict) else None
    if refusal:
        detail += f" (refusal: {short(refusal)})"
    raise APIError(
        f"{url} answered 200 but {quote(detail)} "
        f"(finish_reason {short(choice.get('finish_reason'))}); {fix}"
    )


def list_models(client: Any, base_url: str, quote: Any, key_env: str | None) -> Any:
    """The ``GET /v1/models`` JSON, or None when the server does not list its models."""
    return read_models(client, base_url, quote, key_env)[0]


def read_models(
    client: Any, base_url: str, quote: Any, key_env: str | None
) -> tuple[Any, str | None]:
    """(the ``GET /v1/models`` JSON, None) or (None, why none: the status of a server that does
    not list its models, 404 or another 4xx). A rate limit, a server error or a 200 that is not
    a model list is that endpoint's failure, raised as :class:`APIError` naming it: read as
    "no list" it came out later as a wrong dialect (SaMIA's top_k refused)."""
    import httpx

    url = f"{base_url}/models"
    try:
        response = client.get(url)
    except httpx.TransportError as err:
        raise APIError(
            f"{url}: no answer ({type(err).__name__}); is the server running at {base_url}?"
        ) from None
    if response.status_code in (401, 403):
        raise APIError(
            f"{url} answered {response.status_code}: {quote(response.text)}; check the API key "
            f"in ${key_env}"
        )
    status = response.status_code
    if status == 429 or status >= 500:
        kind = "rate-limited" if status == 429 else "a server error"
        raise APIError(
            f"{url} answered {status} ({kind}): {quote(response.text)}; imprint reads the served "
            "models and the server's sampling fields there before any work: rerun once the "
            f"server at {base_url} answers it"
        )
    if status == 404 and not base_url.rstrip("/").endswith("/v1"):
        _refuse_missing_v1(client, base_url, url)
    if status >= 400:  # not every server lists its models (then no name check)
        return None, f"GET /v1/models answered {status}"
    try:
        listed = response.json()
    except ValueError:
        listed = None
    if not (isinstance(listed, dict) and isinstance(listed.get("data"), list)):
        raise APIError(
            f"{url} answered {status} but not a model list ({quote(response.text)}); is "
            f"{base_url} the /v1 root of an OpenAI-compatible server?"
        )
    return listed, None


def _refuse_missing_v1(client: Any, base_url: str, url: str) -> None:
    """A base without ``/v1`` whose ``/v1/models`` lists models: every later request would 404
    too, and the 404 came out as a probe failure or SaMIA's top_k refused, not naming the fix."""
    import httpx

    root = base_url.rstrip("/") + "/v1"
    try:
        listed = client.get(f"{root}/models")
    except httpx.TransportError:
        return
    if listed.status_code == 200 and '"data"' in listed.text:
        raise ConfigError(
            f"{url} answered 404 but {root}/models lists the served models: the API root ends "
            f"in /v1; pass --api-base {root}"
        )


def check_model(listed: Any, model: str, base_url: str) -> list[str]:
    """The model names ``GET /v1/models`` listed; a ``model`` not among them is refused."""
    data = listed.get("data") if isinstance(listed, dict) else None
    entries = data if isinstance(data, list) else []
    names = [str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e]
    if names and model not in names:
        raise ConfigError(
            f"model {model!r} is not served at {base_url}: GET /v1/models lists "
            f"{', '.join(repr(n) for n in names[:20])}; pass one of these as --model"
        )
    return names


def first_choice(data: dict[str, Any], where: str) -> Any:
    """The answer's first choice; a one-line error quoting the answer when it has none."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ConfigError(
            f"{where}: the server's answer has no choices ({snippet(json.dumps(data))}); is "
            "this an OpenAI-compatible /v1/completions?"
        )
    return choices[0]
