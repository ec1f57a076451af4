"""Privacy accounting of iterative trainings: Rényi DP of the subsampled Gaussian (orders,
reachability, phases), Google dp-accounting's PLD accountant to a stated accuracy (`pld`), the
DP-SGD head's accountant (PLD, or Opacus' RDP or PRV) and DPCL's (dp-accounting's RDP for
sampling without replacement, substitution adjacency; PLD on the Poisson analogue beside it),
with the sensitivities of what DPCL releases at every step. Free of torch where the config check
imports it."""
