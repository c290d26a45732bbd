"""attnmt: attention-based RNN sequence-to-sequence translation in PyTorch."""

__version__ = "0.1.0"
