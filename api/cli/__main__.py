"""`python -m api.cli`: the same as the `cogmill` console script."""

from api.cli import main

main()
