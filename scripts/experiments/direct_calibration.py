"""Is `direct`'s shipped calibrator fitted on the wrong statistic? It was fitted on the head's dev passes (the chunk
closest to the claim) and is applied to the lowest P over every chunk. Offline, on the clean panel's dev items
(every chunk in the feature store; see early_exit.py): the shipped map's ECE on them, and a map fitted on them
(cross-validated, and without each set in turn).

    python scripts/experiments/direct_calibration.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MODEL = "qwen2.5-coder-1.5b-instruct"


def main() -> None:
    import numpy as np
    from early_exit import panel_chunk_scores

    from halucheck.verifiers import calibration
    from halucheck.verifiers.calibration.metrics import expected_calibration_error as ece

    shipped, path = calibration.shipped("direct", MODEL)
    print(f"{path}: {shipped.summary()}")
    scored, missing = panel_chunk_scores()
    raw = np.array([min(p) for *_, p in scored])
    y = np.array([bool(item.label) for item, *_ in scored])
    sets = np.array([item.id.split(":", 1)[0] for item, *_ in scored])
    print(f"panel items {len(raw)} (without every pass stored: {missing}); ECE raw {ece(raw, y):.4f}, "
          f"shipped map {ece(np.array(shipped.apply_many(raw), dtype=float), y):.4f}")
    print(f"a map fitted on them: {calibration.fit(raw, y, verifier='direct', min_accuracy=None).summary()}")
    held_out = np.zeros_like(raw)
    for name in sorted(set(sets)):
        m = sets == name
        held_out[m] = calibration.fit(raw[~m], y[~m], verifier="direct", min_accuracy=None).apply_many(raw[m])
    print(f"fitted without each set in turn, applied to it: pooled ECE {ece(held_out, y):.4f}")


if __name__ == "__main__":
    main()
