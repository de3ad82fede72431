"""What several test files share: graphs whose features are their ids, batch checks, PyG store
pairs, gradient comparisons, and starting the worker scripts of ``workers/`` under torchrun.

Test files import these from here and never from one another."""
