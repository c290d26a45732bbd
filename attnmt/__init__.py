"""attnmt: attention-based RNN sequence-to-sequence translation in PyTorch.

One concept per module; the concepts that take several modules are wings (`data`, `models`,
`search`, `jobs`, `sweep`, `serve`, `web`, `cli`). Imports flow one way: the table in
docs/design.md maps every module, its job and what it may import (tests/test_layering.py holds
the table and each module to its row).
"""

__version__ = "0.1.0"
