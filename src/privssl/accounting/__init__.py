"""Privacy accounting of iterative trainings: Rényi DP of the subsampled Gaussian (orders,
reachability, phases), the DP-SGD head's accountant (Opacus' RDP or PRV) and DPCL's (Google
dp-accounting, sampling without replacement, substitution adjacency), with the sensitivities of
what DPCL releases at every step. Free of torch where the config check imports it."""
