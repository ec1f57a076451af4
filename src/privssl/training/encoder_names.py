"""The encoder architectures by name, free of torch: the artefact schemas check a saved encoder's
name against them without importing torch (privssl.training.encoders builds them)."""

ENCODERS = ("convnet", "resnet18")
