"""Computing: the runner, the kernels, the paged cache, logprobs, token-exactness of the compute paths."""
