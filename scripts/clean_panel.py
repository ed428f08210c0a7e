#!/usr/bin/env python
"""Score a verifier on the clean panel (halucheck/evaluation/panel.py) and compare it with a stored baseline.

    python scripts/clean_panel.py build                      # print the ids the rule selects; --write to make v<N>.ids
    python scripts/clean_panel.py score -v selfcheck -p cpu-1.5b --name head
    python scripts/clean_panel.py score -v selfcheck -p cpu-1.5b --name plain --without json
    python scripts/clean_panel.py compare plain head         # paired bootstrap, per set and over all
    python scripts/clean_panel.py score ... --baseline scripts/panel/baseline-selfcheck-cpu-1.5b.jsonl

Every run keeps its replies in one cache shared by all runs (``runs/panel/replies.duckdb``, keyed on the
request's hash), so an unchanged request costs nothing: a change that alters what a tenth of the items are shown
re-asks only that tenth. Each run's predictions go to ``runs/panel/<name>/``.

``--without`` switches off, for this run only, what the judges are shown or how they decode, one piece at a time,
so each can be measured alone and together (docs/prompt-changes.md):

- ``rule``: the system prompt's sentence about instructions inside the data;
- ``quote``: freeing the claim's words and the passages' names and numbers from the repetition controls;
- ``bearing``: showing only the passage sentences that share a topic word with the claim;
- ``notes``: leaving notes about the text and chat small talk out of the text under check;
- ``clean``: taking planted instructions out of untrusted text;
- ``prefixes``: judging a text of several sentences by its sentence prefixes too (the most hallucinated decides).

``--with`` puts back what the judges' prompt had before the panel measured it: ``json`` (untrusted text as JSON
string literals, quotes and escapes, instead of plain text on its line), ``rule`` (the long sentence about JSON
strings being data, instead of the short one), ``reminder`` (a line repeating it just before the question).

``store-baseline NAME`` writes run NAME's verdicts (ids, verdicts and scores only: no dataset text or label) to
``scripts/panel/baseline-<verifier>-<profile>.jsonl``, the file later runs compare against.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from halucheck.evaluation import panel  # noqa: E402

RUNS = Path("runs") / "panel"
SWITCHES = ("rule", "quote", "bearing", "notes", "clean", "prefixes")


def _switch(without: set[str], with_: set[str]) -> None:
    """Turn pieces of what judges are shown off (or back on) for this process (see the module docstring)."""
    import halucheck.prompts as prompts
    import halucheck.prompts.untrusted as untrusted
    import halucheck.verifiers.judges as judges
    import halucheck.verifiers.prefixes as prefixes

    if "clean" in without:
        untrusted.clean = prefixes.clean = lambda text: text
    if "json" in with_:  # the judges' text as JSON strings, as the other prompts have it
        prompts._ENV.filters["plain"] = prompts.as_data
    if "rule" in with_:
        prompts._ENV.globals["plain_rule"] = prompts.DATA_RULE
    elif "rule" in without:
        prompts._ENV.globals["plain_rule"] = ""
    if "reminder" in with_:  # a line just before the question, as the judges had it before 2026-12-06
        def _user(p, section, evidence, question, text, noun, extra) -> str:
            ctx = {"evidence": list(evidence), "question": question, "text": text, "noun": noun, **(extra or {})}
            return p["shared"].render(**ctx) + "\n\n" + prompts.DATA_REMINDER + "\n" + section["task"].render(**ctx)

        judges.PromptJudge._user = staticmethod(_user)
    if "quote" in without:
        judges.quotable = lambda claim, evidence: ""
    if "bearing" in without:
        untrusted.bearing = lambda passage, about: passage
    if "notes" in without:
        untrusted.statement = prefixes.statement = lambda text, question=None: text
    if "prefixes" in without:
        prefixes.parts = lambda text, question=None: [text]


def _rows(run: Path) -> dict[str, dict]:
    path = run / "predictions.jsonl"
    if not path.is_file():
        sys.exit(f"{path} not found: score that run first (python scripts/clean_panel.py score --name {run.name})")
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def _compare(a: Path, b: Path, n_boot: int) -> None:
    ra, rb = _rows(a) if a.is_dir() else _baseline(a), _rows(b) if b.is_dir() else _baseline(b)
    ids = [i for i in ra if i in rb]
    if not ids:
        sys.exit(f"{a} and {b} share no panel item: score both on the same panel version")
    if not any("label" in ra[i] or "label" in rb[i] for i in ids[:1]):
        sys.exit("two stored baselines hold no labels: compare a run folder with a baseline")
    undecided = {name: sum(r[i].get("prediction") is None for i in ids) for name, r in ((a.name, ra), (b.name, rb))}
    print(f"A = {a}, B = {b}: {len(ids)} panel items (v{panel.VERSION}); undecided (counted wrong): {undecided}")
    print(panel.table(panel.paired(ra, rb, ids, n_boot=n_boot), "A", "B"))


def _summary(runs: list[Path]) -> None:
    import numpy as np

    sets = list(dict.fromkeys(r["dataset"] for run in runs for r in _rows(run).values()))
    print("| run | switches | items | BalAcc all | AUROC all | " + " | ".join(f"{s} BalAcc" for s in sets) + " |")
    print("|---|---|---|---|---|" + "---|" * len(sets))
    for run in runs:
        rows = list(_rows(run).values())
        switches = run / "switches.json"
        sw = json.loads(switches.read_text()) if switches.is_file() else {}
        said = " ".join([*(f"+{w}" for w in sw.get("with", [])), *(f"-{w}" for w in sw.get("without", []))]) or "as shipped"

        def figures(rs):
            y = np.array([bool(r["label"]) for r in rs])
            p = np.array([(not r["label"]) if r.get("prediction") is None else bool(r["prediction"]) for r in rs])
            q = np.array([0.5 if r.get("score") is None else float(r["score"]) for r in rs])
            return {k: fn(y, p, q) for k, fn in panel.METRICS.items()}

        every = figures(rows)
        per = [figures([r for r in rows if r["dataset"] == s]) if any(r["dataset"] == s for r in rows) else None
               for s in sets]
        print(f"| {run.name} | {said} | {len(rows)} | {every['balanced_accuracy']:.3f} | {every['auroc']:.3f} | "
              + " | ".join("–" if f is None else f"{f['balanced_accuracy']:.3f}" for f in per) + " |")


def _baseline(path: Path) -> dict[str, dict]:
    if not path.is_file():
        sys.exit(f"{path} not found: store one with `python scripts/clean_panel.py store-baseline NAME`")
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="the ids the panel's rule selects")
    b.add_argument("--write", action="store_true", help=f"write them to {panel.ids_file()} (a new version only)")
    s = sub.add_parser("score", help="run a verifier on the panel")
    s.add_argument("-v", "--verifier", default="selfcheck")
    s.add_argument("-p", "--profile", default=None)
    s.add_argument("--config", default=None)
    s.add_argument("--name", required=True, help="the run's folder under runs/panel/")
    s.add_argument("--without", default="", help=f"comma-separated, of: {', '.join(SWITCHES)}")
    s.add_argument("--with", dest="with_", default="", help="comma-separated, of: json, rule, reminder")
    s.add_argument("--baseline", default=None, help="a run folder or a stored baseline file to compare with")
    s.add_argument("--sets", default=None, help="only these panel sets (comma-separated)")
    s.add_argument("--n-boot", type=int, default=1000)
    c = sub.add_parser("compare", help="paired bootstrap of two runs (folders under runs/panel/ or baseline files)")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--n-boot", type=int, default=1000)
    m = sub.add_parser("summary", help="one row per run: its switches, BalAcc and AUROC over all, per set mean")
    m.add_argument("runs", nargs="+")
    k = sub.add_parser("store-baseline", help="keep a run's verdicts as the baseline file")
    k.add_argument("name")
    c = sub.add_parser("ship-calibrator", help="fit the calibrator the package ships for a verifier and model on "
                       "a panel run's (or a stored baseline's) scores: what runs use when the user stored none")
    c.add_argument("run", help="a run name under runs/panel, or a baseline file")
    c.add_argument("-p", "--profile", default="cpu-1.5b", help="the profile the run was scored on (names the model)")
    args = ap.parse_args()

    if args.cmd == "build":
        ids = panel.select()
        if args.write:
            path = panel.ids_file()
            if path.exists():
                sys.exit(f"{path} exists: a panel version is never rewritten; raise panel.VERSION for a new rule")
            path.parent.mkdir(parents=True, exist_ok=True)
            head = (f"# clean panel v{panel.VERSION}: {len(ids)} dev items, {panel.PER_CLASS} per class per set, "
                    f"evidence as shown <= {panel.MAX_CHARS} characters (halucheck/evaluation/panel.py)\n")
            path.write_text(head + "\n".join(ids) + "\n", encoding="utf-8")
            print(f"wrote {len(ids)} ids to {path}")
        else:
            committed = panel.read_ids() if panel.ids_file().is_file() else None
            print("\n".join(ids))
            if committed is not None:
                print(f"# the rule {'gives' if committed == ids else 'no longer gives'} {panel.ids_file()}",
                      file=sys.stderr)
        return
    if args.cmd == "compare":
        _compare(_path(args.a), _path(args.b), args.n_boot)
        return
    if args.cmd == "summary":
        _summary([_path(r) for r in args.runs])
        return
    if args.cmd == "store-baseline":
        rows = _rows(RUNS / args.name)
        meta = json.loads((RUNS / args.name / "metrics.json").read_text(encoding="utf-8"))["settings"]
        path = panel.HERE / f"baseline-{meta['verifier']}-{meta.get('profile', 'none')}.jsonl"
        keep = ("id", "dataset", "prediction", "score")  # no labels: they are the datasets', read at compare time
        path.write_text("".join(json.dumps({k: r.get(k) for k in keep}) + "\n" for r in rows.values()), encoding="utf-8")
        print(f"wrote {len(rows)} verdicts of {args.name} to {path}")
        return

    if args.cmd == "ship-calibrator":
        _ship_calibrator(_path(args.run), args.profile)
        return
    without = {w for w in args.without.split(",") if w}
    with_ = {w for w in args.with_.split(",") if w}
    bad = (without - set(SWITCHES)) | (with_ - {"json", "rule", "reminder"})
    if bad:
        sys.exit(f"unknown switch {sorted(bad)[0]!r}; use: {', '.join(SWITCHES)}")
    _switch(without, with_)
    from halucheck.config import Settings
    from halucheck.evaluation.harness import run_eval
    from halucheck.evaluation.userdata import UserData

    items = panel.load_panel()
    if args.sets:
        keep = set(args.sets.split(","))
        items = [it for it in items if it.dataset in keep]
    by_set: dict[str, list] = {}
    for it in items:
        by_set.setdefault(it.dataset, []).append(it)
    data = [UserData(path=panel.ids_file(), name=name, items=its) for name, its in by_set.items()]
    settings = Settings.load(args.config, profile=args.profile)
    out = RUNS / args.name
    result = run_eval([], args.verifier, settings, out, data=data, log=lambda m: print(m, file=sys.stderr),
                      n_boot=args.n_boot, replies=RUNS / "replies.duckdb", calibration=False)
    switches = {"without": sorted(without), "with": sorted(with_)}
    (out / "switches.json").write_text(json.dumps(switches) + "\n", encoding="utf-8")
    cost = result.metrics.get("cost", {})
    print(f"{args.name}: {result.items} items; cost {json.dumps(cost)}")
    if args.baseline:
        _compare(out, _path(args.baseline), args.n_boot)


def _ship_calibrator(run: Path, profile: str) -> None:
    """Fit on the panel's dev items (labels read from the datasets: a baseline file holds none) and write the
    package's calibrator for the run's verifier and the profile's model. No undecided band: a default that left
    most claims undecided would hide the verdicts; a user who wants one fits it with `halucheck calibrate`."""
    from halucheck.config import Settings
    from halucheck.verifiers import calibration
    from halucheck.verifiers.calibration import shipped_path

    rows = _rows(run) if run.is_dir() else _baseline(run)
    verifier = (json.loads((run / "metrics.json").read_text())["settings"]["verifier"] if run.is_dir()
                else run.stem.removeprefix("baseline-").removesuffix(f"-{profile}"))
    labels = {it.id: it.label for it in panel.load_panel()}
    ids = [i for i, r in rows.items() if i in labels and r.get("score") is not None]
    model = Settings.load(profile=profile).profiles[profile].model
    cal = calibration.fit([rows[i]["score"] for i in ids], [labels[i] for i in ids], verifier=verifier,
                          profile=profile, model=model, split="dev", min_accuracy=None,
                          datasets=sorted({rows[i]["dataset"] for i in ids}), files=[str(run)])
    path = shipped_path(verifier, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cal.to_json(), encoding="utf-8")
    print(f"{cal.summary()}\nwrote {path} ({len(ids)} panel items of {run})")


def _path(name: str) -> Path:
    p = Path(name)
    return p if p.exists() or os.sep in name else RUNS / name


if __name__ == "__main__":
    main()
