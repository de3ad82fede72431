"""Scripts that the multi-process tests start under torchrun, one process a rank; the tests
also import their cases and setups from them."""
