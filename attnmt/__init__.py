"""attnmt: attention-based RNN sequence-to-sequence translation in PyTorch.

The package is flat, one concept per module (sweeps and serving are sub-packages), and imports
flow one way: the table in docs/design.md maps every module, its job and what it may import
(tests/test_layering.py holds the table and each module to its row).
"""

__version__ = "0.1.0"
