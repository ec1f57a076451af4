"""Release: what turns a trained head into a released one with a stated guarantee. The noise
mechanisms (additive logistic, Laplace, Gaussian, Gamma-norm) and their calibration to ε, the
sensitivity sampler and its random-DP statement, the certified head with its proven sensitivity,
the DP-SGD head (Opacus, and batched for the attacks' shadows), the registry of release methods
(each method's head, noise and exact claim), protection (noisy heads and utility loss), and the
records shared by the training-time releases."""
