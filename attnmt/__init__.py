"""attnmt: attention-based RNN sequence-to-sequence translation between Chinese and English.

from attnmt import Translator
translator = Translator.load("best.pt", device="cpu")
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["MODEL_CODE_VERSION", "Translator"]

# The version of what training computes. Bump it with a change to the code that alters the
# weights a run ends with (a model's formula, the loss, the optimiser step, the data order, a
# kernel whose numbers move): the scorer study's ledger (scripts/ledger.py) then stops reusing
# runs trained before it. A refactor whose outputs are tested equal does not bump it; nor does a
# config change, which the ledger's key sees by itself.
MODEL_CODE_VERSION = 1


def __getattr__(name: str) -> Any:
    # Imported on first use, so that `import attnmt.errors` (say) does not load torch.
    if name == "Translator":
        from attnmt.infer.translate import Translator

        return Translator
    raise AttributeError(f"module 'attnmt' has no attribute {name!r}")
