"""A recording stand-in for the CUDA driver, for testing the launcher without a GPU."""
