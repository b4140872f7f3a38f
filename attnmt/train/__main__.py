"""`python -m attnmt.train ...` (what torchrun starts on each rank) is attnmt-train."""

from attnmt.cli.train import main

main()
