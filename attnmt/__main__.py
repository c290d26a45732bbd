"""`python -m attnmt` (and `torchrun -m attnmt`) is the same as the `attnmt` command."""

from attnmt.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
