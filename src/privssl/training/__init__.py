"""Training, private or not: the base encoders, SimCLR pre-training, the fine-tuned heads (the
algorithm A_S shared by the released head, the sensitivity sampler and the shadows), Talos'
adversarial training, the contrastive-privacy targets, two-batch SAM and DPAdapter, and DPCL's
contrastive DP-SGD with its per-example gradients and private SGD. What a training *claims* (its
accountant, its sensitivity) lives in `accounting`; releasing a trained head with noise is
`release`."""
