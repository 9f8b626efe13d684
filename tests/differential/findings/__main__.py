"""python -m tests.differential.findings FILE...: replay finding files."""

from tests.differential.findings import main

main()
