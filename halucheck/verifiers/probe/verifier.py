"""Two verifiers on one prompt pass per evidence chunk, nothing decoded:

- ``direct``: P(supported) from the logits of the reply's first token ("Yes" vs "No") after the fixed judge
  prompt (``prompts/direct.yaml``); on a server, from their log-probabilities among that token's likeliest
  (:mod:`.remote`);
- ``probe``: a head trained on labelled data (:mod:`.head`, :mod:`.training`) over the same pass's hidden states
  (the embedded engine only).

Every chunk of a claim's evidence is judged (:func:`~.prompt.chunks`); the claim's verdict is its best-supporting
chunk's (lowest P(hallucinated)), and the trace names that chunk and quotes its start.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

import numpy as np

from halucheck.records import Case, Cost, Turn, Verdict
from halucheck.verifiers.base import Verifier, closed_book, failed_verdict, under_check, verdict_from_score
from halucheck.verifiers.probe.features import Extractor, Features, extractor_for, unwrapped
from halucheck.verifiers.probe.prompt import Chunk, chunks, closest, joined, messages

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool
    from halucheck.verifiers.probe.remote import RemotePasses

ROLE = "initial"
# The direct verdict's P(hallucinated) at or above which a claim is hallucinated: the first token leans to "Yes"
# on this prompt, so a claim is flagged unless P(Yes) >= 0.70; the threshold with the best mean balanced accuracy
# over the 11 two-class training sets on dev (scripts/train_default_head.py fit; docs/trained-judge.md).
DIRECT_THRESHOLD = 0.30
SHOWN_CHARS = 400  # of the deciding chunk, in the trace
GROUP = 16  # claims whose passes run (and whose verdicts are handed on) together, on the embedded engine
# through a server: enough requests at once to keep a GPU box busy (16 claims' passes are a few dozen requests, and
# a group's grades wait for its passes); its replies are kept as they come (the run's reply cache), so a stop loses
# no more of them than with small groups
SERVER_GROUP = 512
HIDDEN_STATE_ENGINES = ("transformers",)  # the engines (models.yaml `engine:`) whose model gives hidden states


def prompts_of(check: Case, only_closest: bool = False) -> tuple[list[Chunk], list[tuple[dict, ...]]]:
    """The chunks of a check's evidence and the prompt of each; ``only_closest``: only the chunk that shares the most
    words with the claim (:func:`~.prompt.closest`; a training example's cheap stand-in for all of them)."""
    parts = chunks(joined(check.evidence))
    text = under_check(check.claim)
    if only_closest and len(parts) > 1:
        parts = [parts[closest(parts, check.claim.statement)]]
    return parts, [messages(c.text, text, check.claim.question) for c in parts]


class ChunkJudge(Verifier):
    """Scores every chunk of every claim in one batch of prompt passes; :meth:`chunk_scores` says how."""

    threshold = 0.5
    whole_evidence = True  # reads all of a claim's evidence, chunked (eval shows it whole, not its top sentences)

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self._extractor: "Extractor | RemotePasses | None" = None
        self.progress = None  # (done, total) after each pass, set by a caller that shows progress

    reads_replies = False  # whether a server's replies can stand in for the hidden states (RemotePasses)

    def extractor(self, engines: "EnginePool") -> "Extractor | RemotePasses":
        """Prompt passes on the embedded engine's model, or (``direct``) requests to a server that gives no hidden
        states; the server's engine keeps its wrappers (the run's reply cache holds the replies)."""
        engine = engines.engine_for(ROLE)
        if self.reads_replies and not hasattr(unwrapped(engine), "hf_model"):
            from halucheck.verifiers.probe.remote import RemotePasses

            if not isinstance(self._extractor, RemotePasses) or self._extractor.engine is not engine:
                self._extractor = RemotePasses(engine)
            return self._extractor
        if self._extractor is None or self._extractor.engine is not unwrapped(engine):
            self._extractor = extractor_for(engine, purpose=f"-v {self.name}")
            where = self.options.features
            if where:
                from halucheck.verifiers.probe.features import FeatureStore, default_store

                self._extractor.store = FeatureStore(default_store(self._extractor.model_id,
                                                                   self._extractor.precision) if where == "default"
                                                     else where)
        return self._extractor

    def chunk_scores(self, features: Sequence[Features], extractor: Extractor) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def verify(self, checks, engines, on_verdict=None, on_call=None) -> list[Verdict]:
        """Claims in groups of :data:`GROUP` (:data:`SERVER_GROUP` through a server; their passes batched, then
        graded, then handed on), so a run writes verdicts as it goes and a stopped one loses at most a group's
        passes. Without a feature store (``run``), each group starts from no kept KV: what it computes does not
        depend on the groups before it, so a resumed run computes a group as an uninterrupted one did (with a store,
        ``eval``'s, a resumed run reads the passes back instead, and a group reuses the KV of the one before).
        ``self.progress(done, total)``: passes over all groups."""
        t0 = time.perf_counter()
        extractor = self.extractor(engines)
        prompts = [prompts_of(c) for c in checks]
        total, done = sum(len(p) for _, p in prompts), 0
        out: list[Verdict] = []
        cost = Cost()
        size = SERVER_GROUP if extractor.serves_replies else GROUP
        for start in range(0, len(checks), size):
            if extractor.store is None:
                extractor.forget()
            group = range(start, min(start + size, len(checks)))
            progress = (lambda d, _t, before=done: self.progress(before + d, total)) if self.progress else None
            verdicts, spent = self._group([checks[i] for i in group], [prompts[i] for i in group], extractor,
                                          progress)
            cost = cost.merged(spent)
            for i, v in zip(group, verdicts):  # each verdict is final (graded) when handed on
                if on_call is not None:
                    on_call(len(prompts[i][0]))
                if on_verdict is not None:
                    on_verdict(i, v)
                done += len(prompts[i][0])
            out += verdicts
        extractor.forget()
        cost.wall_s = time.perf_counter() - t0
        self.costs = {self.name: cost}
        return out

    def _group(self, checks: Sequence[Case], prompts: Sequence[tuple[list[Chunk], list[tuple[dict, ...]]]],
               extractor: Extractor, progress) -> tuple[list[Verdict], Cost]:
        """The verdicts of ``checks`` (graded) from their chunks' ``prompts``, and what they cost."""
        passes0, reused0 = extractor.passes, extractor.reused_tokens
        features = extractor.features([m for _, p in prompts for m in p], progress)
        scores = self.chunk_scores(features, extractor) if features else np.zeros(0)
        out, deciding, at = [], [], 0
        for check, (parts, messages_of) in zip(checks, prompts):
            own, feats = scores[at:at + len(parts)], features[at:at + len(parts)]
            at += len(parts)
            best = int(np.argmin(own))
            failed = next((f.error for f in feats if f.error), None)
            out.append(failed_verdict(self.name, f"{self.name}: {failed}") if failed else
                       self._verdict(check, parts, best, float(own[best]), feats))
            deciding.append(messages_of[best])
        cost = Cost(claims=len(checks), llm_calls=extractor.passes - passes0,
                    prompt_tokens=sum(f.tokens for f in features), cached_tokens=extractor.reused_tokens - reused0)
        if self.options.grade:
            from halucheck.verifiers.severity import grade_after_pass

            grade_after_pass(checks, out, extractor, cost, lambda i, v: deciding[i])
        return out, cost

    def _verdict(self, check: Case, parts: list[Chunk], best: int, p: float, feats: Sequence[Features]) -> Verdict:
        hallucinated = p >= self.threshold
        chunk = parts[best]
        where = (f"chunk {best + 1} of {len(parts)}" if chunk.text else "no evidence (judged from the model's knowledge)")
        shown = chunk.text if len(chunk.text) <= SHOWN_CHARS else chunk.text[:SHOWN_CHARS].rsplit(" ", 1)[0] + " ..."
        opinion = (f"Best-supporting evidence: {where}, P(supported) {1 - p:.2f}"
                   + (f" (direct verdict {feats[best].p_supported:.2f})" if self.name != "direct" else "")
                   + (f": {shown}" if shown else "."))
        turn = Turn(state="S0", role="initial", opinion=opinion, factuality=not hallucinated,
                    error_severity=None if hallucinated else 0,
                    prompt_tokens=sum(f.tokens for f in feats), cached_tokens=sum(f.cached for f in feats),
                    p_factual=1.0 - p, verifier=self.name,
                    chunk={"index": best, "of": len(parts), "text": chunk.text} if chunk.text else None)
        v = verdict_from_score(self.name, hallucinated, p, turn)
        v.error_severity = None if hallucinated else 0
        return v if check.evidence else closed_book(v)

    def least_calls(self) -> int:
        return 1

    def expected_calls(self, checks) -> int:
        return sum(len(chunks(joined(c.evidence))) for c in checks)


class Direct(ChunkJudge):
    """The direct verdict: P(hallucinated) = P(No) / (P(Yes) + P(No)) of the reply's first token."""

    name = "direct"
    threshold = DIRECT_THRESHOLD
    reads_replies = True

    def chunk_scores(self, features, extractor) -> np.ndarray:
        return np.array([1.0 - f.p_supported for f in features])


class Probe(ChunkJudge):
    """The trained head on the same pass (``--head NAME``; default: the head shipped for the profile's model)."""

    name = "probe"

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self._head = None

    def head(self, extractor: Extractor):
        from halucheck.verifiers.probe.head import resolve

        if self._head is None or self._head.model != extractor.model_id:
            self._head = resolve(self.options.head, extractor.model_id)
        return self._head

    def preflight(self) -> None:
        """A named head that does not exist is an error before any work (the model is not known yet)."""
        from halucheck.verifiers.probe.head import SHIPPED, Head, head_path

        name = self.options.head
        if name and name != SHIPPED:
            Head.load(head_path(name))  # ConfigError in one line: missing, not a head, or another recipe

    def preflight_engine(self, engine: str) -> None:
        """The head reads hidden states: refused before any work on an engine other than the embedded one."""
        from halucheck.verifiers.probe.features import no_hidden_states

        if engine not in HIDDEN_STATE_ENGINES:
            raise no_hidden_states(f"-v {self.name}", engine)

    def chunk_scores(self, features, extractor) -> np.ndarray:
        return self.head(extractor).p_hallucinated(features)

    def describe(self) -> dict:
        meta = self._head.meta if self._head is not None else {}
        return {"head": self.options.head or "default", "head_model": meta.get("model"),
                "head_layers": meta.get("layers"), "head_trained_on": meta.get("sets")}


__all__ = ["DIRECT_THRESHOLD", "Direct", "Probe", "prompts_of"]
