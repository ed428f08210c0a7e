"""What the defence against planted text costs on clean text: prints, over every item of the named sets,
how many answers and claims lose a sentence as a note about themselves (``untrusted.notes``) or as chat small
talk (``untrusted.small_talk``), and how much of each grounded set's passages a judge is shown
(``untrusted.bearing``).

    python scripts/experiments/untrusted_cost.py [--split dev] [--list FILE]

``--list FILE`` writes every note and small talk taken out (set, id, the sentence) and every passage shown in
part (set, id, characters kept), one JSON line each, so that two versions of the defence can be compared with
``diff``. Reads the datasets from ``../shared/datasets`` (or ``HALUCHECK_DATASETS``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from halucheck.evaluation import datasets
from halucheck.prompts.untrusted import OMITTED, clean, notes, shown, small_talk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="all", choices=datasets.SPLITS)
    parser.add_argument("--list", type=Path, default=None)
    args = parser.parse_args()
    listed: list[dict] = []

    seen: set[tuple[str, str | None]] = set()
    altered = chatty = 0
    for name in sorted(datasets.DATASETS):
        if name == "factool-code":  # code is shown as written
            continue
        items = datasets.load(name, args.split)
        set_altered = set_texts = set_chat = 0
        for it in items:
            for text in {it.answer or "", it.claim or ""} - {""}:
                key = (text, it.question)
                if key in seen:
                    continue
                seen.add(key)
                set_texts += 1
                found = notes(text, it.question)
                if found:
                    set_altered += 1
                    listed += [{"set": name, "id": it.id, "note": text[a:b]} for a, b in found]
                chat = small_talk(text, it.question)
                if chat:
                    set_chat += 1
                    listed += [{"set": name, "id": it.id, "small_talk": text[a:b]} for a, b in chat]
        altered += set_altered
        chatty += set_chat
        print(f"{name}: {set_altered} of {set_texts} distinct answers and claims lose a sentence as a note, "
              f"{set_chat} one as small talk")
    print(f"all: {altered} of {len(seen)} distinct answers and claims lose a sentence as a note, {chatty} one as "
          "small talk")

    for name in sorted(datasets.GROUNDED):
        items = [it for it in datasets.load(name, "dev") if it.evidence]
        kept = total = cut = gone = passages = 0
        for it in items:
            text = it.answer if it.question and it.answer else it.claim
            for raw, seen_text in zip(it.evidence, shown(it.evidence, text, it.question)):
                passages += 1
                total += len(clean(raw))
                kept += len(seen_text) if seen_text != OMITTED else 0
                if seen_text != clean(raw):
                    cut += 1
                    gone += seen_text == OMITTED
                    listed.append({"set": name, "id": it.id, "kept": len(seen_text), "of": len(clean(raw))})
        print(f"{name} (dev): judges are shown {kept / max(1, total):.1%} of the passages' characters; "
              f"{cut} of {passages} passages shown in part, {gone} of them as '{OMITTED}' alone")
    if args.list:
        args.list.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in listed), "utf-8")


if __name__ == "__main__":
    main()
