"""Image data: the data sets of the image track (scikit-learn's digits, CIFAR-10/100, STL-10) as
uint8 tensors, the disjoint splits every rule draws its records from (public pre-training set D,
private set d, non-members, the attacker's shadow data, test, the sampler's reference pool), and
the label maps of the contrastive branch (task label and sensitive attribute of each class).
Nothing here knows about training, noise or attacks."""
