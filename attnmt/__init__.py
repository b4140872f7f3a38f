"""attnmt: attention-based RNN sequence-to-sequence translation between Chinese and English."""

__version__ = "0.1.0"
