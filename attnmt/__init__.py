"""attnmt: attention-based RNN sequence-to-sequence translation between Chinese and English.

from attnmt import Translator
translator = Translator.load("best.pt", device="cpu")
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Translator"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so that `import attnmt.errors` (say) does not load torch.
    if name == "Translator":
        from attnmt.infer.translate import Translator

        return Translator
    raise AttributeError(f"module 'attnmt' has no attribute {name!r}")
