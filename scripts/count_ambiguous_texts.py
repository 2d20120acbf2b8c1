"""How many texts a text-keyed, shifted echo server (llama-cpp-python) lets imprint score under
each ``ambiguous=`` strategy, from the local tokenizer alone (no server, no model weights used).

    python scripts/count_ambiguous_texts.py ../shared/data/wikimia/WikiMIA_length32.jsonl
"""

from __future__ import annotations

import argparse
import json

from imprint.backends.alignment import server_text
from imprint.backends.ambiguous_tokens import classify
from imprint.backends.http_logprobs import _load_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("jsonl", help="one JSON object a line, the text under 'input' or 'text'")
    parser.add_argument("--tokenizer", default="smollm2-135m")
    args = parser.parse_args()
    tok = _load_tokenizer(args.tokenizer)
    with open(args.jsonl, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    texts = [r.get("text", r.get("input")) for r in rows]
    out = classify(tok, texts)
    blocked = [
        bool(o.unsplit) or any(server_text(tok, o.ids[i]) == "" for i in o.ambiguous) for o in out
    ]
    n, clean = len(texts), sum(o.clean for o in out)
    resolvable = n - sum(blocked)
    forced = sum(len(o.ambiguous) for o, b in zip(out, blocked, strict=True) if not b)
    print(f"{n} texts; ambiguous=drop scores {clean} ({clean / n:.1%})")
    print(
        f"ambiguous=resolve_or_drop scores {resolvable} ({resolvable / n:.1%}) with {forced} "
        f"forced-token requests ({forced / max(resolvable, 1):.2f} per scored text); "
        f"{sum(blocked)} cannot be resolved (ambiguous=resolve refuses the run)"
    )


if __name__ == "__main__":
    main()
